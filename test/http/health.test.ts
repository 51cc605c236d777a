// /healthz (SPEC §11): the loop's liveness from the sleeps it announces, the scheduler lock, and a
// real Scheduler whose loop is made to stall (its clock's sleep never returns) behind a real server.

import { describe, expect, it, onTestFinished } from 'vitest';
import { ManualClock, type Clock } from '../../src/clock.js';
import { loadProject } from '../../src/config/load.js';
import { LoopWatch, STALL_GRACE_MS, judgeHealth } from '../../src/http/health.js';
import { Metrics } from '../../src/http/metrics.js';
import { startStatusServer } from '../../src/http/server.js';
import { fileRoutineStore } from '../../src/state/file-store.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { MAX_SLEEP_MS } from '../../src/scheduler/timing.js';
import { httpGet } from '../helpers/http.js';
import { testProject } from '../helpers/testdir.js';
import { fixedSources, pageData } from './fixtures.js';

const settle = async (): Promise<void> => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};

describe('judgeHealth', () => {
  const base = { dueBy: 1000, nowMs: 1000, stopping: false, lockProblem: null };
  it('ok while the loop keeps its word and the lock is held', () => {
    expect(judgeHealth(base)).toEqual({ ok: true });
    expect(judgeHealth({ ...base, nowMs: 1000 + STALL_GRACE_MS })).toEqual({ ok: true });
  });
  it('names why not', () => {
    expect(judgeHealth({ ...base, nowMs: 1000 + STALL_GRACE_MS + 2000 })).toEqual({
      ok: false,
      reason: 'scheduler loop stalled: no loop iteration for 12s past its wake-up time',
    });
    expect(judgeHealth({ ...base, lockProblem: 'scheduler lock lost (taken over)' })).toEqual({
      ok: false,
      reason: 'scheduler lock lost (taken over)',
    });
    expect(judgeHealth({ ...base, dueBy: null })).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/^scheduler starting/),
    });
    expect(judgeHealth({ ...base, stopping: true })).toEqual({ ok: false, reason: 'scheduler stopping' });
  });
  it('a LoopWatch follows the announced sleeps on its clock', () => {
    const clock = new ManualClock();
    let lock: string | null = null;
    const w = new LoopWatch(clock, () => lock, 5000);
    expect(w.health().ok).toBe(false);
    w.sleeping(30_000);
    clock.advance(34_000);
    expect(w.health()).toEqual({ ok: true });
    clock.advance(2000);
    expect(w.health()).toMatchObject({ ok: false, reason: expect.stringMatching(/stalled/) });
    w.sleeping(100);
    expect(w.health()).toEqual({ ok: true });
    lock = 'scheduler lock lost (expired)';
    expect(w.health()).toEqual({ ok: false, reason: 'scheduler lock lost (expired)' });
    lock = null;
    w.stopping();
    expect(w.health()).toEqual({ ok: false, reason: 'scheduler stopping' });
  });
});

describe('a real scheduler behind /healthz', () => {
  it('200 while its loop runs, 503 "stalled" once the loop stops coming back', async () => {
    const dir = testProject({ routines: [{ id: 'yearly', schedule: '0 0 1 1 *', action: 'command', run: 'true' }] });
    const manual = new ManualClock();
    let stalled = false;
    // The loop's sleeps stop returning (short of shutdown) once `stalled` is set: a hung loop.
    const clock: Clock = {
      now: () => manual.now(),
      monotonic: () => manual.monotonic(),
      sleep: (ms, signal) =>
        stalled
          ? new Promise<void>((r) => signal?.addEventListener('abort', () => r(), { once: true }))
          : manual.sleep(ms, signal),
    };
    const watch = new LoopWatch(clock, () => null);
    const project = loadProject({ cwd: dir });
    const scheduler = new Scheduler({
      project,
      clock,
      log: () => {},
      fire: async () => {
        throw new Error('nothing fires in this test');
      },
      reloadProject: () => project,
      watchConfig: false,
      store: fileRoutineStore(project),
      host: 'test-host',
      observer: { sleeping: (ms) => watch.sleeping(ms) },
    });
    const stop = new AbortController();
    const done = scheduler.run(stop.signal);
    onTestFinished(async () => {
      stop.abort();
      await done;
    });
    const server = await startStatusServer({
      listen: { host: '127.0.0.1', port: 0 },
      token: null,
      metrics: new Metrics(true),
      warn: () => {},
      sources: fixedSources(pageData(), { health: async () => watch.health() }),
    });
    onTestFinished(() => server.close());
    const healthz = (): Promise<{ status: number; body: string }> => httpGet(`${server.url}healthz`);

    await settle();
    expect(await healthz()).toEqual(expect.objectContaining({ status: 200, body: 'ok\n' }));
    // a full sleep later the loop is back (and announces its next sleep): still healthy
    manual.advance(MAX_SLEEP_MS);
    await settle();
    manual.advance(MAX_SLEEP_MS - 1000);
    expect((await healthz()).status).toBe(200);
    // from its next wake-up on, the loop never returns
    stalled = true;
    manual.advance(1000);
    await settle();
    manual.advance(MAX_SLEEP_MS + STALL_GRACE_MS + 1000);
    const h = await healthz();
    expect(h.status).toBe(503);
    expect(h.body).toMatch(/^scheduler loop stalled: no loop iteration for \d+s past its wake-up time\n$/);
    // and shutdown still works (the stalled sleep gives way to the stop)
    stop.abort();
    await done;
  });
});
