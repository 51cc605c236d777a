import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

describe('validate checks the environment overrides as every command does', () => {
  it.each([
    [
      { ROUTINELY_LOCK_TTL_SECONDS: 'abc' },
      /ROUTINELY_LOCK_TTL_SECONDS: "abc" is not a number of seconds between 1 and 86400/,
    ],
    [{ ROUTINELY_LOCK_TTL_SECONDS: '0' }, /ROUTINELY_LOCK_TTL_SECONDS: "0"/],
    [
      { ROUTINELY_LOCK_REFRESH_SECONDS: '40' },
      /ROUTINELY_LOCK_REFRESH_SECONDS: 40 must be below the lock TTL \/ 2 \(TTL 60s\)/,
    ],
    [{ ROUTINELY_LOCK_REFRESH_SECONDS: '-1' }, /ROUTINELY_LOCK_REFRESH_SECONDS: "-1"/],
  ])('%j', async (env, message) => {
    const project = testProject();
    const v = await runCli(['validate'], { cwd: project, env });
    const lock = await runCli(['lock', 'status'], { cwd: project, env });
    expect(v.code).toBe(2);
    expect(v.stdout).toBe('');
    expect(v.stderr).toMatch(message);
    expect(v.stderr).toBe(lock.stderr);
  });

  it('good overrides pass', async () => {
    const project = testProject();
    mkdirSync(join(project, 'state'));
    const r = await runCli(['validate'], {
      cwd: project,
      env: { ROUTINELY_LOCK_TTL_SECONDS: '30', ROUTINELY_STATE_DIR: 'state', ROUTINELY_LOCK_DIR: 'state/locks' },
    });
    expect(r).toMatchObject({ code: 0, stderr: '' });
  });
});
