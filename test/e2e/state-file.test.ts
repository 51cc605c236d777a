// routine-state.json as a status script reads it (SPEC §3, §6): the file itself, parsed as JSON,
// compared with the history lines counted here — right after a command exits, and while a
// scheduler runs, within a second of every record, whoever wrote it.

import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { cliWithFault, eventually, runCli, sleep, startCli, startCliWithFault } from '../helpers/cli.js';
import { historyFactsOf, shownAsRecorded, stateFileOf } from '../helpers/state.js';
import { testProject } from '../helpers/testdir.js';

const cmd = (id: string, schedule: string, run: string, extra: object = {}) => ({
  id,
  schedule,
  action: 'command',
  run,
  ...extra,
});
const YEARLY = '0 0 1 1 *';
const haveStrace = spawnSync('strace', ['-V']).status === 0;

/** What differs between the file and the histories of `ids` now (empty: nothing). */
const differences = (dir: string, ids: string[]): string[] => {
  const file = stateFileOf(dir);
  return ids.map((id) => shownAsRecorded(file, historyFactsOf(dir, id), id)).filter((d): d is string => d !== null);
};

describe('routine-state.json', () => {
  it('routine run, pause and resume exit with the file up to date, mode 0600', async () => {
    const dir = testProject({
      routines: [cmd('ok', YEARLY, 'true'), cmd('bad', YEARLY, 'exit 3'), cmd('held', YEARLY, 'true')],
    });
    expect(stateFileOf(dir)).toBeNull();
    expect((await runCli(['routine', 'run', 'ok'], { cwd: dir })).code).toBe(0);
    expect(stateFileOf(dir)?.routines.ok).toMatchObject({
      last_result: 'success',
      counts: { success: 1, failure: 0, skipped: 0 },
    });
    expect(statSync(join(dir, '.routinely', 'routine-state.json')).mode & 0o777).toBe(0o600);
    expect((await runCli(['routine', 'run', 'bad'], { cwd: dir })).code).toBe(1);
    expect(stateFileOf(dir)?.routines.bad).toMatchObject({
      last_result: 'failure',
      last_reason: 'exit code 3',
      last_exit_code: 3,
      consecutive_failures: 1,
    });
    expect((await runCli(['routine', 'pause', 'held', '--note', 'deploy freeze'], { cwd: dir })).code).toBe(0);
    expect(stateFileOf(dir)?.routines.held).toMatchObject({ paused: true, paused_note: 'deploy freeze' });
    expect(differences(dir, ['ok', 'bad', 'held'])).toEqual([]);
    expect((await runCli(['routine', 'resume', 'held'], { cwd: dir })).code).toBe(0);
    expect(stateFileOf(dir)?.routines.held).toMatchObject({ paused: false, paused_note: null });
    expect(differences(dir, ['ok', 'bad', 'held'])).toEqual([]);
  });

  it('a running scheduler shows every record as it is made; commands beside it lose nothing, and the file is exact when it stops', async () => {
    const dir = testProject({
      routines: [
        cmd('tick', '* * * * * *', 'true'),
        cmd('two', '*/2 * * * * *', 'exit 2'),
        cmd('manual', YEARLY, 'true'),
        cmd('held', YEARLY, 'true'),
      ],
    });
    const ids = ['tick', 'two', 'manual', 'held'];
    const s = startCli(['scheduler', 'start'], { cwd: dir });
    await s.waitFor(/\[routine\] succeeded tick/);
    // Every 50 ms: each routine's number of records in its history and in the file. A record is
    // "shown" at the first look where the file's count reaches it.
    const seenInHistory = new Map<string, number[]>();
    const lags: number[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const now = performance.now();
        const file = stateFileOf(dir);
        for (const id of ids) {
          const facts = historyFactsOf(dir, id);
          const times = seenInHistory.get(id) ?? [];
          while (times.length < facts.fires) times.push(now);
          seenInHistory.set(id, times);
          const r = file?.routines[id];
          const shown = r ? r.counts.success + r.counts.failure + r.counts.skipped : 0;
          // the records the file shows for the first time now waited this long
          for (let k = 0; k < Math.min(shown, times.length); k++) {
            if (times[k]! >= 0) {
              lags.push(now - times[k]!);
              times[k] = -1;
            }
          }
        }
        await sleep(50);
      }
    })();
    // a manual run and a pause while the scheduler runs: the scheduler holds the file's lock and
    // shows them (SPEC §3: within a second; the commands leave the rewrite to it and say nothing)
    const manual = await runCli(['routine', 'run', 'manual'], { cwd: dir });
    expect(manual.code, manual.stderr).toBe(0);
    expect(manual.stderr).not.toMatch(/warning/);
    const pause = await runCli(['routine', 'pause', 'held'], { cwd: dir });
    expect(pause.code, pause.stderr).toBe(0);
    expect(pause.stderr).not.toMatch(/warning/);
    await eventually(
      () => stateFileOf(dir)?.routines.manual?.counts.success === 1 && stateFileOf(dir)?.routines.held?.paused === true,
      10_000,
      "the scheduler's rewrite with the manual run and the pause",
    );
    await s.waitFor(/\[routine\] failed two: exit code 2/);
    // two more rewrites by the scheduler (each renames a new file in: a new inode)
    const file = join(dir, '.routinely', 'routine-state.json');
    let inode = statSync(file).ino;
    let rewrites = 0;
    await eventually(
      () => {
        const now = statSync(file).ino;
        if (now !== inode) ((inode = now), rewrites++);
        return rewrites >= 2;
      },
      15_000,
      'two rewrites by the scheduler',
    );
    await eventually(() => lags.length > 5, 15_000, 'records shown while sampled');
    // the scheduler's later rewrites kept them
    expect(stateFileOf(dir)?.routines.manual).toMatchObject({ counts: { success: 1 } });
    expect(stateFileOf(dir)?.routines.held).toMatchObject({ paused: true });
    sampling = false;
    await sampler;
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    expect(differences(dir, ids)).toEqual([]);
    expect(lags.length).toBeGreaterThan(5);
    // SPEC §3's "within one second" is the publisher's rule, proved on an injected clock
    // (test/state/state-file.test.ts); here, on a machine of any load, every record showed
    // and the file is exact. The lag is printed for the record, not judged.
    console.log(
      `routine-state.json lag behind history: max ${Math.round(Math.max(...lags))} ms over ${lags.length} records`,
    );
  }, 30_000);

  it('a command beside a paused scheduler (SIGSTOP) waits out its hold of the file and writes its record itself; the scheduler, continued, keeps it', async () => {
    const dir = testProject({
      lock: { ttlSeconds: 2, refreshSeconds: 0.5 },
      routines: [cmd('first', YEARLY, 'true'), cmd('manual', YEARLY, 'true')],
    });
    const s = startCli(['scheduler', 'start'], { cwd: dir });
    onTestFinished(() => {
      s.child.kill('SIGCONT');
      s.child.kill('SIGKILL');
    });
    await s.waitFor(/\[scheduler\] started/);
    // the scheduler's first rewrite takes the lock it keeps (a record left to it)
    const first = await runCli(['routine', 'run', 'first'], { cwd: dir });
    expect(first.code, first.stderr).toBe(0);
    await eventually(() => stateFileOf(dir)?.routines.first?.counts.success === 1, 10_000, 'first shown');
    s.child.kill('SIGSTOP');
    // paused past two of its heartbeats: no longer taken for a running scheduler (a record left
    // to one paused just now shows when it continues)
    await sleep(1500);
    const manual = await runCli(['routine', 'run', 'manual'], { cwd: dir });
    expect(manual.code, manual.stderr).toBe(0);
    expect(manual.stderr).not.toMatch(/warning/);
    // on file when the command exits: not left to a scheduler that does not run
    expect(stateFileOf(dir)?.routines.manual).toMatchObject({ last_result: 'success', counts: { success: 1 } });
    // continued (paused past its 2 s TTL, it finds its scheduler lock lost and stops by itself):
    // whatever it writes as it goes keeps the command's record
    s.child.kill('SIGCONT');
    s.child.kill('SIGTERM');
    await s.exited;
    expect(differences(dir, ['first', 'manual'])).toEqual([]);
    expect(stateFileOf(dir)?.routines.manual).toMatchObject({ counts: { success: 1 } });
  }, 30_000);

  it('a command after the scheduler was SIGKILLed holding the file: takes the lock from the dead holder and exits with its record on file', async () => {
    const dir = testProject({ routines: [cmd('first', YEARLY, 'true'), cmd('manual', YEARLY, 'true')] });
    const s = startCli(['scheduler', 'start'], { cwd: dir });
    onTestFinished(() => {
      s.child.kill('SIGKILL');
    });
    await s.waitFor(/\[scheduler\] started/);
    const first = await runCli(['routine', 'run', 'first'], { cwd: dir });
    expect(first.code, first.stderr).toBe(0);
    await eventually(() => stateFileOf(dir)?.routines.first?.counts.success === 1, 10_000, 'first shown');
    s.child.kill('SIGKILL');
    await s.exited;
    const manual = await runCli(['routine', 'run', 'manual'], { cwd: dir });
    expect(manual.code, manual.stderr).toBe(0);
    expect(manual.stderr).not.toMatch(/warning/);
    expect(stateFileOf(dir)?.routines.manual).toMatchObject({ last_result: 'success', counts: { success: 1 } });
    expect(differences(dir, ['first', 'manual'])).toEqual([]);
  }, 30_000);

  it("writers at the same time never lose each other's updates", async () => {
    const ids = ['a', 'b', 'c', 'd', 'e', 'f'];
    const dir = testProject({ routines: ids.map((id) => cmd(id, YEARLY, 'true', { exclusive: false })) });
    for (let round = 0; round < 3; round++) {
      const runs = ids.map((id, i) =>
        i % 3 === 2
          ? runCli(['routine', round % 2 === 0 ? 'pause' : 'resume', id], { cwd: dir })
          : runCli(['routine', 'run', id], { cwd: dir }),
      );
      for (const r of await Promise.all(runs)) expect(r.code, r.stderr).toBe(0);
      expect(differences(dir, ids)).toEqual([]);
    }
    expect(stateFileOf(dir)?.routines.a?.counts.success).toBe(3);
    expect(stateFileOf(dir)?.routines.c?.paused).toBe(true);
  }, 60_000);

  it.skipIf(!haveStrace && process.env.CI !== 'true')(
    "a writer stalled between reading the file and replacing it loses nobody else's update",
    async () => {
      expect(haveStrace, 'strace is required (CI installs it)').toBe(true);
      const dir = testProject({
        routines: [cmd('a', YEARLY, 'sleep 1', { exclusive: false }), cmd('b', YEARLY, 'true', { exclusive: false })],
      });
      // `a`'s first rename — of its first new routine-state.json over the old one, once it has
      // read that — is held 1.5 s (the lock's files are linked, not renamed, until its release)
      const a = startCliWithFault(
        { cwd: dir, trace: 'rename', inject: 'rename:delay_enter=1500000:when=1' },
        ['routine', 'run', 'a'],
        ['ignore', 'ignore', 'pipe'],
      );
      let aErr = '';
      a.stderr!.on('data', (d: Buffer) => (aErr += d.toString()));
      const aExited = new Promise<number | null>((res) => a.on('exit', (code) => res(code)));
      onTestFinished(() => {
        a.kill('SIGKILL');
      });
      // `a` has started (its open marker is in its history) and is replacing the file
      await eventually(() => historyFactsOf(dir, 'a').open === 1, 10_000, 'a started');
      const b = await runCli(['routine', 'run', 'b'], { cwd: dir });
      expect(b.code, b.stderr).toBe(0);
      expect(stateFileOf(dir)?.routines.b).toMatchObject({ counts: { success: 1 } });
      expect(await aExited, aErr).toBe(0);
      // nobody removed its half-written file or replaced the file under it meanwhile
      expect(aErr).not.toMatch(/could not rewrite/);
      expect(differences(dir, ['a', 'b'])).toEqual([]);
    },
    30_000,
  );

  it.skipIf(!haveStrace && process.env.CI !== 'true')(
    "a writer stalled past its lock's time-out mid-write: the next holder's file stands, the stalled one says nothing false and exits with the file exact",
    async () => {
      expect(haveStrace, 'strace is required (CI installs it)').toBe(true);
      // the routine-state lock times out with the project's lock: 2 s here
      const dir = testProject({
        lock: { ttlSeconds: 2, refreshSeconds: 0.5 },
        routines: [cmd('a', YEARLY, 'sleep 1', { exclusive: false }), cmd('b', YEARLY, 'true', { exclusive: false })],
      });
      // `a`'s last rewrite (its third rename: the first rewrite renames its file into place, then
      // its lock's view aside) is held 4 s before its file is renamed into place, its event loop
      // with it (no heartbeat), so `b` takes the lock over (removing the temp file `a` left) and
      // writes its record; then `a` wakes, as it is about to exit
      const a = startCliWithFault(
        { cwd: dir, trace: 'rename', inject: 'rename:delay_enter=4000000:when=3' },
        ['routine', 'run', 'a'],
        ['ignore', 'ignore', 'pipe'],
      );
      let aErr = '';
      a.stderr!.on('data', (d: Buffer) => (aErr += d.toString()));
      const aExited = new Promise<number | null>((res) => a.on('exit', (code) => res(code)));
      onTestFinished(() => {
        a.kill('SIGKILL');
      });
      await eventually(() => historyFactsOf(dir, 'a').fires === 1, 10_000, 'a recorded');
      const b = await runCli(['routine', 'run', 'b'], { cwd: dir });
      expect(b.code, b.stderr).toBe(0);
      expect(stateFileOf(dir)?.routines.b).toMatchObject({ counts: { success: 1 } });
      expect(await aExited, aErr).toBe(0);
      // `a` found the lock no longer its own and did its rewrite again from the histories: no
      // warning of a failure that was only its lost turn, and the file has both
      expect(aErr).not.toMatch(/could not rewrite/);
      expect(differences(dir, ['a', 'b'])).toEqual([]);
    },
    30_000,
  );

  it.skipIf(!haveStrace && process.env.CI !== 'true')(
    'a command SIGKILLed right after its append (its mark left in the history folder): routine list shows its record at once, and the next rewrite removes the mark and stamps the folder again',
    async () => {
      expect(haveStrace, 'strace is required (CI installs it)').toBe(true);
      const dir = testProject({ routines: [cmd('a', YEARLY, 'true'), cmd('b', YEARLY, 'true')] });
      const history = join(dir, '.routinely', 'history');
      for (const id of ['a', 'b']) expect((await runCli(['routine', 'run', id], { cwd: dir })).code).toBe(0);
      const stamp = () => {
        const st = statSync(history, { bigint: true });
        return `${st.ino}:${st.mtimeNs}`;
      };
      const marks = () => readdirSync(history).filter((n) => n.startsWith('.writing.'));
      expect((stateFileOf(dir) as { history_stamp?: string }).history_stamp).toBe(stamp());
      // `pause a` is killed at the close(2) of its append to a.jsonl: the line is there, its mark
      // is left, and routine-state.json was not rewritten
      const killed = cliWithFault(
        { cwd: dir, paths: [join(history, 'a.jsonl')], trace: 'close', inject: 'close:signal=KILL:when=1' },
        ['routine', 'pause', 'a'],
      );
      expect(killed.status, killed.stderr).not.toBe(0);
      expect(historyFactsOf(dir, 'a').paused).toBe(true);
      expect(stateFileOf(dir)?.routines.a?.paused).toBe(false);
      const listed = await runCli(['routine', 'list', '--json'], { cwd: dir });
      expect(listed.code, listed.stderr).toBe(0);
      const rows = JSON.parse(listed.stdout) as { id: string; paused: boolean }[];
      expect(rows.find((r) => r.id === 'a')?.paused).toBe(true);
      expect(marks()).toHaveLength(1);
      // the next command's rewrite finds the mark's writer gone: removed, the file exact, no stamp
      // yet (it changed the folder); the one after stamps it again
      expect((await runCli(['routine', 'run', 'b'], { cwd: dir })).code).toBe(0);
      expect(marks()).toEqual([]);
      expect(differences(dir, ['a', 'b'])).toEqual([]);
      expect((await runCli(['routine', 'run', 'b'], { cwd: dir })).code).toBe(0);
      expect((stateFileOf(dir) as { history_stamp?: string }).history_stamp).toBe(stamp());
      expect(differences(dir, ['a', 'b'])).toEqual([]);
    },
    30_000,
  );
});
