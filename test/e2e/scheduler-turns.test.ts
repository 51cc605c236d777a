// SPEC §6 "The scheduler never competes with itself", "Failing until a success", `routine run`
// when busy (§4): the built CLI, real fires, a real exec lock held from outside.

import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { HistoryEntry } from '../../src/state/history.js';
import { CLI, childEnv, eventually, runCli, sleep, startCli, type Spawned } from '../helpers/cli.js';
import { httpGet } from '../helpers/http.js';
import { testProject } from '../helpers/testdir.js';

const cmd = (id: string, schedule: string, run: string, extra: object = {}) => ({
  id,
  schedule,
  action: 'command',
  run,
  ...extra,
});

/** The fires in a routine's history file (it also records pauses and open markers). */
function fires(dir: string, id: string): HistoryEntry[] {
  try {
    return readFileSync(join(dir, '.routinely', 'history', `${id}.jsonl`), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as HistoryEntry)
      .filter((e) => typeof e.result === 'string');
  } catch {
    return [];
  }
}

/** When the scheduler noticed a clock step: the time its log line carries (its own clock). */
const stepNoticed = (m: RegExpMatchArray): number => Date.parse(m[1]!);

async function stop(s: Spawned): Promise<number | null> {
  s.child.kill('SIGTERM');
  return (await s.exited).code;
}

describe('the scheduler takes turns at the exec lock', () => {
  it('five routines sharing ticks (one 0.3 s long) all run on every tick with no busy skip; a lock held from outside makes them skip, a non-exclusive routine runs on', async () => {
    const project = testProject({
      routines: [
        cmd('one', '* * * * * *', 'true'),
        cmd('two', '* * * * * *', 'true'),
        cmd('three', '* * * * * *', 'true'),
        cmd('slow', '*/2 * * * * *', 'sleep 0.3'),
        cmd('even', '*/2 * * * * *', 'true'),
        cmd('beside', '* * * * * *', 'true', { exclusive: false }),
      ],
    });
    const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 90_000 });
    await s.waitFor(/\[scheduler\] started \(6 routines\)/);
    const ids = ['one', 'two', 'three', 'slow', 'even'];
    // 8 s of shared ticks
    await eventually(() => fires(project, 'one').length >= 9, 30_000, 'nine ticks of "one"');
    const counted = Object.fromEntries(ids.map((id) => [id, fires(project, id)]));
    for (const id of ids) {
      const f = counted[id]!;
      expect(
        f.filter((e) => e.result !== 'success'),
        id,
      ).toEqual([]);
      // every tick, none missing between the first and the last
      const step = id === 'slow' || id === 'even' ? 2000 : 1000;
      const at = f.map((e) => Date.parse(e.scheduled_at));
      expect(
        at.slice(1).map((t, i) => t - at[i]!),
        id,
      ).toEqual(at.slice(1).map(() => step));
    }
    expect(s.stdout()).toMatch(/\[routine\] queued (two|three|slow|even): behind \w+/);
    expect(s.stdout()).not.toMatch(/exec busy/);
    // late, not skipped: on every tick a queued fire starts once the one before it in the queue
    // (config order) has finished
    const finished = (id: string, at: string): number =>
      Date.parse(counted[id]!.find((e) => e.scheduled_at === at)!.finished_at);
    for (const [id, behind] of [
      ['two', 'one'],
      ['three', 'two'],
      ['even', 'slow'],
    ] as const) {
      const late = counted[id]!.filter((e) => counted[behind]!.some((b) => b.scheduled_at === e.scheduled_at));
      expect(late.length, id).toBeGreaterThan(2);
      for (const e of late)
        expect(Date.parse(e.started_at), `${id} at ${e.scheduled_at}`).toBeGreaterThanOrEqual(
          finished(behind, e.scheduled_at),
        );
    }
    // held by something else: the seed's busy skip; the routine without the lock runs on
    const holder = startCli(['lock', 'run', '--if-busy', 'wait', '--', 'sh', '-c', 'echo holding; sleep 3'], {
      cwd: project,
    });
    await holder.waitFor(/holding/);
    const besideBefore = fires(project, 'beside').length;
    await s.waitFor(/\[routine\] skipped one: exec busy \(held by lock run since/, 10_000);
    await eventually(
      () => fires(project, 'beside').length >= besideBefore + 2,
      10_000,
      'beside runs while the lock is held',
    );
    expect((await holder.exited).code).toBe(0);
    expect(fires(project, 'beside').every((e) => e.result === 'success')).toBe(true);
    expect(await stop(s)).toBe(0);
  });

  it('a failure, then a busy skip: still failing in routine list, --check, --json and the status page', async () => {
    const project = testProject({ routines: [cmd('bad', '* * * * * *', 'exit 3')] });
    expect((await runCli(['routine', 'run', 'bad'], { cwd: project })).code).toBe(1);
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; sleep 60'], {
      cwd: project,
      timeoutMs: 90_000,
    });
    await holder.waitFor(/holding/);
    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, timeoutMs: 90_000 });
    const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    await eventually(
      () => fires(project, 'bad').filter((e) => e.result === 'skipped').length >= 2,
      15_000,
      'two busy skips',
    );
    const check = await runCli(['routine', 'list', '--check'], { cwd: project });
    expect(check.code).toBe(1);
    expect(check.stderr).toMatch(
      /^routinely: failing routine: bad \(failed at \d{4}-\d\d-\d\dT[\d:.]+Z, then \d+ skips?\)$/m,
    );
    const list = await runCli(['routine', 'list'], { cwd: project });
    expect(list.stdout).toMatch(/\nbad +\* \* \* \* \* \* +.+ +failing \(then \d+ skips?\) +0\/1\/\d+\n/);
    const rows = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as Record<
      string,
      unknown
    >[];
    expect(rows[0]).toMatchObject({
      id: 'bad',
      last_result: 'skipped',
      last_reason: 'exec busy',
      failing: true,
      consecutive_failures: 1,
    });
    const api = JSON.parse((await httpGet(new URL('/api/routines', url).href)).body) as Record<string, unknown>[];
    expect(api[0]).toMatchObject({ id: 'bad', failing: true });
    expect((await httpGet(url)).body).toMatch(/>failing \(then \d+ skips?\)</);
    holder.child.kill('SIGTERM');
    await holder.exited;
    expect(await stop(s)).toBe(0);
  });
});

describe('routine run when the exec lock is busy (SPEC §4)', () => {
  it("refused: exit 75 with the holder on stderr; nothing recorded, not counted, nobody notified; --if-busy skip exits 0; the routine's own ifBusy applies", async () => {
    const project = testProject({
      notify: { command: 'touch notified' },
      routines: [
        cmd('job', '0 3 * * *', 'true', { starvedAfterSkips: 1 }),
        cmd('patient', '0 3 * * *', 'true', { ifBusy: 'wait', waitTimeoutSeconds: 1 }),
        cmd('skipper', '0 3 * * *', 'true', { ifBusy: 'skip' }),
      ],
    });
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; sleep 60'], {
      cwd: project,
      timeoutMs: 90_000,
    });
    await holder.waitFor(/holding/);
    const refused = await runCli(['routine', 'run', 'job'], { cwd: project });
    expect(refused.code).toBe(75);
    expect(refused.stderr).toMatch(
      new RegExp(`^exec busy: held by pid ${holder.pid} on \\S+ \\(lock run\\), heartbeat \\d+s ago\\n`),
    );
    expect(refused.stdout).not.toMatch(/skipped/);
    const skip = await runCli(['routine', 'run', 'job', '--if-busy', 'skip'], { cwd: project });
    expect([skip.code, skip.stdout]).toEqual([0, 'skipped: exec busy\n']);
    const own = await runCli(['routine', 'run', 'skipper'], { cwd: project });
    expect([own.code, own.stdout]).toEqual([0, 'skipped: exec busy\n']);
    const waited = await runCli(['routine', 'run', 'patient'], { cwd: project });
    expect(waited.code).toBe(75);
    expect(waited.stderr).toMatch(
      /^waiting for the exec lock, held by pid \d+ .*; giving up after 1s\nexec busy: still held by pid \d+ on \S+ \(lock run\), heartbeat \d+s ago after waiting 1s\n/,
    );
    for (const id of ['job', 'patient', 'skipper']) expect(fires(project, id), id).toEqual([]);
    const rows = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as {
      id: string;
      counts: object;
      starved: boolean;
    }[];
    expect(rows.map((r) => [r.id, r.counts, r.starved])).toEqual(
      ['job', 'patient', 'skipper'].map((id) => [id, { success: 0, failure: 0, skipped: 0 }, false]),
    );
    expect(existsSync(join(project, 'notified'))).toBe(false);
    holder.child.kill('SIGTERM');
    await holder.exited;
    // free again: it runs and is recorded
    expect((await runCli(['routine', 'run', 'job'], { cwd: project })).code).toBe(0);
    expect(fires(project, 'job').map((e) => e.result)).toEqual(['success']);
  });
});

describe('reload with the start-up checks (SPEC §6 "Reload")', () => {
  it('a config swapped for a FIFO or a link to /dev/zero is refused and logged; firing goes on', async () => {
    const project = testProject({ routines: [cmd('tick', '* * * * * *', 'true')] });
    const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 90_000 });
    await s.waitFor(/\[scheduler\] started/);
    const config = join(project, 'routinely.json');
    const refusals = (): string[] =>
      s
        .stdout()
        .split('\n')
        .filter((l) => l.includes('[scheduler] config reload failed, keeping the old config: '));
    for (const [how, what] of [
      [`rm ${config} && mkfifo ${config}`, 'a FIFO \\(named pipe\\)'],
      [`rm ${config} && ln -s /dev/zero ${config}`, 'a character device'],
    ] as const) {
      const before = refusals().length;
      execFileSync('sh', ['-c', how], { cwd: project });
      s.child.kill('SIGHUP'); // the watcher may see it first; either way the reload refuses it
      await eventually(
        () => refusals().length > before,
        10_000,
        `a refused reload after: ${how}`,
        () => s.stdout(),
      );
      // named as what it is, never "does not exist" (SPEC §6 "Reload")
      expect(refusals().at(-1)).toMatch(
        new RegExp(`the config file: \\S*routinely\\.json is ${what}, not a regular file$`),
      );
      const ticks = fires(project, 'tick').length;
      await eventually(() => fires(project, 'tick').length >= ticks + 2, 10_000, 'ticks after the refused reload');
    }
    expect(await stop(s)).toBe(0);
    rmSync(config);
    writeFileSync(config, '{}');
  });
});

describe('a scheduler that lost its lock starts nothing (SPEC §6)', () => {
  it('paused past its TTL just before a tick while a second scheduler takes over (catchUp latest): no tick fires twice', async () => {
    const project = testProject({
      lock: { ttlSeconds: 3, refreshSeconds: 1 },
      routines: [cmd('ten', '*/10 * * * * *', 'true', { catchUp: 'latest' })],
    });
    const a = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 120_000 });
    await a.waitFor(/\[scheduler\] started/);
    await eventually(() => fires(project, 'ten').length >= 1, 20_000, 'a first fire');
    // stopped shortly before a tick it would fire (a tick it cannot have started: should this
    // process be too slow to stop it before the tick, the next tick is taken)
    let tick = 0;
    for (;;) {
      tick = Math.ceil((Date.now() + 2000) / 10_000) * 10_000;
      await sleep(tick - 1000 - Date.now());
      a.child.kill('SIGSTOP');
      if (Date.now() < tick - 200) break;
      a.child.kill('SIGCONT');
    }
    try {
      // a second scheduler gets in once the first one's lease has expired
      let b: Spawned | null = null;
      while (!b) {
        const candidate = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 120_000 });
        const outcome = await Promise.race([
          candidate.waitFor(/\[scheduler\] started/).then(() => 'started'),
          candidate.exited.then(() => 'refused'),
        ]);
        if (outcome === 'started') b = candidate;
        else await sleep(200);
      }
      await eventually(
        () => fires(project, 'ten').some((e) => Date.parse(e.scheduled_at) === tick),
        15_000,
        'the missed tick caught up by the second scheduler',
      );
      expect(b.stdout()).toContain(`[routine] catching up ten (missed ${new Date(tick).toISOString()})`);
      await sleep(tick + 4000 - Date.now()); // A stays stopped past the tick it was due to fire
      a.child.kill('SIGCONT');
      const { code } = await a.exited;
      expect(code).toBe(1);
      expect(a.stdout()).toMatch(/\[scheduler\] scheduler lock lost/);
      await eventually(
        () => fires(project, 'ten').some((e) => Date.parse(e.scheduled_at) === tick + 10_000),
        20_000,
        'the next tick, by the second scheduler',
      );
      expect(await stop(b)).toBe(0);
    } finally {
      a.child.kill('SIGCONT');
    }
    const times = fires(project, 'ten').map((e) => e.scheduled_at);
    expect(times.length).toBeGreaterThanOrEqual(3);
    expect(new Set(times).size).toBe(times.length);
  });
});

const FAKETIME_LIB = [
  '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1',
  '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1',
].find((p) => existsSync(p));
if (!FAKETIME_LIB && process.env.CI === 'true')
  throw new Error('CI=true but libfaketime is missing (Debian package "faketime")');

/** A scheduler's clock from libfaketime, read from `stamp` at every call (`+7200` steps it); the
 * monotonic clock untouched, as NTP leaves it. */
const fakeClock = (stamp: string): NodeJS.ProcessEnv => ({
  LD_PRELOAD: FAKETIME_LIB,
  FAKETIME_TIMESTAMP_FILE: stamp,
  FAKETIME_NO_CACHE: '1',
  FAKETIME_DONT_FAKE_MONOTONIC: '1',
});

(FAKETIME_LIB ? describe : describe.skip)('the wall clock steps back (SPEC §6 "Clock steps")', () => {
  it('a scheduler started 2 h fast keeps firing a per-second routine on the corrected clock at once, and logs the step', async () => {
    const project = testProject({ routines: [cmd('sec', '* * * * * *', 'true')] });
    const stamp = join(project, 'faketime');
    writeFileSync(stamp, '+7200\n');
    const s = startCli(['scheduler', 'start'], {
      cwd: project,
      timeoutMs: 90_000,
      // the monotonic clock is not stepped by NTP either
      env: fakeClock(stamp),
    });
    await s.waitFor(/\[scheduler\] started/);
    await eventually(() => fires(project, 'sec').length >= 2, 15_000, 'fires at +2 h');
    expect(Date.parse(fires(project, 'sec')[0]!.scheduled_at)).toBeGreaterThan(Date.now() + 7000_000);
    const stepped = Date.now();
    writeFileSync(stamp, '+0\n');
    const noticed = stepNoticed(await s.waitFor(/^(\S+) \[scheduler\] wall clock stepped back 2h0m0s/m, 15_000));
    const now = (): HistoryEntry[] =>
      fires(project, 'sec').filter((e) => Date.parse(e.scheduled_at) < stepped + 3600_000);
    await eventually(
      () => now().length >= 4,
      15_000,
      'fires on the corrected clock',
      () => s.stdout(),
    );
    // (in time order: a tick the loop woke for and the next can be recorded the other way round)
    const at = now()
      .map((e) => Date.parse(e.scheduled_at))
      .sort((a, b) => a - b);
    // from the step on (by the scheduler's own clock, as it logged it), every second: no gap
    // the size of the step
    expect(at[0]!, `first fire after the step noticed at ${new Date(noticed).toISOString()}`).toBeLessThanOrEqual(
      noticed + 1000,
    );
    expect(at.slice(1).map((t, i) => t - at[i]!)).toEqual(at.slice(1).map(() => 1000));
    // each ran (or, on a loaded machine, found its previous run still going: a skip), none failed
    expect(
      now().filter((e) => e.result !== 'success' && e.reason !== 'previous run still running'),
      JSON.stringify(now()),
    ).toEqual([]);
    expect(await stop(s)).toBe(0);
  });

  it("after the step, the corrected clock's fires are the last result in every view at once, though they started before the fast clock's (a failure is not hidden for the 2 h; nor is the recovery)", async () => {
    const project = testProject({ routines: [cmd('sec', '* * * * * *', 'test -f ok')] });
    writeFileSync(join(project, 'ok'), '');
    const stamp = join(project, 'faketime');
    writeFileSync(stamp, '+7200\n');
    const s = startCli(['scheduler', 'start'], {
      cwd: project,
      timeoutMs: 90_000,
      env: fakeClock(stamp),
    });
    await eventually(
      () => fires(project, 'sec').filter((e) => e.result === 'success').length >= 2,
      15_000,
      'successes at +2 h',
    );
    // NTP steps the clock back; from then on every fire fails
    rmSync(join(project, 'ok'));
    writeFileSync(stamp, '+0\n');
    await s.waitFor(/\[scheduler\] wall clock stepped back 2h0m0s/, 15_000);
    const failedNow = (): boolean =>
      fires(project, 'sec').some((e) => e.result === 'failure' && Date.parse(e.started_at) < Date.now() + 60_000);
    await eventually(failedNow, 15_000, 'a failure on the corrected clock', () => s.stdout());
    const list = async (): Promise<{ last_result: string; consecutive_failures: number }> =>
      (JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as never[])[0]!;
    await eventually(async () => (await list()).last_result === 'failure', 15_000, 'routine list shows the failure');
    expect((await list()).consecutive_failures).toBeGreaterThanOrEqual(1);
    expect((await runCli(['routine', 'list', '--check'], { cwd: project })).code).toBe(1);
    // and the recovery, on the corrected clock too
    writeFileSync(join(project, 'ok'), '');
    await eventually(async () => (await list()).last_result === 'success', 15_000, 'routine list shows the recovery');
    expect((await runCli(['routine', 'list', '--check'], { cwd: project })).code).toBe(0);
    expect(await stop(s)).toBe(0);
    // the index rebuilt from the history alone says the same
    rmSync(join(project, '.routinely', 'routine-state.json'), { force: true });
    rmSync(join(project, '.routinely', 'history', 'sec.index'), { force: true });
    expect((await list()).last_result).toBe('success');
  });

  it('a scheduler whose clock is 2 h ahead never takes over a live lock run on this host (SPEC §4.4): busy skips, the command runs to its end', async () => {
    const project = testProject({ routines: [cmd('sec', '* * * * * *', 'true')] });
    const marks = join(project, 'marks');
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', `echo holding; sleep 4; echo done > ${marks}`], {
      cwd: project,
    });
    await holder.waitFor(/holding/);
    const stamp = join(project, 'faketime');
    writeFileSync(stamp, '+7200\n');
    const s = startCli(['scheduler', 'start'], {
      cwd: project,
      timeoutMs: 60_000,
      env: fakeClock(stamp),
    });
    await s.waitFor(/\[routine\] skipped sec: exec busy \(held by lock run since /, 15_000);
    expect((await holder.exited).code, holder.stderr()).toBe(0);
    expect(holder.stderr()).not.toMatch(/lock lost/);
    expect(readFileSync(marks, 'utf8')).toBe('done\n');
    expect(s.stdout()).not.toMatch(/reclaim|took over|stale/i);
    expect(await stop(s)).toBe(0);
  });

  it('a lock run stopped with SIGSTOP is taken over by the scheduler once its heartbeat has not moved for a TTL, timed across ticks on its own clock (SPEC §4.4); resumed, the holder says lock lost', async () => {
    const project = testProject({
      lock: { ttlSeconds: 3, refreshSeconds: 1 },
      routines: [cmd('sec', '* * * * * *', 'true')],
    });
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; exec sleep 60'], {
      cwd: project,
      timeoutMs: 60_000,
    });
    await holder.waitFor(/holding/);
    const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 60_000 });
    try {
      await s.waitFor(/\[routine\] skipped sec: exec busy/, 15_000);
      holder.child.kill('SIGSTOP');
      await eventually(
        () => fires(project, 'sec').some((e) => e.result === 'success'),
        20_000,
        'a fire after the takeover',
        () => s.stdout(),
      );
      holder.child.kill('SIGCONT');
      const { code } = await holder.exited;
      expect(code).toBe(1);
      expect(holder.stderr()).toMatch(/lock lost/);
    } finally {
      holder.child.kill('SIGCONT');
    }
    expect(await stop(s)).toBe(0);
  });

  it('a running scheduler whose clock jumps 2 h forward and is corrected back fires on the corrected clock at once; nothing fires twice', async () => {
    const project = testProject({ routines: [cmd('sec', '* * * * * *', 'true')] });
    const stamp = join(project, 'faketime');
    writeFileSync(stamp, '+0\n');
    const s = startCli(['scheduler', 'start'], {
      cwd: project,
      timeoutMs: 90_000,
      env: fakeClock(stamp),
    });
    await s.waitFor(/\[scheduler\] started/);
    await eventually(() => fires(project, 'sec').length >= 2, 15_000, 'fires on the real clock');
    writeFileSync(stamp, '+7200\n');
    await s.waitFor(/\[scheduler\] wall clock stepped forward 2h0m0s; each routine's missed tick fires once/, 15_000);
    await eventually(
      () => fires(project, 'sec').some((e) => Date.parse(e.scheduled_at) > Date.now() + 7000_000),
      15_000,
      'fires 2 h ahead',
    );
    const corrected = Date.now();
    writeFileSync(stamp, '+0\n');
    const noticed = stepNoticed(
      await s.waitFor(/^(\S+) \[scheduler\] wall clock stepped back 2h0m0s; firing on the new time/m, 15_000),
    );
    const after = (): HistoryEntry[] =>
      fires(project, 'sec').filter(
        (e) => Date.parse(e.scheduled_at) >= corrected - 1000 && Date.parse(e.scheduled_at) < corrected + 3600_000,
      );
    await eventually(
      () => after().length >= 4,
      15_000,
      'fires on the corrected clock',
      () => s.stdout(),
    );
    // (in time order: a tick the loop woke for and the next can be recorded the other way round)
    const at = after()
      .map((e) => Date.parse(e.scheduled_at))
      .sort((a, b) => a - b);
    // the times jumped over were never fired: the corrected clock fires at once (by the
    // scheduler's own clock, as it logged the step), every second
    expect(at[0]!, `first fire after the step noticed at ${new Date(noticed).toISOString()}`).toBeLessThanOrEqual(
      noticed + 1000,
    );
    expect(at.slice(1).map((t, i) => t - at[i]!)).toEqual(at.slice(1).map(() => 1000));
    const all = fires(project, 'sec').map((e) => e.scheduled_at);
    expect(new Set(all).size, 'no tick fired twice').toBe(all.length);
    expect(await stop(s)).toBe(0);
  });
});

describe('stopping with a stalled log reader (SPEC §6 "Stop")', () => {
  it('exits within its shutdown timeout although nobody reads its output; scheduler status says stopping until then', async () => {
    const chatty = Array.from({ length: 8 }, (_, i) => `chatty-${i}-${'x'.repeat(48)}`);
    const project = testProject({
      routines: [
        ...chatty.map((id) => cmd(id, '* * * * * *', 'true', { exclusive: false })),
        cmd('long', '* * * * * *', 'sleep 30', { exclusive: false }),
      ],
    });
    // Its stdout is a pipe of 4 KiB that nobody reads (python3 sets the pipe's size).
    const wrapper = [
      'import fcntl, os, subprocess, sys',
      'r, w = os.pipe()',
      'fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ',
      'p = subprocess.Popen(sys.argv[1:], stdout=w, stderr=subprocess.DEVNULL)',
      'os.close(w)',
      'print(p.pid, flush=True)',
      "print('exit', p.wait(), flush=True)",
    ].join('\n');
    const py = spawn(
      'python3',
      ['-c', wrapper, process.execPath, CLI, 'scheduler', 'start', '--shutdown-timeout', '6'],
      { cwd: project, env: childEnv(), stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let said = '';
    py.stdout!.on('data', (d: Buffer) => (said += d.toString()));
    try {
      await eventually(() => /^\d+\n/.test(said), 10_000, 'the scheduler pid');
      const pid = Number(said.split('\n')[0]);
      // many lines a second into a 4 KiB pipe: its log is stalled by now; "long" runs
      await eventually(
        () => fires(project, chatty[0]!).length >= 5 && fires(project, 'long').length >= 2,
        30_000,
        'fires while the log is not read',
      );
      process.kill(pid, 'SIGTERM');
      const status = await runCli(['scheduler', 'status'], { cwd: project });
      expect(status.stdout).toMatch(new RegExp(`^scheduler: stopping, pid ${pid} on `));
      await eventually(
        () => /exit 0\n/.test(said),
        30_000,
        'the scheduler to exit although its output is not read',
        () => said,
      );
      expect(fires(project, 'long').at(-1)).toMatchObject({
        result: 'failure',
        reason: 'stopped at scheduler shutdown',
      });
      expect((await runCli(['scheduler', 'status'], { cwd: project })).code).toBe(3);
    } finally {
      py.kill('SIGKILL');
    }
  });
});

describe('a wait never eats the next tick (SPEC §6, §10)', () => {
  it(
    'ifBusy "wait" with the default wait, the lock held from outside over several ticks: each tick waits and gives up before the next, none is "previous run still running"',
    { timeout: 90_000 },
    async () => {
      const project = testProject({ routines: [cmd('w', '*/5 * * * * *', 'true', { ifBusy: 'wait' })] });
      const holder = startCli(
        ['lock', 'run', '--', 'sh', '-c', 'echo holding; while [ ! -e go ]; do sleep 0.05; done'],
        { cwd: project, timeoutMs: 80_000 },
      );
      await holder.waitFor(/holding/);
      const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 80_000 });
      await s.waitFor(/\[scheduler\] started/);
      // three ticks while it is held, each waiting on its own
      await eventually(
        () => fires(project, 'w').length >= 3,
        40_000,
        'three ticks of w',
        () => s.stdout(),
      );
      writeFileSync(join(project, 'go'), '');
      expect((await holder.exited).code).toBe(0);
      await eventually(
        () => fires(project, 'w').some((e) => e.result === 'success'),
        20_000,
        'w runs once the lock is free',
        () => s.stdout(),
      );
      expect(await stop(s)).toBe(0);
      const held = fires(project, 'w').filter((e) => e.result === 'skipped');
      expect(held.length).toBeGreaterThanOrEqual(3);
      expect(
        held.map((e) => e.reason),
        s.stdout(),
      ).toEqual(held.map(() => 'exec busy'));
      // one wait per tick: each tick said it waits, naming the holder
      expect(
        (s.stdout().match(/\[routine\] waiting w: exec busy \(held by lock run since /g) ?? []).length,
      ).toBeGreaterThanOrEqual(held.length);
      expect(s.stdout()).not.toMatch(/previous run still running/);
    },
  );
});
