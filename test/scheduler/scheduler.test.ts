// The scheduler loop with a manual clock and an injected fire function: what fires when, busy
// skips of a routine still running, pause, reload, clock jumps, catch-up, shutdown. State files
// are real (a temp project).

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { loadProject } from '../../src/config/load.js';
import type { FireResult } from '../../src/fire/firing.js';
import type { LogEvent } from '../../src/fire/log.js';
import { fileRoutineStore, pauseRoutine, readRoutineState } from '../../src/state/file-store.js';
import { Scheduler, type FireFn, type FireRequest } from '../../src/scheduler/scheduler.js';
import { readFires } from '../../src/state/file-store.js';
import { DatabaseError, StateIOError } from '../../src/errors.js';
import type { RoutineStore } from '../../src/state/store.js';
import { eventually } from '../helpers/cli.js';
import { readPhasesFile } from '../../src/state/phases.js';
import { testProject } from '../helpers/testdir.js';

const T0 = Date.UTC(2026, 10, 29, 19, 0, 0);
const routine = (id: string, schedule: string, extra: object = {}) => ({
  id,
  schedule,
  action: 'command',
  run: 'true',
  ...extra,
});
const settle = async (): Promise<void> => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};

function harness(
  config: object,
  startMs = T0 + 500,
  {
    wrapStore,
    ...extra
  }: {
    settleHeap?: () => void;
    wrapStore?: (s: RoutineStore) => RoutineStore;
    reloadProject?: () => ReturnType<typeof loadProject>;
  } = {},
) {
  const dir = testProject(config);
  const clock = new ManualClock(startMs);
  const events: LogEvent[] = [];
  const fires: { id: string; scheduledAt: string; request: FireRequest; finish: (r?: Partial<FireResult>) => void }[] =
    [];
  const fire: FireFn = (def, scheduledAt, o) =>
    new Promise((resolve) => {
      o.onStarted();
      fires.push({
        id: def.id,
        scheduledAt: scheduledAt.toISOString(),
        request: o,
        finish: (r = {}) =>
          resolve({
            result: 'success',
            reason: null,
            scheduled_at: scheduledAt.toISOString(),
            started_at: new Date(clock.now()).toISOString(),
            finished_at: new Date(clock.now()).toISOString(),
            duration_ms: 5,
            exit_code: 0,
            run_id: null,
            ...r,
          }),
      });
    });
  const project = loadProject({ cwd: dir });
  const scheduler = new Scheduler({
    project,
    clock,
    fire,
    log: (e) => events.push(e),
    reloadProject: () => loadProject({ cwd: dir }),
    shutdownTimeoutMs: 1000,
    watchConfig: false,
    random: () => 0.5,
    store: wrapStore ? wrapStore(fileRoutineStore(project)) : fileRoutineStore(project),
    host: 'test-host',
    ...extra,
  });
  const stop = new AbortController();
  const done = scheduler.run(stop.signal);
  return { dir, clock, events, fires, scheduler, stop, done, project };
}

describe('Scheduler', () => {
  it('a queued tick whose pause check fails (the database restarting) is a fire that could not start, and the queue goes on: the next ticks fire', async () => {
    let failing = false;
    const h = harness({ routines: [routine('a', '0 * * * *'), routine('b', '0 * * * *')] }, T0 + 500, {
      wrapStore: (real) =>
        Object.assign(Object.create(real) as RoutineStore, {
          readOne: (id: string, warn: (m: string) => void) => {
            if (failing) throw new DatabaseError('database db: the server is shutting down or starting up (57P03)');
            return real.readOne(id, warn);
          },
        }),
    });
    await settle();
    h.clock.advance(3600_000 - 500);
    await eventually(() => h.fires.length === 1, 5000);
    expect(h.events).toContainEqual({ event: 'routine.queued', routine: 'b', behind: 'a' });
    // b's turn comes while the state cannot be read
    failing = true;
    h.fires[0]!.finish();
    await eventually(() => readFires(h.project, 'b').length === 1, 5000);
    expect(readFires(h.project, 'b')[0]).toMatchObject({
      result: 'failure',
      reason: expect.stringMatching(/^not started: could not read whether it is paused: .*57P03/),
    });
    failing = false;
    // the next hour: a fires at once (nothing holds the queue), then b
    h.clock.advance(3600_000);
    await eventually(() => h.fires.length === 2, 5000);
    expect(h.fires[1]!.id).toBe('a');
    h.fires[1]!.finish();
    await eventually(() => h.fires.length === 3, 5000);
    expect(h.fires[2]!.id).toBe('b');
    h.fires[2]!.finish();
    expect(h.events).not.toContainEqual(expect.objectContaining({ event: 'routine.queued', routine: 'a' }));
    h.stop.abort();
    await h.done;
  });

  it('retries a failed fire after S, 2S… with jitter, each attempt its own history line; never a skip', async () => {
    const h = harness({
      routines: [
        routine('flaky', '0 * * * *', { retry: { attempts: 2, backoffSeconds: 10 } }),
        routine('busy', '0 * * * *', { retry: { attempts: 3, backoffSeconds: 10 } }),
      ],
    });
    await settle();
    h.clock.advance(3600_000 - 500);
    await settle();
    // due together: they take turns at the exec lock, in config order
    expect(h.fires.map((f) => [f.id, f.request.trigger, f.request.attempt])).toEqual([['flaky', 'schedule', 1]]);
    expect(h.events).toContainEqual({ event: 'routine.queued', routine: 'busy', behind: 'flaky' });
    h.fires[0]!.finish({ result: 'failure', reason: 'exit code 1', exit_code: 1 });
    await eventually(() => h.fires.length === 2, 5000);
    // a lock held by something else: a busy skip, never retried
    h.fires[1]!.finish({ result: 'skipped', reason: 'exec busy', exit_code: null });
    await eventually(() => h.events.some((e) => e.event === 'routine.retrying'), 5000);
    // random() is 0.5 in the harness: 10 s x 1.1
    expect(h.events).toContainEqual({ event: 'routine.retrying', routine: 'flaky', attempt: 2, of: 3, in_ms: 11_000 });
    h.clock.advance(10_999);
    await settle();
    expect(h.fires).toHaveLength(2);
    h.clock.advance(1);
    await eventually(() => h.fires.length === 3, 5000);
    expect(h.fires[2]!.request).toMatchObject({ trigger: 'retry', attempt: 2 });
    h.fires[2]!.finish({ result: 'failure', reason: 'exit code 1', exit_code: 1 });
    await eventually(() => h.events.filter((e) => e.event === 'routine.retrying').length === 2, 5000);
    expect(h.events).toContainEqual({ event: 'routine.retrying', routine: 'flaky', attempt: 3, of: 3, in_ms: 22_000 });
    h.clock.advance(22_000);
    await eventually(() => h.fires.length === 4, 5000);
    h.fires[3]!.finish({ result: 'failure', reason: 'exit code 1', exit_code: 1 });
    await eventually(() => readFires(h.project, 'flaky').length === 3, 5000);
    // the attempts are used up: no fourth
    h.clock.advance(100_000);
    await settle();
    expect(h.fires).toHaveLength(4);
    expect(readFires(h.project, 'flaky').map((f) => [f.trigger, f.attempt, f.result])).toEqual([
      ['schedule', 1, 'failure'],
      ['retry', 2, 'failure'],
      ['retry', 3, 'failure'],
    ]);
    expect(readFires(h.project, 'busy').map((f) => [f.trigger, f.attempt, f.result])).toEqual([
      ['schedule', 1, 'skipped'],
    ]);
    expect(h.events.filter((e) => e.event === 'routine.retrying' && e.routine === 'busy')).toEqual([]);
    h.stop.abort();
    await h.done;
  });

  it('a back-off that doubles past the longest timer waits that long, not 1 ms (Node fires an overflowing timer at once)', async () => {
    const h = harness({
      routines: [routine('slow', '0 * * * *', { retry: { attempts: 3, backoffSeconds: 2_000_000 } })],
    });
    await settle();
    h.clock.advance(3600_000 - 500);
    await settle();
    h.fires[0]!.finish({ result: 'failure', reason: 'exit code 1', exit_code: 1 });
    await eventually(() => h.events.some((e) => e.event === 'routine.retrying'), 5000);
    // 2 000 000 s x 1.1 is past the cap: the cap
    expect(h.events).toContainEqual({
      event: 'routine.retrying',
      routine: 'slow',
      attempt: 2,
      of: 4,
      in_ms: 2_000_000_000,
    });
    h.clock.advance(1_999_999_999);
    await settle();
    expect(h.fires).toHaveLength(1);
    h.clock.advance(1);
    await eventually(() => h.fires.length === 2, 5000);
    h.stop.abort();
    h.fires[1]!.finish();
    await h.done;
  });

  it('a success ends the retries', async () => {
    const h = harness({ routines: [routine('flaky', '0 * * * *', { retry: { attempts: 5, backoffSeconds: 1 } })] });
    await settle();
    h.clock.advance(3600_000 - 500);
    await settle();
    h.fires[0]!.finish({ result: 'failure', reason: 'exit code 1', exit_code: 1 });
    await eventually(() => h.events.some((e) => e.event === 'routine.retrying'), 5000);
    h.clock.advance(1100);
    await eventually(() => h.fires.length === 2, 5000);
    h.fires[1]!.finish();
    await eventually(() => readFires(h.project, 'flaky').length === 2, 5000);
    h.clock.advance(60_000);
    await settle();
    expect(h.fires).toHaveLength(2);
    expect(readRoutineState(h.project).routines.flaky).toMatchObject({
      last_result: 'success',
      consecutive_failures: 0,
      counts: { success: 1, failure: 1 },
    });
    h.stop.abort();
    await h.done;
  });

  it('ifBusy "wait": the fire waits for the lock up to waitTimeoutSeconds, by default until a margin before its next tick (at most an hour), and says whom it waits for', async () => {
    const h = harness(
      {
        routines: [
          routine('hourly', '0 * * * *', { ifBusy: 'wait' }),
          routine('daily', '0 0 * * *', { ifBusy: 'wait' }),
          routine('often', '*/10 * * * * *', { ifBusy: 'wait' }),
          routine('told', '0 * * * *', { ifBusy: 'wait', waitTimeoutSeconds: 30 }),
          routine('plain', '0 * * * *'),
        ],
      },
      Date.UTC(2026, 10, 29, 23, 59, 59, 500),
    );
    await settle();
    h.clock.advance(500);
    // due together, they start one after another; each is asked what to do with a foreign holder
    for (let n = 1; n <= 4; n++) {
      await eventually(() => h.fires.length === n, 5000);
      h.fires[n - 1]!.finish();
    }
    await eventually(() => h.fires.length === 5, 5000);
    const req = Object.fromEntries(h.fires.map((f) => [f.id, f.request]));
    // (the clock stands at the tick: a second before the next hour; capped at an hour; a tenth
    // of ten seconds before the next ten)
    expect(req.hourly).toMatchObject({ ifBusy: 'wait', waitTimeoutMs: 3_599_000 });
    expect(req.daily).toMatchObject({ ifBusy: 'wait', waitTimeoutMs: 3_600_000 });
    expect(req.often).toMatchObject({ ifBusy: 'wait', waitTimeoutMs: 9_000 });
    expect(req.told).toMatchObject({ ifBusy: 'wait', waitTimeoutMs: 30_000 });
    expect(req.plain).toMatchObject({ ifBusy: 'skip', waitTimeoutMs: undefined });
    req.plain!.onWait('pid 1 on h', null);
    expect(h.events).toContainEqual({ event: 'routine.waiting', routine: 'plain', lock: 'exec', holder: 'pid 1 on h' });
    h.fires[4]!.finish();
    h.stop.abort();
    await h.done;
  });

  it('fires each routine at its times and records the result', async () => {
    const h = harness({
      routines: [routine('ten', '*/10 * * * * *'), routine('off', '* * * * * *', { enabled: false })],
    });
    await settle();
    expect(h.events[0]).toEqual({ event: 'scheduler.started', routines: 1, pid: process.pid });
    h.clock.advance(9_500);
    await settle();
    expect(h.fires.map((f) => [f.id, f.scheduledAt])).toEqual([['ten', '2026-11-29T19:00:10.000Z']]);
    h.fires[0]!.finish();
    await eventually(() => readRoutineState(h.project).routines.ten?.counts.success === 1, 5000);
    expect(h.events.map((e) => e.event)).toContain('routine.succeeded');
    h.stop.abort();
    await h.done;
    expect(h.events.at(-1)).toEqual({ event: 'scheduler.stopped' });
  });

  it('a tick while the previous fire still runs is a skip, recorded apart from failures', async () => {
    const h = harness({ routines: [routine('slow', '*/10 * * * * *')] });
    await settle();
    h.clock.advance(9_500);
    await settle();
    h.clock.advance(10_000);
    await settle();
    expect(h.fires).toHaveLength(1);
    expect(h.events).toContainEqual({
      event: 'routine.skipped',
      routine: 'slow',
      reason: 'previous run still running',
    });
    await eventually(() => readRoutineState(h.project).routines.slow?.last_result === 'skipped', 5000);
    h.fires[0]!.finish({ result: 'failure', reason: 'exit code 1', exit_code: 1 });
    await eventually(() => readRoutineState(h.project).routines.slow?.counts.failure === 1, 5000);
    expect(readRoutineState(h.project).routines.slow).toMatchObject({
      counts: { success: 0, failure: 1, skipped: 1 },
      consecutive_failures: 1,
    });
    h.stop.abort();
    await h.done;
  });

  it('honours pause and resume from the state file without a restart', async () => {
    const h = harness({ routines: [routine('p', '*/10 * * * * *')] });
    await settle();
    await pauseRoutine(h.project, 'p', true, 'maintenance');
    h.clock.advance(9_500);
    await settle();
    expect(h.fires).toHaveLength(0);
    expect(h.events).toContainEqual({ event: 'routine.paused', routine: 'p', note: 'maintenance' });
    await pauseRoutine(h.project, 'p', false, null);
    h.clock.advance(10_000);
    await settle();
    expect(h.fires.map((f) => f.scheduledAt)).toEqual(['2026-11-29T19:00:20.000Z']);
    expect(h.events).toContainEqual({ event: 'routine.resumed', routine: 'p' });
    h.fires[0]!.finish();
    h.stop.abort();
    await h.done;
  });

  it('a paused routine has no times to miss: woken a minute late, the scheduler records none for it', async () => {
    const h = harness({ routines: [routine('p', '* * * * * *'), routine('q', '* * * * * *')] });
    await settle();
    await pauseRoutine(h.project, 'p', true, 'maintenance');
    h.clock.advance(60_000); // a stall: no clock step, the loop wakes late
    await settle();
    await eventually(() => (readRoutineState(h.project).routines.q?.counts.skipped ?? 0) > 0, 5000);
    expect(readFires(h.project, 'p')).toEqual([]);
    for (const f of h.fires) f.finish();
    h.stop.abort();
    await h.done;
  });

  it('gives back the garbage of starting and of each reload once, at the first idle moment (settle-heap.ts)', async () => {
    let settled = 0;
    const h = harness({ routines: [routine('a', '0 * * * *')] }, T0 + 500, { settleHeap: () => settled++ });
    await settle();
    expect(settled).toBe(1);
    h.clock.advance(60_000);
    await settle();
    expect(settled).toBe(1);
    writeFileSync(
      join(h.dir, 'routinely.json'),
      JSON.stringify({ routines: [routine('a', '0 * * * *'), routine('b', '30 * * * *')] }),
    );
    h.scheduler.requestReload();
    await settle();
    expect(h.events.some((e) => e.event === 'scheduler.reloaded')).toBe(true);
    expect(settled).toBe(2);
    // a reload that keeps the old config loaded nothing to give back
    writeFileSync(join(h.dir, 'routinely.json'), '{"routines": [{"id": "a", "schedule": "*/61 * * * *"}]}');
    h.scheduler.requestReload();
    await settle();
    expect(h.events.some((e) => e.event === 'scheduler.reload_failed')).toBe(true);
    expect(settled).toBe(2);
    h.stop.abort();
    await h.done;
  });

  it('reloads a changed config and keeps the old one when the new one is bad', async () => {
    const h = harness({ routines: [routine('a', '*/10 * * * * *')] });
    await settle();
    writeFileSync(
      join(h.dir, 'routinely.json'),
      JSON.stringify({ routines: [routine('a', '*/10 * * * * *'), routine('b', '*/5 * * * * *')] }),
    );
    h.scheduler.requestReload();
    await settle();
    expect(h.events).toContainEqual({
      event: 'scheduler.reloaded',
      routines: 2,
      added: ['b'],
      removed: [],
      changed: [],
    });
    h.clock.advance(4_500);
    await settle();
    expect(h.fires.map((f) => f.id)).toEqual(['b']);
    h.fires[0]!.finish();
    writeFileSync(
      join(h.dir, 'routinely.json'),
      '{"routines": [{"id": "a", "schedule": "*/61 * * * *", "action": "register"}]}',
    );
    h.scheduler.requestReload();
    await settle();
    const failed = h.events.find((e) => e.event === 'scheduler.reload_failed');
    expect(failed).toMatchObject({
      error: expect.stringContaining('routines[0].schedule: "*/61 * * * *" is not a valid cron expression'),
    });
    expect(h.scheduler.routineCount).toBe(2);
    h.stop.abort();
    await h.done;
  });

  it('a reload that moves stateDir is refused, naming the signal that restarts this scheduler and why the CLI will not see it meanwhile', async () => {
    const h = harness({ routines: [routine('a', '0 * * * *')] });
    await settle();
    writeFileSync(
      join(h.dir, 'routinely.json'),
      JSON.stringify({ stateDir: 'elsewhere', routines: [routine('a', '0 * * * *')] }),
    );
    h.scheduler.requestReload();
    await settle();
    expect(h.events.find((e) => e.event === 'scheduler.reload_failed')).toMatchObject({
      error: expect.stringMatching(
        new RegExp(
          `^stateDir, the lock folder, the backend or the project name changed: restart the scheduler for that \\(kill -TERM ${process.pid}, then start it again\\): .*do not see it .*a second scheduler started there would fire every routine again`,
        ),
      ),
    });
    h.stop.abort();
    await h.done;
  });

  it('recomputes fire times after the wall clock steps back', async () => {
    const h = harness({ routines: [routine('h', '0 * * * *')] }); // hourly
    await settle();
    h.clock.jumpWall(-3 * 3600_000); // 16:00:00.5 now; the 20:00 fire time would wait 4 h
    h.clock.advance(30_000); // the capped sleep wakes the loop, which notices the step
    await settle();
    h.clock.advance(3600_000 - 30_500);
    await settle();
    expect(h.fires.map((f) => f.scheduledAt)).toEqual(['2026-11-29T17:00:00.000Z']);
    h.fires[0]!.finish();
    h.stop.abort();
    await h.done;
  });

  it('a step of the clock reported by clockStepped() (the database clock offset moved) is handled at once, like a wall-clock step', async () => {
    const h = harness({ routines: [routine('t', '*/10 * * * * *')] });
    await settle();
    // the offset moved 25 s forward while the loop sleeps towards :10 (no time passes here)
    h.clock.jumpWall(25_000);
    h.scheduler.clockStepped();
    await settle();
    // the late tick fires once, at once; :20 is not fired on top of it
    expect(h.fires.map((f) => f.scheduledAt)).toEqual(['2026-11-29T19:00:10.000Z']);
    h.fires[0]!.finish();
    await eventually(() => readRoutineState(h.project).routines.t?.counts.success === 1, 5000);
    h.clock.advance(5_000); // 19:00:30.5
    await settle();
    expect(h.fires.map((f) => f.scheduledAt)).toEqual(['2026-11-29T19:00:10.000Z', '2026-11-29T19:00:30.000Z']);
    h.fires[1]!.finish();
    await eventually(() => readRoutineState(h.project).routines.t?.counts.success === 2, 5000);
    // and 60 s back: recomputed at once (not after a 30 s capped sleep), and logged; the times
    // before this scheduler started fire on schedule, none it dealt with fires twice
    h.clock.jumpWall(-60_000); // 18:59:30.5
    h.scheduler.clockStepped();
    await settle();
    expect(h.events).toContainEqual({ event: 'scheduler.clock_step', direction: 'back', step_ms: 60_000 });
    for (const [advance, at] of [
      [10_000, '18:59:40'],
      [10_000, '18:59:50'],
      [10_000, '19:00:00'],
    ] as const) {
      h.clock.advance(advance);
      await settle();
      expect(h.fires.map((f) => f.scheduledAt).at(-1)).toBe(`2026-11-29T${at}.000Z`);
      h.fires.at(-1)!.finish();
      await eventually(() => readRoutineState(h.project).routines.t?.counts.success === h.fires.length, 5000);
    }
    const before = h.fires.length;
    h.clock.advance(10_000); // 19:00:10.5: :10 fired (the late tick of the forward step)
    await settle();
    expect(h.fires.slice(before).map((f) => f.scheduledAt)).toEqual([]);
    // :20 was jumped over by the forward step, never fired: it fires now (SPEC §6)
    h.clock.advance(10_000); // 19:00:20.5
    await settle();
    expect(h.fires.slice(before).map((f) => f.scheduledAt)).toEqual(['2026-11-29T19:00:20.000Z']);
    h.fires.at(-1)!.finish();
    await eventually(() => readRoutineState(h.project).routines.t?.counts.success === h.fires.length, 5000);
    h.clock.advance(10_000); // 19:00:30.5: :30 was dealt with before the step back
    await settle();
    expect(h.fires.slice(before).map((f) => f.scheduledAt)).toEqual(['2026-11-29T19:00:20.000Z']);
    h.clock.advance(10_000); // 19:00:40.5
    await settle();
    expect(h.fires.map((f) => f.scheduledAt).at(-1)).toBe('2026-11-29T19:00:40.000Z');
    h.fires.at(-1)!.finish();
    h.stop.abort();
    await h.done;
  });

  it('a step back while the loop sleeps: the tick it wakes for, on the new time, fires (it was passed over, unrecorded)', async () => {
    const h = harness({ routines: [routine('t', '*/10 * * * * *')] });
    await settle();
    h.clock.advance(9_500); // 19:00:10: fires
    await eventually(() => h.fires.length === 1, 5000);
    h.fires[0]!.finish();
    await eventually(() => readRoutineState(h.project).routines.t?.counts.success === 1, 5000);
    // an hour back while it sleeps towards :20; it wakes 10 s later by its monotonic clock, at
    // 18:00:20 on the new time: a time it never saw, due now
    h.clock.jumpWall(-3600_000);
    h.clock.advance(10_000);
    await settle();
    expect(h.events).toContainEqual({ event: 'scheduler.clock_step', direction: 'back', step_ms: 3600_000 });
    expect(h.fires.map((f) => f.scheduledAt)).toEqual(['2026-11-29T19:00:10.000Z', '2026-11-29T18:00:20.000Z']);
    h.fires[1]!.finish();
    await eventually(() => readRoutineState(h.project).routines.t?.counts.success === 2, 5000);
    h.clock.advance(10_000);
    await settle();
    expect(h.fires.at(-1)?.scheduledAt).toBe('2026-11-29T18:00:30.000Z');
    h.fires.at(-1)!.finish();
    h.stop.abort();
    await h.done;
  });

  it('a forward jump corrected back fires on the corrected time at once; nothing it fired fires twice (SPEC §6)', async () => {
    const h = harness({ routines: [routine('t', '*/10 * * * * *')] });
    await settle();
    h.clock.advance(9_500); // 19:00:10: fires
    await eventually(() => h.fires.length === 1, 5000);
    h.fires[0]!.finish();
    await eventually(() => readRoutineState(h.project).routines.t?.counts.success === 1, 5000);
    // 2 h forward while the loop sleeps towards :20, noticed when it wakes (not told)
    h.clock.jumpWall(2 * 3600_000);
    h.clock.advance(10_000); // the wall: 21:00:20
    await settle();
    expect(h.events).toContainEqual({ event: 'scheduler.clock_step', direction: 'forward', step_ms: 2 * 3600_000 });
    // the late tick fires once; the two hours jumped over are not replayed
    expect(h.fires.map((f) => f.scheduledAt)).toEqual(['2026-11-29T19:00:10.000Z', '2026-11-29T19:00:20.000Z']);
    h.fires[1]!.finish();
    await eventually(() => readRoutineState(h.project).routines.t?.counts.success === 2, 5000);
    h.clock.advance(10_000); // 21:00:30: on the jumped time
    await settle();
    expect(h.fires.at(-1)?.scheduledAt).toBe('2026-11-29T21:00:30.000Z');
    h.fires.at(-1)!.finish();
    await eventually(() => readRoutineState(h.project).routines.t?.counts.success === 3, 5000);
    // corrected back: 19:00:40.5 — :30 and :40 were jumped over, never fired: :40 (now late by
    // half a second) is the next, and firing goes on every 10 s at once, not in two hours
    h.clock.jumpWall(-2 * 3600_000);
    h.clock.advance(10_000);
    await settle();
    expect(
      h.events.filter((e) => e.event === 'scheduler.clock_step').map((e) => (e as { direction: string }).direction),
    ).toEqual(['forward', 'back']);
    // :40 fires as the loop wakes for it (it was passed over before)
    expect(h.fires.at(-1)?.scheduledAt).toBe('2026-11-29T19:00:40.000Z');
    h.fires.at(-1)!.finish();
    await eventually(() => readRoutineState(h.project).routines.t?.counts.success === h.fires.length, 5000);
    const fromHere = h.fires.length;
    for (const at of ['19:00:50', '19:01:00', '19:01:10']) {
      h.clock.advance(10_000);
      await settle();
      expect(
        h.fires
          .slice(fromHere)
          .map((f) => f.scheduledAt)
          .at(-1),
      ).toBe(`2026-11-29T${at}.000Z`);
      h.fires.at(-1)!.finish();
      await eventually(() => readRoutineState(h.project).routines.t?.counts.success === h.fires.length, 5000);
    }
    // none fired twice
    const all = h.fires.map((f) => f.scheduledAt);
    expect(new Set(all).size).toBe(all.length);
    h.stop.abort();
    await h.done;
  });

  it('catchUp latest fires once at start when the last scheduled time was missed', async () => {
    const dir = testProject();
    mkdirState(dir, { version: 1, routines: { nightly: { last_scheduled_at: '2026-11-28T03:00:00.000Z' } } });
    writeFileSync(
      join(dir, 'routinely.json'),
      JSON.stringify({
        routines: [routine('nightly', '0 3 * * *', { catchUp: 'latest' }), routine('plain', '0 3 * * *')],
      }),
    );
    const clock = new ManualClock(T0);
    const fired: string[] = [];
    const events: LogEvent[] = [];
    const scheduler = new Scheduler({
      project: loadProject({ cwd: dir }),
      clock,
      log: (e) => events.push(e),
      watchConfig: false,
      store: fileRoutineStore(loadProject({ cwd: dir })),
      host: 'test-host',
      reloadProject: () => loadProject({ cwd: dir }),
      fire: async (def, scheduledAt) => {
        fired.push(`${def.id}@${scheduledAt.toISOString()}`);
        return {
          result: 'success',
          reason: null,
          scheduled_at: scheduledAt.toISOString(),
          started_at: '',
          finished_at: '',
          duration_ms: 0,
          exit_code: 0,
          run_id: null,
        };
      },
    });
    const stop = new AbortController();
    const done = scheduler.run(stop.signal);
    await settle();
    expect(fired).toEqual(['nightly@2026-11-29T03:00:00.000Z']);
    expect(events).toContainEqual({
      event: 'routine.catch_up',
      routine: 'nightly',
      scheduled_at: '2026-11-29T03:00:00.000Z',
    });
    stop.abort();
    await done;
  });

  it('catchUp latest: a paused routine is not caught up, and no "catching up" line says it is', async () => {
    const dir = testProject();
    mkdirState(dir, {
      version: 1,
      routines: {
        nightly: { last_scheduled_at: '2026-11-28T03:00:00.000Z', paused: true, paused_note: 'maintenance' },
      },
    });
    writeFileSync(
      join(dir, 'routinely.json'),
      JSON.stringify({ routines: [routine('nightly', '0 3 * * *', { catchUp: 'latest' })] }),
    );
    const fired: string[] = [];
    const events: LogEvent[] = [];
    const scheduler = new Scheduler({
      project: loadProject({ cwd: dir }),
      clock: new ManualClock(T0),
      log: (e) => events.push(e),
      watchConfig: false,
      store: fileRoutineStore(loadProject({ cwd: dir })),
      host: 'test-host',
      reloadProject: () => loadProject({ cwd: dir }),
      fire: async (def, scheduledAt) => {
        fired.push(`${def.id}@${scheduledAt.toISOString()}`);
        throw new Error('a paused routine fired');
      },
    });
    const stop = new AbortController();
    const done = scheduler.run(stop.signal);
    await settle();
    expect(fired).toEqual([]);
    expect(events.filter((e) => e.event === 'routine.catch_up')).toEqual([]);
    stop.abort();
    await done;
  });

  it('with a shared database: a tick whose claim went unanswered until its next tick is given up, and catchUp latest fires it once as soon as the database answers between ticks (the claims sweep)', async () => {
    const dir = testProject();
    mkdirState(dir, { version: 1, routines: { r: { last_scheduled_at: '2026-11-29T19:00:00.000Z' } } });
    writeFileSync(
      join(dir, 'routinely.json'),
      JSON.stringify({ routines: [routine('r', '* * * * *', { catchUp: 'latest' }), routine('plain', '* * * * *')] }),
    );
    const project = loadProject({ cwd: dir });
    const files = fileRoutineStore(project);
    const clock = new ManualClock(T0 + 500);
    // the database refuses every connection from 19:00:30 until 19:01:59.2
    const down = (): boolean => clock.now() >= T0 + 30_000 && clock.now() < T0 + 119_200;
    const refused = (): DatabaseError =>
      new DatabaseError('database db:5432/x: connection refused (ECONNREFUSED)', { neverConnected: true });
    const store: RoutineStore = {
      ...files,
      sharedTicks: true,
      claimTick: async (id, at, by) => {
        if (down()) throw refused();
        return files.claimTick(id, at, by);
      },
      orphanClaims: async () => {
        if (down()) throw refused();
        return [];
      },
    };
    const fired: string[] = [];
    const events: LogEvent[] = [];
    const scheduler = new Scheduler({
      project,
      clock,
      log: (e) => events.push(e),
      watchConfig: false,
      store,
      host: 'h1',
      claimer: 'c1',
      claimTtlMs: 4000,
      reloadProject: () => project,
      fire: async (def, scheduledAt) => {
        fired.push(
          `${def.id}@${scheduledAt.toISOString().slice(11, 19)}@${new Date(clock.now()).toISOString().slice(11, 21)}`,
        );
        return {
          result: 'success',
          reason: null,
          scheduled_at: scheduledAt.toISOString(),
          started_at: '',
          finished_at: '',
          duration_ms: 0,
          exit_code: 0,
          run_id: null,
        };
      },
    });
    const stop = new AbortController();
    const done = scheduler.run(stop.signal);
    await settle();
    while (clock.now() < T0 + 120_500) {
      clock.advance(100);
      await settle();
    }
    // 19:01 was given up at its next tick's margin (both routines), then fired late by catchUp
    // (r only) when the sweep at 19:01:59.5 found the database back; 19:02 fired on time
    expect(events).toContainEqual({
      event: 'scheduler.warning',
      message: expect.stringMatching(
        /^r: the tick of 2026-11-29T19:01:00.000Z was not fired: its claim went unanswered until the routine's next tick/,
      ),
    });
    expect(events).toContainEqual({
      event: 'routine.catch_up',
      routine: 'r',
      scheduled_at: '2026-11-29T19:01:00.000Z',
    });
    expect(fired).toEqual(['r@19:01:00@19:01:59.5', 'r@19:02:00@19:02:00.0', 'plain@19:02:00@19:02:00.0']);
    stop.abort();
    await done;
  });

  it('with a shared database, claims are taken no faster than fires start: at most claimsAhead claimed and not started', async () => {
    const AHEAD = 4;
    const ids = Array.from({ length: 10 }, (_, i) => `r${i}`);
    const dir = testProject({ routines: ids.map((id) => routine(id, '* * * * *', { exclusive: false })) });
    const project = loadProject({ cwd: dir });
    const files = fileRoutineStore(project);
    const clock = new ManualClock(T0 + 500);
    let claimed = 0;
    let started = 0;
    let most = 0;
    const store: RoutineStore = {
      ...files,
      sharedTicks: true,
      orphanClaims: async () => [],
      claimTick: async (id, at, by) => {
        claimed++;
        most = Math.max(most, claimed - started);
        return files.claimTick(id, at, by);
      },
    };
    // each fire starts only when let go, one at a time
    const waiting: (() => void)[] = [];
    const scheduler = new Scheduler({
      project,
      clock,
      log: () => {},
      watchConfig: false,
      store,
      host: 'h1',
      claimer: 'c1',
      reloadProject: () => project,
      claimsAhead: AHEAD,
      fire: (_def, scheduledAt, o) =>
        new Promise((resolve) =>
          waiting.push(() => {
            started++;
            o.onStarted();
            resolve({
              result: 'success',
              reason: null,
              scheduled_at: scheduledAt.toISOString(),
              started_at: '',
              finished_at: '',
              duration_ms: 0,
              exit_code: 0,
              run_id: null,
            });
          }),
        ),
    });
    const stop = new AbortController();
    const done = scheduler.run(stop.signal);
    await settle();
    clock.advance(59_500);
    await settle();
    expect(claimed).toBe(AHEAD);
    while (waiting.length > 0) {
      waiting.shift()!();
      await settle();
    }
    expect(started).toBe(10);
    expect(most).toBe(AHEAD);
    stop.abort();
    await done;
  });

  it('jitter delays the start by a random share of jitterSeconds', async () => {
    const h = harness({ routines: [routine('j', '*/30 * * * * *', { jitterSeconds: 10 })] }); // random() = 0.5: 5 s
    await settle();
    h.clock.advance(29_500); // the tick at :30
    await settle();
    expect(h.fires).toHaveLength(0);
    // every view reads it held back, and until when, from the board
    await eventually(() => readPhasesFile(h.project, () => {})?.routines.j?.phase === 'delayed', 5000);
    expect(readPhasesFile(h.project, () => {})!.routines.j).toEqual({
      phase: 'delayed',
      since: '2026-11-29T19:00:30.000Z',
      scheduled_at: '2026-11-29T19:00:30.000Z',
      until: '2026-11-29T19:00:35.000Z',
      why: 'jitter',
    });
    h.clock.advance(4_900);
    await settle();
    expect(h.fires).toHaveLength(0);
    h.clock.advance(200);
    await settle();
    expect(h.fires.map((f) => f.scheduledAt)).toEqual(['2026-11-29T19:00:30.000Z']);
    // started: the phase is gone (its open marker says it runs)
    await eventually(() => readPhasesFile(h.project, () => {})?.routines.j === undefined, 5000);
    h.fires[0]!.finish();
    h.stop.abort();
    await h.done;
  });

  it("a retry's back-off is on the board as a delayed fire: which attempt of how many, until when; gone once the retry starts", async () => {
    const h = harness({ routines: [routine('flaky', '0 * * * *', { retry: { attempts: 2, backoffSeconds: 10 } })] });
    await settle();
    h.clock.advance(3600_000 - 500);
    await settle();
    h.fires[0]!.finish({ result: 'failure', reason: 'exit code 1', exit_code: 1 });
    // random() = 0.5: 10 s and a tenth more
    await eventually(() => readPhasesFile(h.project, () => {})?.routines.flaky?.phase === 'delayed', 5000);
    expect(readPhasesFile(h.project, () => {})!.routines.flaky).toEqual({
      phase: 'delayed',
      since: '2026-11-29T20:00:00.000Z',
      scheduled_at: '2026-11-29T20:00:00.000Z',
      until: '2026-11-29T20:00:11.000Z',
      why: 'retry',
      attempt: 2,
      of: 3,
    });
    h.clock.advance(11_000);
    await eventually(() => h.fires.length === 2, 5000);
    await eventually(() => readPhasesFile(h.project, () => {})?.routines.flaky === undefined, 5000);
    h.fires[1]!.finish();
    h.stop.abort();
    await h.done;
  });

  it("a reload that removes a routine in a retry's back-off drops that retry at once: off the board then, and not back with the routine", async () => {
    const flaky = routine('flaky', '0 * * * *', { retry: { attempts: 2, backoffSeconds: 600 } });
    const h = harness({ routines: [flaky, routine('other', '0 0 1 1 *')] });
    await settle();
    h.clock.advance(3600_000 - 500);
    await settle();
    h.fires[0]!.finish({ result: 'failure', reason: 'exit code 1', exit_code: 1 });
    await eventually(() => readPhasesFile(h.project, () => {})?.routines.flaky?.phase === 'delayed', 5000);
    writeFileSync(join(h.dir, 'routinely.json'), JSON.stringify({ routines: [routine('other', '0 0 1 1 *')] }));
    h.scheduler.requestReload();
    await settle();
    // dropped now, said once (before: on the board as `retry 2 of 3` for the rest of its 11 min)
    await eventually(() => readPhasesFile(h.project, () => {})?.routines.flaky === undefined, 5000);
    expect(h.events).toContainEqual(
      expect.objectContaining({
        message: expect.stringMatching(
          /^flaky: its tick of \S+ is not fired: the routine was removed from the config while it waited for its retry/,
        ),
      }),
    );
    // put back: its back-off is gone with it, and the retry never comes
    writeFileSync(join(h.dir, 'routinely.json'), JSON.stringify({ routines: [flaky, routine('other', '0 0 1 1 *')] }));
    h.scheduler.requestReload();
    await settle();
    expect(readPhasesFile(h.project, () => {})?.routines.flaky).toBeUndefined();
    h.clock.advance(700_000);
    await settle();
    expect(h.fires).toHaveLength(1);
    h.stop.abort();
    await h.done;
  });

  it('a tick that falls due while a reload is validating is fired late when the reload changes its timing, not passed over without a record', async () => {
    let validating: (() => void) | null = null;
    const h = harness({ routines: [routine('a', '*/10 * * * * *')] }, T0 + 500, {
      reloadProject: () => {
        const p = loadProject({ cwd: h.dir });
        validating?.(); // (a big config: the clock goes on meanwhile)
        return p;
      },
    });
    validating = () => h.clock.advance(1_000);
    await settle();
    h.clock.advance(9_000); // 19:00:09.5; the tick of :10 falls due during the reload
    await settle();
    writeFileSync(join(h.dir, 'routinely.json'), JSON.stringify({ routines: [routine('a', '*/5 * * * * *')] }));
    h.scheduler.requestReload();
    await settle();
    expect(h.fires.map((f) => f.scheduledAt)).toEqual(['2026-11-29T19:00:10.000Z']);
    h.fires[0]!.finish();
    h.stop.abort();
    await h.done;
  });

  it('a reload that changes the project name is refused, as stateDir, the lock folder and the backend are', async () => {
    const h = harness({ project: 'one', routines: [routine('a', '0 0 1 1 *')] });
    await settle();
    writeFileSync(
      join(h.dir, 'routinely.json'),
      JSON.stringify({ project: 'two', routines: [routine('a', '0 0 1 1 *')] }),
    );
    h.scheduler.requestReload();
    await settle();
    expect(h.events).toContainEqual(
      expect.objectContaining({
        event: 'scheduler.reload_failed',
        error: expect.stringContaining('the project name changed'),
      }),
    );
    expect(h.events.some((e) => e.event === 'scheduler.reloaded')).toBe(false);
    h.stop.abort();
    await h.done;
  });

  it('a routine a reload removes while its fire runs is not retried: its failure is final at once, and no retry is logged', async () => {
    const flaky = routine('flaky', '0 * * * *', { retry: { attempts: 2, backoffSeconds: 600 } });
    const h = harness({ routines: [flaky, routine('other', '0 0 1 1 *')] });
    await settle();
    h.clock.advance(3600_000 - 500);
    await settle();
    expect(h.fires).toHaveLength(1);
    writeFileSync(join(h.dir, 'routinely.json'), JSON.stringify({ routines: [routine('other', '0 0 1 1 *')] }));
    h.scheduler.requestReload();
    await settle();
    h.fires[0]!.finish({ result: 'failure', reason: 'exit code 1', exit_code: 1 });
    await settle();
    expect(h.events.filter((e) => e.event === 'routine.retrying')).toEqual([]);
    expect(readPhasesFile(h.project, () => {})?.routines.flaky).toBeUndefined();
    expect(readFires(h.project, 'flaky', () => {}).map((f) => f.result)).toEqual(['failure']);
    h.stop.abort();
    await h.done;
  });

  it('never fires a scheduled time twice after the clock steps back', async () => {
    const h = harness({ routines: [routine('t', '*/10 * * * * *')] });
    await settle();
    h.clock.advance(9_500); // fires :10
    await settle();
    h.fires[0]!.finish();
    await eventually(() => readRoutineState(h.project).routines.t?.counts.success === 1, 5000);
    h.clock.jumpWall(-15_000); // now 18:59:55; the loop sleeps 10 s from :10 towards :20
    h.clock.advance(10_000); // it wakes at 19:00:05 and notices the step back
    await settle();
    // :00, before this scheduler started (19:00:00.5), is a time it never dealt with: it fires
    // now, late, as the loop slept through it on the new time
    expect(h.fires.map((f) => f.scheduledAt)).toEqual(['2026-11-29T19:00:10.000Z', '2026-11-29T19:00:00.000Z']);
    h.fires[1]!.finish();
    await eventually(() => readRoutineState(h.project).routines.t?.counts.success === 2, 5000);
    h.clock.advance(6_000); // 19:00:11: without care, :10 would come due again
    await settle();
    expect(h.fires.map((f) => f.scheduledAt)).toEqual(['2026-11-29T19:00:10.000Z', '2026-11-29T19:00:00.000Z']);
    h.clock.advance(10_000); // 19:00:21
    await settle();
    expect(h.fires.map((f) => f.scheduledAt)).toEqual([
      '2026-11-29T19:00:10.000Z',
      '2026-11-29T19:00:00.000Z',
      '2026-11-29T19:00:20.000Z',
    ]);
    h.fires[2]?.finish();
    h.stop.abort();
    await h.done;
  });

  it('a tick still waiting out its jitter does not start once the scheduler stops', async () => {
    const h = harness({ routines: [routine('j', '*/30 * * * * *', { jitterSeconds: 10 })] });
    await settle();
    h.clock.advance(29_500); // the tick at :30 waits 5 s of jitter
    await settle();
    h.stop.abort();
    await h.done;
    expect(h.fires).toHaveLength(0);
    expect(h.events).toContainEqual({ event: 'scheduler.stopping', running: 0 });
  });

  /** Drives the loop in 30 s steps (its longest sleep) up to `endMs`, finishing every fire and
   * waiting until it is recorded, so that no later tick meets it still running (a busy skip). */
  async function runUntil(h: ReturnType<typeof harness>, endMs: number): Promise<void> {
    const recorded = (): number =>
      Object.values(readRoutineState(h.project).routines).reduce((n, r) => n + r.counts.success, 0);
    let finished = 0;
    while (h.clock.now() < endMs) {
      h.clock.advance(30_000);
      await settle();
      if (h.fires.length === finished) continue;
      for (const f of h.fires.slice(finished)) f.finish();
      finished = h.fires.length;
      await eventually(() => recorded() === finished, 5000);
    }
    expect(h.events.filter((e) => e.event === 'routine.skipped')).toEqual([]);
  }

  it('across a fall-back night, a 0 1,13 routine fires once at 01:00; an hourly one in both passes', async () => {
    // America/New_York 2026-11-01: 02:00 EDT (06:00Z) falls back to 01:00 EST, so 01:00-01:59 happens twice.
    const zone = { timezone: 'America/New_York' };
    const h = harness(
      { routines: [routine('night', '0 1,13 * * *', zone), routine('hourly', '0 * * * *', zone)] },
      Date.parse('2026-11-01T04:00:00.500Z'),
    );
    await settle();
    await runUntil(h, Date.parse('2026-11-01T07:30:00Z')); // 02:30 EST
    const at = (id: string): string[] => h.fires.filter((f) => f.id === id).map((f) => f.scheduledAt);
    expect(at('night')).toEqual(['2026-11-01T05:00:00.000Z']); // 01:00 EDT, not also 01:00 EST
    expect(at('hourly')).toEqual(['2026-11-01T05:00:00.000Z', '2026-11-01T06:00:00.000Z', '2026-11-01T07:00:00.000Z']);
    h.stop.abort();
    await h.done;
  });

  it('on a spring-forward day, a 30 2,14 routine fires at the first minute after the gap', async () => {
    // Europe/Berlin 2026-03-29: 02:00 CET (01:00Z) jumps to 03:00 CEST; cron runs the 02:30 job at 03:00.
    const h = harness(
      { routines: [routine('list', '30 2,14 * * *', { timezone: 'Europe/Berlin' })] },
      Date.parse('2026-03-29T00:00:00.500Z'),
    );
    await settle();
    await runUntil(h, Date.parse('2026-03-29T02:00:00Z')); // 04:00 CEST
    expect(h.fires.map((f) => f.scheduledAt)).toEqual(['2026-03-29T01:00:00.000Z']);
    h.stop.abort();
    await h.done;
  });

  it('on stop, waits for running fires up to the shutdown timeout, then stops them', async () => {
    const h = harness({ routines: [routine('long', '*/10 * * * * *')] });
    await settle();
    h.clock.advance(9_500);
    await settle();
    expect(h.fires).toHaveLength(1);
    h.stop.abort();
    await settle();
    expect(h.events).toContainEqual({ event: 'scheduler.stopping', running: 1 });
    expect(h.events.at(-1)?.event).toBe('scheduler.stopping');
    h.fires[0]!.finish();
    await h.done;
    expect(h.events.at(-1)).toEqual({ event: 'scheduler.stopped' });
  });
});

describe('Scheduler: the queue for the exec lock (SPEC §6 "The scheduler never competes with itself")', () => {
  const own = {
    owner: { pid: process.pid, host: 'test-host', boot_id: null, start_time: null, command: 'routine', routine: 'x' },
    version: 1 as const,
    key: 'exec-run',
    lock_id: 'a'.repeat(32),
    generation: 1,
    created_at: 1,
    heartbeat_at: 1,
    expires_at: 2,
  };

  it('routines due together all run, one after another in config order, each logged as queued behind the one holding', async () => {
    const h = harness({
      routines: [
        routine('a', '0 * * * *'),
        routine('b', '0 * * * *'),
        routine('c', '0 * * * *'),
        routine('free', '0 * * * *', { exclusive: false }),
      ],
    });
    await settle();
    h.clock.advance(3600_000 - 500);
    await settle();
    // the one that takes no lock starts beside the first
    expect(h.fires.map((f) => f.id).sort()).toEqual(['a', 'free']);
    expect(h.events.filter((e) => e.event === 'routine.queued')).toEqual([
      { event: 'routine.queued', routine: 'b', behind: 'a' },
      { event: 'routine.queued', routine: 'c', behind: 'a' },
    ]);
    for (const f of h.fires) f.finish();
    await eventually(() => h.fires.length === 3, 5000);
    expect(h.fires[2]!.id).toBe('b');
    h.clock.advance(50); // lateness shows in history: started after scheduled
    h.fires[2]!.finish();
    await eventually(() => h.fires.length === 4, 5000);
    h.fires[3]!.finish();
    await eventually(
      () => ['a', 'b', 'c', 'free'].every((id) => readRoutineState(h.project).routines[id]?.counts.success === 1),
      5000,
    );
    expect(h.events.filter((e) => e.event === 'routine.skipped')).toEqual([]);
    h.stop.abort();
    await h.done;
  });

  it('a queued tick is skipped (exec busy) only when its own next tick comes first; the new tick takes its place', async () => {
    const h = harness({ routines: [routine('long', '*/10 * * * * *'), routine('often', '*/10 * * * * *')] });
    await settle();
    h.clock.advance(9_500); // :10 — long runs, often waits
    await settle();
    expect(h.fires.map((f) => f.id)).toEqual(['long']);
    h.clock.advance(10_000); // :20 — often's :10 is superseded; long's :20 is a previous-run skip
    await settle();
    await eventually(() => readRoutineState(h.project).routines.often?.counts.skipped === 1, 5000);
    expect(readRoutineState(h.project).routines.often).toMatchObject({
      last_result: 'skipped',
      last_reason: 'exec busy',
      last_scheduled_at: '2026-11-29T19:00:10.000Z',
    });
    expect(h.events).toContainEqual({
      event: 'routine.skipped',
      routine: 'often',
      reason: 'exec busy',
      holder: 'routine long',
    });
    h.fires[0]!.finish();
    await eventually(() => h.fires.length === 2, 5000);
    expect(h.fires[1]).toMatchObject({ id: 'often', scheduledAt: '2026-11-29T19:00:20.000Z' });
    h.fires[1]!.finish();
    h.stop.abort();
    await h.done;
  });

  it('a fire that meets the lock held by a fire of ours waits for its turn instead of skipping; a foreign holder is a busy skip', async () => {
    const h = harness({
      routines: [routine('w', '0 * * * *', { ifBusy: 'wait' }), routine('s', '0 * * * *'), routine('t', '0 * * * *')],
    });
    await settle();
    h.clock.advance(3600_000 - 500);
    await settle();
    expect(h.fires.map((f) => f.id)).toEqual(['w']);
    // w waits for a foreign holder: s may try the lock meanwhile, and meets that holder
    h.fires[0]!.request.onWait('pid 1 on elsewhere', null);
    await eventually(() => h.fires.length === 2, 5000);
    expect(h.fires[1]!.id).toBe('s');
    h.fires[1]!.finish({ result: 'skipped', reason: 'exec busy', exit_code: null });
    // t tries next and finds w holding (w got the lock at that moment): back in the queue
    await eventually(() => h.fires.length === 3, 5000);
    h.fires[2]!.finish({ result: 'skipped', reason: 'exec busy', exit_code: null, holder: own });
    await settle();
    expect(h.fires).toHaveLength(3);
    h.fires[0]!.finish();
    await eventually(() => h.fires.length === 4, 5000);
    expect(h.fires[3]!.id).toBe('t');
    h.fires[3]!.finish();
    await eventually(() => readRoutineState(h.project).routines.t?.counts.success === 1, 5000);
    expect(readRoutineState(h.project).routines.t?.counts.skipped).toBe(0);
    expect(readRoutineState(h.project).routines.s).toMatchObject({ counts: { skipped: 1 } });
    h.stop.abort();
    await h.done;
  });

  it('a tick put back in the queue (it met a fire of ours) is looked at again when its turn returns: paused meanwhile, it does not fire', async () => {
    const h = harness({
      routines: [routine('w', '0 * * * *', { ifBusy: 'wait' }), routine('s', '0 * * * *'), routine('t', '0 * * * *')],
    });
    await settle();
    h.clock.advance(3600_000 - 500);
    await settle();
    h.fires[0]!.request.onWait('pid 1 on elsewhere', null);
    await eventually(() => h.fires.length === 2, 5000);
    h.fires[1]!.finish({ result: 'skipped', reason: 'exec busy', exit_code: null });
    await eventually(() => h.fires.length === 3, 5000);
    expect(h.fires[2]!.id).toBe('t');
    // t meets w's hold: back in the queue; paused while it waits there
    h.fires[2]!.finish({ result: 'skipped', reason: 'exec busy', exit_code: null, holder: own });
    await settle();
    await pauseRoutine(h.project, 't', true, 'maintenance');
    h.fires[0]!.finish();
    await eventually(
      () =>
        h.events.some(
          (e) =>
            e.event === 'scheduler.warning' &&
            /^t: its tick of .* is not fired: the routine was paused/.test(e.message),
        ),
      5000,
    );
    await settle();
    expect(h.fires).toHaveLength(3);
    expect(readFires(h.project, 't')).toEqual([]);
    h.stop.abort();
    await h.done;
  });

  it.each([
    ['taken over by another: records nothing of the times it slept through', true, 1],
    // the ticks it did not start (19:00:20, 19:00:30 and the late 19:00:40: skipped, `scheduler
    // lost its lock`) and the five times between that late one and the wake-up (19:01:30)
    ['its lease only lapsed (nobody took the lock): records them, as its own', false, 9],
  ])('a scheduler no longer in charge of its lock starts nothing; %s', async (_name, takenOver, records) => {
    let inCharge = true;
    const dir = testProject({ routines: [routine('a', '*/10 * * * * *')] });
    const clock = new ManualClock(T0 + 500);
    const fired: string[] = [];
    const project = loadProject({ cwd: dir });
    const scheduler = new Scheduler({
      project,
      clock,
      log: () => {},
      watchConfig: false,
      store: fileRoutineStore(project),
      host: 'test-host',
      reloadProject: () => project,
      inCharge: () => inCharge,
      takenOver: async () => takenOver,
      fire: async (_def, scheduledAt, o) => {
        if (!o.mayStart()) return null;
        fired.push(scheduledAt.toISOString());
        return {
          result: 'success',
          reason: null,
          scheduled_at: scheduledAt.toISOString(),
          started_at: '',
          finished_at: '',
          duration_ms: 0,
          exit_code: 0,
          run_id: null,
        };
      },
    });
    const stop = new AbortController();
    const done = scheduler.run(stop.signal);
    await settle();
    clock.advance(9_500);
    await eventually(() => fired.length === 1, 5000);
    inCharge = false;
    clock.advance(10_000);
    await settle();
    clock.advance(10_000);
    await settle();
    // woken a minute late (a stall past the lock's TTL: the lock is another's now), it records
    // nothing of the times it slept through either (SPEC §4.10)
    clock.advance(60_000);
    await settle();
    expect(fired).toEqual(['2026-11-29T19:00:10.000Z']);
    await eventually(() => readFires(project, 'a').length >= records, 5000);
    expect(readFires(project, 'a')).toHaveLength(records);
    stop.abort();
    await done;
  });

  it("a record the state folder would not take goes in within a second of the folder taking records again, timed by the scheduler's clock (SPEC §4.15)", async () => {
    const dir = testProject({ routines: [routine('a', '0 * * * *')] });
    const project = loadProject({ cwd: dir });
    const clock = new ManualClock(T0 + 500);
    const real = fileRoutineStore(project);
    let full = true;
    const attempts: number[] = [];
    const store = {
      ...real,
      recordFire: async (...args: Parameters<typeof real.recordFire>) => {
        attempts.push(clock.monotonic());
        if (full) throw new StateIOError(`no space left on device writing ${dir}/.routinely/history/a.jsonl`);
        return real.recordFire(...args);
      },
    };
    const events: LogEvent[] = [];
    const scheduler = new Scheduler({
      project,
      clock,
      log: (e) => events.push(e),
      watchConfig: false,
      store,
      host: 'test-host',
      reloadProject: () => project,
      fire: async (_def, scheduledAt) => ({
        result: 'success',
        reason: null,
        scheduled_at: scheduledAt.toISOString(),
        started_at: scheduledAt.toISOString(),
        finished_at: scheduledAt.toISOString(),
        duration_ms: 0,
        exit_code: 0,
        run_id: null,
      }),
    });
    const stop = new AbortController();
    const done = scheduler.run(stop.signal);
    await settle();
    clock.advance(3600_000 - 500); // 20:00: a fire, whose record the full folder refuses
    await eventually(() => attempts.length === 1, 5000);
    expect(events).toContainEqual(expect.objectContaining({ event: 'scheduler.state', writable: false }));
    // the folder stays full for a minute: the record is tried again at most a second apart
    for (let waited = 0; waited < 60_000; waited += 100) {
      clock.advance(100);
      await settle();
    }
    const gaps = attempts.slice(1).map((t, i) => t - attempts[i]!);
    expect(gaps.length).toBeGreaterThan(50);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(1000);
    // room again: within a second of the scheduler's clock the record is in, once
    full = false;
    const freed = clock.monotonic();
    for (let waited = 0; waited < 1000 && readFires(project, 'a').length === 0; waited += 100) {
      clock.advance(100);
      await settle();
    }
    expect(readFires(project, 'a').map((f) => f.result)).toEqual(['success']);
    expect(clock.monotonic() - freed).toBeLessThanOrEqual(1000);
    await eventually(() => events.some((e) => e.event === 'scheduler.state' && e.writable), 5000, 'writable again');
    expect(
      events.filter((e) => e.event === 'scheduler.state').map((e) => (e as { writable: boolean }).writable),
    ).toEqual([false, true]);
    stop.abort();
    await done;
  });

  it('a tick that meets its lock held by a tick of another scheduler (a shared database) waits for its turn until its next tick; one held by a manual command is a busy skip', async () => {
    const h = harness({ routines: [routine('a', '*/10 * * * * *'), routine('b', '*/10 * * * * *')] }, T0 + 9500);
    const holder = (scheduled: boolean) => ({
      version: 1 as const,
      key: 'exec-run',
      lock_id: 'f'.repeat(32),
      generation: 3,
      created_at: T0 / 1000,
      heartbeat_at: T0 / 1000,
      expires_at: T0 / 1000 + 60,
      owner: {
        pid: 4711,
        host: 'other-host',
        boot_id: null,
        start_time: null,
        command: 'routine',
        routine: 'x',
        ...(scheduled ? { scheduled: true } : {}),
      },
    });
    await settle();
    h.clock.advance(500); // :10 — a and b are due
    await eventually(() => h.fires.length === 1, 5000);
    expect(h.fires[0]!.request).toMatchObject({ ifBusy: 'skip' });
    h.fires[0]!.finish({ result: 'skipped', reason: 'exec busy', exit_code: null, holder: holder(true) });
    // the same tick again, now waiting: up to a margin (a second) before :20
    await eventually(() => h.fires.length === 2, 5000);
    expect(h.fires[1]).toMatchObject({ id: 'a', scheduledAt: h.fires[0]!.scheduledAt });
    expect(h.fires[1]!.request).toMatchObject({ ifBusy: 'wait', waitTimeoutMs: 9000 });
    h.fires[1]!.finish();
    // b, held by a manual command: skipped as busy, no wait
    await eventually(() => h.fires.length === 3, 5000);
    expect(h.fires[2]!.id).toBe('b');
    h.fires[2]!.finish({ result: 'skipped', reason: 'exec busy', exit_code: null, holder: holder(false) });
    await eventually(() => readFires(h.project, 'b').length === 1, 5000);
    await settle();
    expect(h.fires).toHaveLength(3);
    expect(readFires(h.project, 'a').map((f) => f.result)).toEqual(['success']);
    expect(readFires(h.project, 'b').map((f) => [f.result, f.reason])).toEqual([['skipped', 'exec busy']]);
    h.stop.abort();
    await h.done;
  });

  it("a tick that comes while the previous fire's record is being written is a recorded skip, never dropped", async () => {
    const dir = testProject({ routines: [routine('a', '* * * * * *')] });
    const project = loadProject({ cwd: dir });
    const clock = new ManualClock(T0 + 500);
    const real = fileRoutineStore(project);
    // the first record is held (a slow disk) while the next tick comes
    let release: () => void = () => {};
    const held = new Promise<void>((r) => (release = r));
    let records = 0;
    const store = {
      ...real,
      recordFire: async (...args: Parameters<typeof real.recordFire>) => {
        if (++records === 1) await held;
        return real.recordFire(...args);
      },
    };
    const scheduler = new Scheduler({
      project,
      clock,
      log: () => {},
      watchConfig: false,
      store,
      host: 'test-host',
      reloadProject: () => project,
      fire: async (_def, scheduledAt) => ({
        result: 'success',
        reason: null,
        scheduled_at: scheduledAt.toISOString(),
        started_at: '',
        finished_at: '',
        duration_ms: 0,
        exit_code: 0,
        run_id: null,
      }),
    });
    const stop = new AbortController();
    const done = scheduler.run(stop.signal);
    await settle();
    clock.advance(500); // :01 fires; its record is held
    await eventually(() => records === 1, 5000);
    clock.advance(1000); // :02 comes meanwhile
    await eventually(() => records === 2, 5000);
    release();
    await eventually(() => readFires(project, 'a').length === 2, 5000);
    expect(readFires(project, 'a').map((f) => [f.scheduled_at, f.result, f.reason])).toEqual([
      ['2026-11-29T19:00:02.000Z', 'skipped', 'previous run still running'],
      ['2026-11-29T19:00:01.000Z', 'success', null],
    ]);
    stop.abort();
    await done;
  });

  it('a tick whose start is cut short by shutdown (after its claim, before its fire) is recorded as skipped, never lost (SPEC §9)', async () => {
    const dir = testProject({ routines: [routine('a', '*/10 * * * * *')] });
    const project = loadProject({ cwd: dir });
    const clock = new ManualClock(T0 + 500);
    const real = fileRoutineStore(project);
    // the pause flag is read once the tick is claimed: that read is held until shutdown began
    let release: () => void = () => {};
    const held = new Promise<void>((r) => (release = r));
    let reads = 0;
    const store = {
      ...real,
      readOne: async (id: string, warn: (m: string) => void) => {
        if (++reads === 1) await held;
        return real.readOne(id, warn);
      },
    };
    const fired: string[] = [];
    const scheduler = new Scheduler({
      project,
      clock,
      log: () => {},
      watchConfig: false,
      store,
      host: 'test-host',
      reloadProject: () => project,
      fire: async (_def, scheduledAt) => {
        fired.push(scheduledAt.toISOString());
        return {
          result: 'success',
          reason: null,
          scheduled_at: scheduledAt.toISOString(),
          started_at: '',
          finished_at: '',
          duration_ms: 0,
          exit_code: 0,
          run_id: null,
        };
      },
    });
    const stop = new AbortController();
    const done = scheduler.run(stop.signal);
    await settle();
    clock.advance(9_500);
    await eventually(() => reads === 1, 5000);
    stop.abort();
    await settle();
    release();
    await done;
    expect(fired).toEqual([]);
    expect(readFires(project, 'a').map((f) => [f.scheduled_at, f.result, f.reason])).toEqual([
      ['2026-11-29T19:00:10.000Z', 'skipped', 'scheduler stopping'],
    ]);
  });
});

function mkdirState(dir: string, state: object): void {
  const stateDir = join(dir, '.routinely');
  mkdirSync(stateDir, { recursive: true });
  writeFileSync(join(stateDir, 'routine-state.json'), JSON.stringify(state));
}
