// `routine list` from the running scheduler's cache (issue 12): the same bytes as the full path,
// and only while the cache is for this very config, environment and user; a stale, damaged or
// planted cache is never used (the full path answers, as if there were none).

import { chownSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, startCli, type Spawned } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

const FROM_CACHE = "routinely: debug: routine list from the scheduler's cache\n";
// yearly and weekly times: their relative times ("in 31d") do not move between two runs
const routines = [
  { id: 'new-year', schedule: '0 0 1 1 *', action: 'command', run: 'true' },
  { id: 'berlin', schedule: '30 6 * * 1', timezone: 'Europe/Berlin', action: 'command', run: 'true' },
  { id: 'off', schedule: '0 0 1 1 *', action: 'register', enabled: false },
];

async function withScheduler(config: object): Promise<{ project: string; s: Spawned }> {
  const project = testProject(config);
  const s = startCli(['scheduler', 'start'], { cwd: project });
  await s.waitFor(/\[scheduler\] started/);
  return { project, s };
}

const list = (project: string, args: string[] = [], env: Record<string, string> = {}) =>
  runCli(['routine', 'list', ...args], { cwd: project, env: { ROUTINELY_DEBUG: '1', ...env } });
const full = (project: string, args: string[] = []) =>
  runCli(['routine', 'list', ...args], { cwd: project, env: { ROUTINELY_LIST_CACHE: '0' } });

describe('routine list from the scheduler cache', () => {
  it('prints what the full path prints, table, --json and --check alike', async () => {
    const { project, s } = await withScheduler({ routines });
    await runCli(['routine', 'pause', 'berlin', '--note', 'freeze'], { cwd: project });
    for (const args of [[], ['--json'], ['--check'], ['--json', '--check']]) {
      const fast = await list(project, args);
      expect(fast.stderr.startsWith(FROM_CACHE)).toBe(true);
      const slow = await full(project, args);
      expect(fast.stdout).toBe(slow.stdout);
      expect(fast.stderr.slice(FROM_CACHE.length)).toBe(slow.stderr);
      expect(fast.code).toBe(slow.code);
    }
    expect((await list(project)).stdout).toMatch(/^scheduler: running, pid \d+/);
    s.child.kill('SIGTERM');
    await s.exited;
  });

  it('is not used once the config changes, the environment differs, or the cache is damaged or not a plain file of ours', async () => {
    const { project, s } = await withScheduler({ routines });
    const cache = join(project, '.routinely', 'list-cache.json');
    expect((await list(project)).stderr).toBe(FROM_CACHE);
    // another TZ (a routine without timezone runs in the machine zone) or ROUTINELY_* variable
    expect((await list(project, [], { TZ: 'Asia/Tokyo' })).stderr).toBe('');
    expect((await list(project, [], { ROUTINELY_LOCK_TTL_SECONDS: '90' })).stderr).toBe('');
    // the same text written again: a new change time, so not this cache (until the scheduler's reload rewrites it)
    const configPath = join(project, 'routinely.json');
    const text = readFileSync(configPath, 'utf8');
    s.child.kill('SIGSTOP'); // no reload meanwhile
    try {
      writeFileSync(configPath, text.replace('new-year', 'new-years-day'));
      const changed = await list(project);
      expect(changed.stderr).toBe('');
      expect(changed.stdout).toMatch(/\nnew-years-day /);
      writeFileSync(configPath, text);
      utimesSync(configPath, new Date(0), new Date(0));
      expect((await list(project)).stderr).toBe('');
    } finally {
      s.child.kill('SIGCONT');
    }
    s.child.kill('SIGTERM');
    await s.exited;
    // a restarted scheduler writes it again for the current text
    const again = startCli(['scheduler', 'start'], { cwd: project });
    await again.waitFor(/\[scheduler\] started/);
    expect((await list(project)).stderr).toBe(FROM_CACHE);
    again.child.kill('SIGTERM');
    await again.exited;
    const good = readFileSync(cache, 'utf8');
    const expected = (await full(project)).stdout;
    for (const damage of [
      '',
      '{',
      good.slice(0, good.length / 2),
      good.replace('"times":"', '"times":"x'),
      good.replace('"times":"', '"times":7,"was":"'),
      // a time's date, time and zone are checked when it is read (the first routine's next one)
      good.replace(/"times":"(\d+) [^ ]+/, '"times":"$1 soon'),
      good.replace(/"times":"(\d+ [^ ]+) [^ ]+/, '"times":"$1 7'),
      good.replace(/"times":"(\d+ [^ ]+ [^ ]+) [^ ,"]+/, `"times":"$1 ${'Z'.repeat(65)}`),
    ]) {
      writeFileSync(cache, damage);
      const r = await list(project);
      expect(r.stderr).toBe('');
      expect(r.stdout).toBe(expected);
    }
    // a symlink, or a file of another user: refused (and the list still answers)
    rmSync(cache);
    const elsewhere = join(project, 'planted.json');
    writeFileSync(elsewhere, good);
    symlinkSync(elsewhere, cache);
    expect(await list(project)).toMatchObject({ code: 0, stderr: '', stdout: expected });
    rmSync(cache);
    writeFileSync(cache, good);
    expect((await list(project)).stderr).toBe(FROM_CACHE); // the same bytes, ours: used
    if (process.getuid?.() === 0) {
      chownSync(cache, 65534, 65534);
      expect(await list(project)).toMatchObject({ code: 0, stderr: '', stdout: expected });
    }
  });
});

describe('routine list with no scheduler (SPEC §6)', () => {
  it('no countdown to a run nobody starts: what would be, on the fast path and the full one; with a scheduler, the countdown', async () => {
    const { project, s } = await withScheduler({ routines });
    expect((await list(project)).stdout).toMatch(/\nnew-year +0 0 1 1 \* +Jan 01 00:00 \S+, in \d+d +never/);
    s.child.kill('SIGTERM');
    await s.exited;
    // the cache the scheduler left: the fast path answers, with the same words as the full one
    const fast = await list(project);
    expect(fast.stderr).toBe(FROM_CACHE);
    const slow = await full(project);
    expect(fast.stdout).toBe(slow.stdout);
    expect(slow.stdout).toMatch(/^scheduler: not running\n/);
    expect(slow.stdout).toMatch(/\nnew-year +0 0 1 1 \* +none, would be Jan 01 00:00 \S+ +never/);
    expect(slow.stdout).not.toMatch(/, in \d/);
  });
});

describe('routine list while someone waits in a line (manual-waits.ts)', () => {
  it('takes the full path only for a waiter in the line of a routine lock, which prunes a dead one: the next list is from the cache again', async () => {
    const project = testProject({
      routines: [{ id: 'dump', schedule: '0 3 * * *', action: 'command', run: 'true', lock: 'db' }],
    });
    expect((await list(project)).code).toBe(0); // the cache
    expect((await list(project)).stderr).toBe(FROM_CACHE);
    const holder = (lock: string): Spawned =>
      startCli(['lock', 'run', '--lock', lock, '--', 'sh', '-c', 'echo holding; sleep 30'], { cwd: project });
    const waitThenKill = async (lock: string): Promise<void> => {
      const w = startCli(['lock', 'run', '--lock', lock, '--if-busy', 'wait', '--', 'true'], { cwd: project });
      await w.waitFor(new RegExp(`waiting for the ${lock} lock`));
      w.child.kill('SIGKILL');
      await w.exited;
    };
    // a dead waiter's ticket in the line of a lock no routine takes: the cache still answers
    const other = holder('cache');
    await other.waitFor(/holding/);
    await waitThenKill('cache');
    expect((await list(project)).stderr).toBe(FROM_CACHE);
    // …in the line of the routine's lock: the full path, which removes it; then the cache again
    const db = holder('db');
    await db.waitFor(/holding/);
    await waitThenKill('db');
    const fullPath = await list(project);
    expect(fullPath.code).toBe(0);
    expect(fullPath.stderr).toBe('');
    expect((await list(project)).stderr).toBe(FROM_CACHE);
    for (const h of [other, db]) h.child.kill('SIGTERM');
    await Promise.all([other.exited, db.exited]);
  });
});
