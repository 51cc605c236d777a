// An I/O error (EIO, injected by strace on the one path) when a holder looks at the lock's view
// `<key>.lock`: the view is for people and tools, the slots decide (docs/lock.md), so the holder
// goes on as it does when a slot cannot be read for a moment. Found by a fault pass: a heartbeat's
// look crashed `lock run` (and a scheduler) with a stack trace, its command left running; one at
// the release made it exit 74 after its command ran; one in the acquire left the slot behind.

import { spawnSync } from 'node:child_process';
import { linkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliWithFault, runCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

const haveStrace = spawnSync('strace', ['-V']).status === 0;
// (CI has strace: the cases run there)
const suite = haveStrace || process.env.CI === 'true' ? describe : describe.skip;

/** `routinely ARGS` with EIO on the `when`-th look (statx / lstat) at the exec lock's view. */
function withViewEio(project: string, when: string, args: string[]) {
  const view = join(project, '.routinely', 'locks', 'exec-run.lock');
  const calls = 'statx,lstat,newfstatat,fstat';
  const r = cliWithFault(
    { cwd: project, paths: [view], trace: calls, inject: `${calls}:error=EIO:when=${when}` },
    args,
  );
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

suite('EIO looking at the lock view', () => {
  it.each([
    ['1', 'the acquire'],
    ['2+', 'every heartbeat and the release'],
  ])(
    'on look %s (%s): the command runs to its end, lock run exits with its code, no stack trace, and the lock is free after',
    async (when) => {
      const project = testProject({ lock: { ttlSeconds: 4, refreshSeconds: 1 } });
      // a first run makes the folder and the view's name
      expect((await runCli(['lock', 'run', '--', 'true'], { cwd: project })).code).toBe(0);
      const r = withViewEio(project, when, ['lock', 'run', '--', 'sh', '-c', 'sleep 2.5; echo RAN; exit 3']);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(r.stdout).toContain('RAN');
      expect(r.code, r.stderr).toBe(3);
      const status = await runCli(['lock', 'status'], { cwd: project });
      expect(status.stdout).toMatch(/^exec-run lock: free/);
    },
  );

  it('a view there that cannot be read at all (every look fails): exit 74 naming the file, not a bare "fstat"', async () => {
    const project = testProject();
    expect((await runCli(['lock', 'run', '--', 'true'], { cwd: project })).code).toBe(0);
    const locks = join(project, '.routinely', 'locks');
    linkSync(join(locks, 'exec-run.slot.1'), join(locks, 'exec-run.lock'));
    const r = withViewEio(project, '1+', ['lock', 'run', '--', 'echo', 'RAN']);
    expect(r.stdout).not.toContain('RAN');
    expect(r.stderr).toBe(`routinely: input/output error looking at ${join(locks, 'exec-run.lock')}\n`);
    expect(r.code).toBe(74);
  });

  it("a view a release could not remove (the released top slot's own file) is no stale lock: status says free, break finds nothing", async () => {
    const project = testProject();
    for (let i = 0; i < 2; i++) expect((await runCli(['lock', 'run', '--', 'true'], { cwd: project })).code).toBe(0);
    const locks = join(project, '.routinely', 'locks');
    linkSync(join(locks, 'exec-run.slot.2'), join(locks, 'exec-run.lock'));
    const status = await runCli(['lock', 'status', '--json'], { cwd: project });
    expect(JSON.parse(status.stdout)).toMatchObject({ state: 'free', generation: 2 });
    const broken = await runCli(['lock', 'break'], { cwd: project });
    expect(broken.stdout).toMatch(/nothing to break/);
    expect(broken.code).toBe(0);
  });
});
