// Reconciling open fires (SPEC §6): a fire's marker is closed as interrupted when its process is
// gone on this host, and — on any host — when its lock was just taken over from it (the taker
// names the holder it reclaimed). The stalled holder's own late record of that fire then counts
// for nothing: the first record of a fire stands, on both backends. And a routine's notifications
// are delivered in the order its fires were recorded.

import { describe, expect, it, onTestFinished } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { loadProject } from '../../src/config/load.js';
import { Recorder } from '../../src/fire/recorder.js';
import type { LockRecord } from '../../src/lock/record.js';
import { connect } from '../../src/pg/connect.js';
import { pgRoutineStore } from '../../src/pg/routine-store.js';
import { fileRoutineStore } from '../../src/state/file-store.js';
import type { Fire, OpenFire } from '../../src/state/routine-state.js';
import type { RoutineDef } from '../../src/config/types.js';
import type { RoutineStore } from '../../src/state/store.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const backends = cluster ? (['file', 'postgres'] as const) : (['file'] as const);

async function setup(kind: (typeof backends)[number]) {
  const dir = testProject({
    project: 'app',
    notify: { command: 'true' },
    routines: [{ id: 'ex', schedule: '0 0 1 1 *', action: 'command', run: 'true' }],
  });
  const project = loadProject({ cwd: dir });
  let store: RoutineStore;
  if (kind === 'file') store = fileRoutineStore(project);
  else {
    const db = await connect(await freshDatabase(cluster!));
    onTestFinished(() => db.close());
    store = pgRoutineStore(db, 'app', 1000);
  }
  const warnings: string[] = [];
  /** What each announcement went on from: the routine's failures before the fire. */
  const announced: { result: string; failuresBefore: number | undefined }[] = [];
  const recorder = new Recorder({
    notify: async (o) => void announced.push({ result: o.fire.result, failuresBefore: o.prior?.consecutive_failures }),
    store,
    clock: systemClock,
    log: () => {},
    warn: (m) => warnings.push(m),
    stateDir: () => project.stateDir,
    host: 'h1',
  });
  return { project, store, recorder, warnings, announced };
}

const at = new Date(Date.now() - 60_000).toISOString();
/** A fire of another host's scheduler (h3, pid 4242): not judged from here by its process. */
const marker = (id: string, runId: string | null): OpenFire => ({
  id,
  scheduled_at: at,
  started_at: at,
  run_id: runId,
  trigger: 'schedule',
  owner: { pid: 4242, host: 'h3', boot_id: null, start_time: null },
});
const holder = (runId: string, pid = 4242): LockRecord => ({
  version: 1,
  key: 'exec-run',
  lock_id: 'a'.repeat(32),
  generation: 7,
  owner: { pid, host: 'h3', boot_id: null, start_time: null, command: 'routine', routine: 'ex', run_id: runId },
  created_at: Date.now() / 1000 - 60,
  heartbeat_at: Date.now() / 1000 - 60,
  expires_at: Date.now() / 1000 - 30,
});

describe.each(backends)('Recorder.reconcile (%s backend)', (kind) => {
  it("the fire whose lock was taken over from its holder on another host is recorded interrupted; other fires of that host are not, and the holder's late record counts for nothing", async () => {
    const s = await setup(kind);
    await s.store.openFire('ex', marker('0a0a0a0a0a0a0a0a', 'r-20261206T050000Z-aaaa'), () => {});
    await s.store.openFire('ex', marker('0b0b0b0b0b0b0b0b', 'r-20261206T050100Z-bbbb'), () => {});
    // without a takeover, another host's fires cannot be judged: left open
    expect((await s.recorder.reconcile(s.project)).closed).toBe(0);
    // another process of that host, or another run: not this lock's fire
    expect((await s.recorder.reconcile(s.project, undefined, holder('r-20261206T050000Z-aaaa', 4243))).closed).toBe(0);
    const r = await s.recorder.reconcile(s.project, undefined, holder('r-20261206T050000Z-aaaa'));
    expect(r.closed).toBe(1);
    await r.announced;
    const record = await s.store.readOne('ex', () => {});
    expect(record?.open_fires?.map((o) => o.id)).toEqual(['0b0b0b0b0b0b0b0b']);
    // the holder wakes (it was stalled) and records the same fire: the first record stands
    const late: Fire = {
      result: 'failure',
      reason: 'lock lost',
      scheduled_at: at,
      started_at: at,
      finished_at: new Date().toISOString(),
      duration_ms: 60_000,
      exit_code: null,
      run_id: 'r-20261206T050000Z-aaaa',
      closes: '0a0a0a0a0a0a0a0a',
    };
    await s.store.recordFire('ex', late, () => {});
    const history = await s.store.history('ex');
    expect(history.map((h) => [h.result, h.reason?.replace(/:.*/, '')])).toEqual([['failure', 'interrupted']]);
    expect((await s.store.readOne('ex', () => {}))?.counts).toMatchObject({ failure: 1 });
  });

  it("an interrupted fire is announced from the routine's record before it: its failures in a row go on from there (a second failure in a row says 2, not 1)", async () => {
    const s = await setup(kind);
    const failed: Fire = {
      result: 'failure',
      reason: 'exit code 2',
      scheduled_at: at,
      started_at: at,
      finished_at: at,
      duration_ms: 5,
      exit_code: 2,
      run_id: null,
    };
    await s.store.recordFire('ex', failed, () => {});
    await s.store.openFire('ex', marker('0d0d0d0d0d0d0d0d', 'r-20261206T050300Z-dddd'), () => {});
    const r = await s.recorder.reconcile(s.project, undefined, holder('r-20261206T050300Z-dddd'));
    expect(r.closed).toBe(1);
    await r.announced;
    expect(s.announced).toEqual([{ result: 'failure', failuresBefore: 1 }]);
    expect((await s.store.readOne('ex', () => {}))?.consecutive_failures).toBe(2);
  });

  it("an exec action's fire (its marker names no run) is recorded interrupted when its lock is taken over from that process for that routine", async () => {
    const s = await setup(kind);
    await s.store.openFire('ex', marker('0c0c0c0c0c0c0c0c', null), () => {});
    // the holder's record names the run made once it held the lock, and the routine
    const execHolder = (routine: string, pid = 4242): LockRecord => {
      const h = holder('r-20261206T050200Z-cccc', pid);
      return { ...h, owner: { ...h.owner, command: 'exec run', routine } };
    };
    expect((await s.recorder.reconcile(s.project, undefined, execHolder('other'))).closed).toBe(0);
    expect((await s.recorder.reconcile(s.project, undefined, execHolder('ex', 4243))).closed).toBe(0);
    expect((await s.recorder.reconcile(s.project, undefined, execHolder('ex'))).closed).toBe(1);
    expect((await s.store.readOne('ex', () => {}))?.open_fires ?? []).toEqual([]);
    const history = await s.store.history('ex');
    expect(history.map((h) => [h.result, h.reason?.replace(/:.*/, '')])).toEqual([['failure', 'interrupted']]);
  });
});

// (skipped only outside CI, where no server could be started)
(cluster ? describe : describe.skip)('Recorder.record, a record the database refuses', () => {
  it("the stalled holder's late record of a fire another scheduler recorded interrupted is neither counted nor announced by it (the interrupted one was, once)", async () => {
    const s = await setup('postgres');
    const told: string[] = [];
    s.recorder.observe({ fired: (id, fire) => void told.push(`${id} ${fire.result}`) });
    await s.store.openFire('ex', marker('0c0c0c0c0c0c0c0c', 'r-20261206T050000Z-cccc'), () => {});
    const r = await s.recorder.reconcile(s.project, undefined, holder('r-20261206T050000Z-cccc'));
    expect(r.closed).toBe(1);
    await r.announced;
    const def = s.project.config.routines[0]!;
    const late = await s.recorder.record(def, s.project, {
      result: 'success',
      reason: null,
      scheduled_at: at,
      started_at: at,
      finished_at: new Date().toISOString(),
      duration_ms: 60_000,
      exit_code: 0,
      run_id: 'r-20261206T050000Z-cccc',
      closes: '0c0c0c0c0c0c0c0c',
    });
    await late.announced;
    expect(s.warnings).toContainEqual(
      expect.stringMatching(/^ex: not recorded \(success\): another scheduler recorded this fire already/),
    );
    expect(s.announced.map((a) => a.result)).toEqual(['failure']);
    expect(told).toEqual(['ex failure']);
  });
});

describe('Recorder.announce', () => {
  it("delivers a routine's events in the order they were recorded: a recovery waits for the failure before it (its slow retries included); other routines do not wait", async () => {
    const dir = testProject({
      notify: { command: 'true' },
      routines: [
        { id: 'ex', schedule: '0 0 1 1 *', action: 'command', run: 'true' },
        { id: 'other', schedule: '0 0 1 1 *', action: 'command', run: 'true' },
      ],
    });
    const project = loadProject({ cwd: dir });
    const order: string[] = [];
    let releaseFailure = (): void => {};
    const failureHeld = new Promise<void>((r) => (releaseFailure = r));
    const recorder = new Recorder({
      notify: async (o) => {
        order.push(`start ${o.def.id} ${o.fire.result}`);
        // the failure's delivery is slow (a receiver answering 500, retried): held until released
        if (o.def.id === 'ex' && o.fire.result === 'failure') await failureHeld;
        order.push(`end ${o.def.id} ${o.fire.result}`);
      },
      store: fileRoutineStore(project),
      clock: systemClock,
      log: () => {},
      warn: () => {},
      stateDir: () => project.stateDir,
      host: 'h1',
    });
    const fire = (result: 'success' | 'failure'): Fire & { trigger: 'schedule' } => ({
      result,
      reason: result === 'failure' ? 'exit code 3' : null,
      scheduled_at: at,
      started_at: at,
      finished_at: at,
      duration_ms: 0,
      exit_code: result === 'failure' ? 3 : 0,
      run_id: null,
      trigger: 'schedule',
    });
    const [ex, other] = project.config.routines as [RoutineDef, RoutineDef];
    const failed = recorder.announce(ex, project, undefined, fire('failure'), true);
    const recovered = recorder.announce(ex, project, undefined, fire('success'), true);
    const elsewhere = recorder.announce(other, project, undefined, fire('failure'), true);
    await elsewhere;
    expect(order).toEqual(['start ex failure', 'start other failure', 'end other failure']);
    releaseFailure();
    await Promise.all([failed, recovered]);
    expect(order).toEqual([
      'start ex failure',
      'start other failure',
      'end other failure',
      'end ex failure',
      'start ex success',
      'end ex success',
    ]);
  });
});
