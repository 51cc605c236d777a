// `routinely import-crontab` end to end: a crontab on stdin or in a file becomes a routinely.json
// that validates, and its routines run as cron would have run them (env, \%, flock wrapper gone).

import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, childEnv, runCli } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';

const importing = (args: string[], input: string | null, cwd: string) =>
  spawnSync(process.execPath, [CLI, 'import-crontab', ...args], { cwd, env: childEnv(), input: input ?? undefined, stdio: [input === null ? 'ignore' : 'pipe', 'pipe', 'pipe'], encoding: 'utf8', timeout: 30_000 });

describe('routinely import-crontab', () => {
  it('crontab -l | routinely import-crontab > routinely.json: it validates, and a routine runs with the env and % as cron ran it', async () => {
    const project = testdir('routinely-import-');
    const crontab = [
      'MAILTO=me@example.com',
      'GREETING="hello from cron"',
      `*/10 * * * * flock -n ${join(project, 'stamp.lock')} sh -c 'echo "$GREETING" $(date +\\%Y) > stamp.txt'`,
      '@reboot ./start.sh',
      '',
    ].join('\n');
    const r = importing([], crontab, project);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toBe([
      'routinely: import-crontab: stdin:1: MAILTO=me@example.com: routinely sends no mail. For a message when a routine fails (with the last lines of its output, as cron mails them), set "notify": { "command": "./scripts/mail-failure.sh" } or { "webhook": "https://…" } (docs/routines.md, Notifications).',
      'routinely: import-crontab: stdin:4: not carried: @reboot runs at boot, which routinely does not see: give the routine a real schedule with "catchUp": "latest" (it fires once at scheduler start when a time was missed), or keep it in cron, or use a systemd oneshot unit (WantedBy=multi-user.target)',
      '',
    ].join('\n'));
    writeFileSync(join(project, 'routinely.json'), r.stdout);
    const validate = await runCli(['validate'], { cwd: project });
    expect(validate.code, validate.stderr).toBe(0);
    expect(validate.stdout).toMatch(/^routinely\.json: valid \(1 routine, 0 inline tasks\)/);
    const run = await runCli(['routine', 'run', 'echo'], { cwd: project });
    expect(run.code, run.stderr).toBe(0);
    expect(readFileSync(join(project, 'stamp.txt'), 'utf8')).toBe(`hello from cron ${new Date().getFullYear()}\n`);
  });

  it('reads a file; a system crontab (/etc/crontab form) with --system; a missing file or a folder is exit 2', async () => {
    const dir = testdir('routinely-import-');
    const file = importing([join(FIXTURES, 'crontab', 'user.crontab')], null, dir);
    expect(file.status).toBe(0);
    expect(file.stdout).toMatch(/^\/\/ Imported from .*user\.crontab by routinely import-crontab/);
    expect((file.stdout.match(/"action": "command"/g) ?? []).length).toBe(7);
    writeFileSync(join(dir, 'crontab'), 'SHELL=/bin/sh\n25 6 * * * root test -x /usr/sbin/anacron || run-parts --report /etc/cron.daily\n');
    const system = importing(['--system', 'crontab'], null, dir);
    expect(system.status, system.stderr).toBe(0);
    expect(system.stdout).toContain('"run": "test -x /usr/sbin/anacron || run-parts --report /etc/cron.daily"');
    expect(system.stderr).toBe('');
    const missing = importing(['no-such-crontab'], null, dir);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toBe('routinely: cannot read no-such-crontab: no such file\n');
    const folder = importing(['.'], null, dir);
    expect(folder.status).toBe(2);
    expect(folder.stderr).toBe('routinely: . is not a regular file\n');
  });
});
