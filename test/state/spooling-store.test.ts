// Recording through a database outage (SPEC §6): the spool, records sent again stored once, a
// late record that does not hide a newer failure, claims given back. Against a real server (the
// shared test cluster; nothing here stops it). Under CI these tests fail, never skip.

import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { DatabaseError, DatabaseStatementError } from '../../src/errors.js';
import { connect } from '../../src/pg/connect.js';
import { pgRoutineStore } from '../../src/pg/routine-store.js';
import { flushMessage, SpoolingStore, spoolClaim } from '../../src/state/spooling-store.js';
import { withKey, type RoutineStore } from '../../src/state/store.js';
import type { Fire, OpenFire } from '../../src/state/routine-state.js';
import { listSpool, spoolDir } from '../../src/state/spool.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import { testdir, testProject } from '../helpers/testdir.js';
import { ManualClock } from '../../src/clock.js';
import { loadProject } from '../../src/config/load.js';
import { fileRoutineStore, readFires } from '../../src/state/file-store.js';
import type { LogEvent } from '../../src/fire/log.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { NotStartedError } from '../../src/fire/unstarted.js';
import { eventually } from '../helpers/cli.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

async function store(): Promise<{ store: RoutineStore; query: (sql: string, v?: unknown[]) => Promise<unknown[]> }> {
  const db = await connect(await freshDatabase(cluster!));
  onTestFinished(() => db.close());
  return {
    store: pgRoutineStore(db, 'app', 1000),
    query: async (text, values) => (await db.query({ text, values })).rows,
  };
}

// Within the last day: the store forgets claims older than a day (now and then, at random, as it
// claims), so a fixed date would fail one run in twenty once it is a day old.
const T0 = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3_600_000;
const iso = (s: number): string => new Date(T0 + s * 1000).toISOString();

function opened(id: string, s: number): OpenFire {
  return {
    id,
    scheduled_at: iso(s),
    started_at: iso(s),
    run_id: `r-${id}`,
    trigger: 'schedule',
    owner: { pid: process.pid, host: 'h1', boot_id: null, start_time: null },
  };
}

function fire(s: number, result: Fire['result'], extra: Partial<Fire> = {}): Fire {
  return {
    result,
    reason: result === 'failure' ? 'exit code 1' : null,
    scheduled_at: iso(s),
    started_at: iso(s),
    finished_at: iso(s + 2),
    duration_ms: 2000,
    exit_code: result === 'skipped' ? null : result === 'success' ? 0 : 1,
    run_id: null,
    trigger: 'schedule',
    ...extra,
  };
}

/** A store whose recordFire commits and then loses the answer (the server committed, the
 * client saw its connection go). */
function ackLost(real: RoutineStore, times: number): RoutineStore {
  let left = times;
  return {
    ...real,
    read: (w) => real.read(w),
    async recordFire(id, f, warn, opts) {
      await real.recordFire(id, f, warn, opts);
      if (left-- > 0) throw new DatabaseError('database 127.0.0.1:5432/x: timed out');
    },
  };
}

const down: Partial<RoutineStore> = {
  recordFire: async () => {
    throw new DatabaseError('database 127.0.0.1:5432/x: connection refused');
  },
};

suite('recording through an outage', () => {
  it('a record committed whose answer was lost is spooled, and sending it again stores it once', async () => {
    const { store: real, query } = await store();
    const dir = testdir();
    const warnings: string[] = [];
    await real.openFire('a', opened('0a0a0a0a', 0), () => {});
    const f = fire(0, 'success', { closes: '0a0a0a0a', run_id: 'r-0a0a0a0a' });
    const out = await new SpoolingStore(ackLost(real, 1), dir).recordFire('a', f, (m: string) => warnings.push(m));
    expect(out).toMatchObject({ spooledTo: expect.any(String) });
    // a skip (no open fire) gets a key of its own, and is kept once as well
    const skip = await new SpoolingStore(ackLost(real, 1), dir).recordFire(
      'a',
      fire(1, 'skipped', { reason: 'exec busy' }),
      () => {},
    );
    expect(skip).toMatchObject({ spooledTo: expect.any(String) });
    expect(listSpool(dir, () => {})).toHaveLength(2);
    // flushed twice (two processes of the host at once would do the same): stored once each
    const [r1, r2] = await Promise.all([
      new SpoolingStore(real, dir).flushSpool(() => {}),
      new SpoolingStore(real, dir).flushSpool(() => {}),
    ]);
    expect(r1.left + r2.left).toBe(0);
    expect(await new SpoolingStore(real, dir).flushSpool(() => {})).toEqual({
      recorded: 0,
      released: 0,
      refused: 0,
      left: 0,
    });
    const history = await real.history('a');
    expect(history.map((h) => h.result)).toEqual(['success', 'skipped']);
    const state = (await real.read(() => {})).routines.a!;
    expect(state.counts).toEqual({ success: 1, failure: 0, skipped: 1 });
    expect(state.open_fires).toBeUndefined();
    expect(readdirSync(spoolDir(dir))).toEqual([]);
    expect(await query('SELECT 1 FROM routinely_history')).toHaveLength(2);
    expect(warnings).toEqual([]);
  });

  it('a spooled record the server refuses for what it is (not an outage) is said and kept, and the records after it are sent', async () => {
    const { store: real } = await store();
    const dir = testdir();
    for (const id of ['a', 'b'])
      await new SpoolingStore({ ...real, ...down }, dir).recordFire(id, fire(0, 'success'), () => {});
    let refused = 0;
    const refusing: RoutineStore = {
      ...real,
      recordFire: async (id, f, warn, o) => {
        if (id === 'a') {
          refused++;
          throw new DatabaseStatementError(
            'database 127.0.0.1:5432/x: permission denied for table routinely_routine_state (42501)',
          );
        }
        return real.recordFire(id, f, warn, o);
      },
    };
    const warnings: string[] = [];
    expect(await new SpoolingStore(refusing, dir).flushSpool((m) => warnings.push(m))).toEqual({
      recorded: 1,
      released: 0,
      refused: 0,
      left: 1,
    });
    expect(refused).toBe(1);
    expect(warnings.join('\n')).toMatch(/could not record spooled .*a\.\S+\.json: database .*permission denied/);
    expect((await real.history('b')).map((h) => h.result)).toEqual(['success']);
  });

  it('a fire spooled during an outage is recorded with its real result; a newer failure recorded meanwhile stays the last result', async () => {
    const { store: real } = await store();
    const dir = testdir();
    await real.openFire('a', opened('0b0b0b0b', 0), () => {});
    const spooled = await new SpoolingStore({ ...real, ...down }, dir).recordFire(
      'a',
      fire(0, 'success', { closes: '0b0b0b0b' }),
      () => {},
    );
    expect(spooled).toMatchObject({ why: expect.stringMatching(/connection refused/) });
    const path = (spooled as { spooledTo: string }).spooledTo;
    expect(path).toBe(join(spoolDir(dir), 'a.0b0b0b0b.json'));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(spoolDir(dir)).mode & 0o777).toBe(0o700);
    expect(JSON.parse(readFileSync(path, 'utf8'))).toMatchObject({
      version: 1,
      kind: 'fire',
      routine: 'a',
      fire: { result: 'success', closes: '0b0b0b0b' },
    });
    // the database is back; a later fire failed and was recorded first
    await real.recordFire('a', fire(10, 'failure', { key: '1234' }), () => {});
    expect(await new SpoolingStore(real, dir).flushSpool(() => {})).toEqual({
      recorded: 1,
      released: 0,
      refused: 0,
      left: 0,
    });
    const state = (await real.read(() => {})).routines.a!;
    expect(state).toMatchObject({
      last_result: 'failure',
      last_started_at: iso(10),
      counts: { success: 1, failure: 1, skipped: 0 },
      consecutive_failures: 1,
      last_success_at: iso(2),
    });
    expect(state.open_fires).toBeUndefined();
    // history in the order the fires happened
    expect((await real.history('a')).map((h) => h.started_at)).toEqual([iso(0), iso(10)]);
  });

  it('a spooled fire another scheduler recorded first as interrupted (judged gone) is said, and not counted as recorded by the flush', async () => {
    const { store: real } = await store();
    const dir = testdir();
    const gone: OpenFire = { ...opened('0c0c0c0c', 0), owner: { ...opened('x', 0).owner, claimer: 'gone' } };
    await real.openFire('a', gone, () => {});
    await new SpoolingStore({ ...real, ...down }, dir).recordFire(
      'a',
      fire(0, 'success', { closes: '0c0c0c0c' }),
      () => {},
    );
    await real.openFire('b', opened('0d0d0d0d', 0), () => {});
    await new SpoolingStore({ ...real, ...down }, dir).recordFire(
      'b',
      fire(0, 'success', { closes: '0d0d0d0d' }),
      () => {},
    );
    // meanwhile another scheduler's sweep closed a's fire, its claimer's lease having run out
    expect(
      await real.reconcile(
        (o) => o.claimer === 'gone',
        () => {},
      ),
    ).toBe(1);
    const warnings: string[] = [];
    const flushed = await new SpoolingStore(real, dir).flushSpool((m) => void warnings.push(m));
    expect(flushed).toEqual({ recorded: 1, released: 0, refused: 1, left: 0 });
    expect(warnings).toEqual([
      expect.stringMatching(
        /^a: not recorded \(success\): another scheduler recorded this fire already, as interrupted/,
      ),
    ]);
    expect(flushMessage(flushed)).toBe(
      "database back: recorded 1 spooled fire (1 more not: another scheduler's, as said above)",
    );
    expect((await real.read(() => {})).routines.a).toMatchObject({
      last_result: 'failure',
      last_reason: expect.stringMatching(/^interrupted/),
    });
  });

  it('spool files are input: a forged, oversized or linked file is moved aside or refused, never recorded', async () => {
    const { store: real } = await store();
    const dir = testdir();
    const spool = spoolDir(dir);
    mkdirSync(spool, { recursive: true, mode: 0o700 });
    const good = {
      version: 1,
      kind: 'fire',
      routine: 'a',
      spooled_at: iso(0),
      why: 'x',
      fire: fire(0, 'success', { key: 'abcd' }),
    };
    writeFileSync(join(spool, 'a.0001.json'), JSON.stringify({ ...good, fire: { ...good.fire, result: 'great' } }), {
      mode: 0o600,
    });
    writeFileSync(join(spool, 'a.0002.json'), JSON.stringify({ ...good, routine: 'b' }), { mode: 0o600 });
    writeFileSync(join(spool, 'a.0003.json'), JSON.stringify({ ...good, fire: { ...good.fire, key: undefined } }), {
      mode: 0o600,
    });
    writeFileSync(
      join(spool, 'a.0004.json'),
      JSON.stringify({ ...good, fire: { ...good.fire, run_id: '../../etc' } }),
      { mode: 0o600 },
    );
    writeFileSync(join(dir, 'elsewhere.json'), JSON.stringify(good), { mode: 0o600 });
    symlinkSync(join(dir, 'elsewhere.json'), join(spool, 'a.0005.json'));
    writeFileSync(join(spool, 'a.0006.json'), JSON.stringify(good), { mode: 0o644 });
    chmodSync(join(spool, 'a.0006.json'), 0o666);
    writeFileSync(join(spool, 'a.0007.json'), 'x'.repeat(70_000), { mode: 0o600 });
    writeFileSync(join(spool, 'notes.txt'), 'not a spool file');
    const warnings: string[] = [];
    expect(await new SpoolingStore(real, dir).flushSpool((m: string) => warnings.push(m))).toEqual({
      recorded: 0,
      released: 0,
      refused: 0,
      left: 0,
    });
    expect(await real.history('a')).toEqual([]);
    expect(warnings).toHaveLength(7);
    expect(warnings.join('\n')).toMatch(/a\.0001\.json is not a record of ours \(not a fire record\); moved aside/);
    expect(warnings.join('\n')).toMatch(
      /a\.0002\.json is not a record of ours \(routine "b" does not match the file name\)/,
    );
    expect(warnings.join('\n')).toMatch(/a\.0005\.json is not a record of ours \(.*symbolic link/);
    expect(existsSync(join(dir, 'elsewhere.json'))).toBe(true);
    // every one set aside, the link itself too (its target stays where it was)
    expect(readdirSync(spool).filter((n) => n.includes('.corrupt.'))).toHaveLength(7);
    expect(readdirSync(spool).filter((n) => /^a\.\d{4}\.json$/.test(n))).toEqual([]);
  });

  it('two processes reconciling the same open fire at once record it once, as interrupted', async () => {
    const { store: real } = await store();
    await real.openFire(
      'a',
      { ...opened('0d0d0d0d', 0), owner: { pid: 999_999, host: 'gone', boot_id: null, start_time: null } },
      () => {},
    );
    const closed = await Promise.all([
      real.reconcile(
        () => true,
        () => {},
      ),
      real.reconcile(
        () => true,
        () => {},
      ),
    ]);
    expect(closed.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(1);
    const history = await real.history('a');
    expect(history).toHaveLength(1);
    expect(history[0]).toMatchObject({
      result: 'failure',
      reason: expect.stringMatching(/^interrupted: pid 999999 on gone/),
    });
    expect((await real.read(() => {})).routines.a).toMatchObject({ counts: { success: 0, failure: 1, skipped: 0 } });
  });

  it('reconcile leaves an open fire whose record waits in the spool: the flush records its real result, never "interrupted"', async () => {
    const { store: real } = await store();
    const dir = testdir();
    const gone = { pid: 999_999, host: 'gone', boot_id: null, start_time: null };
    await real.openFire('a', { ...opened('0e0e0e0e', 0), owner: gone }, () => {});
    await real.openFire('a', { ...opened('0f0f0f0f', 1), owner: gone }, () => {});
    // the first fire's process spooled its record (the database was away), then ended
    const spooled = await new SpoolingStore({ ...real, ...down }, dir).recordFire(
      'a',
      fire(0, 'success', { closes: '0e0e0e0e', run_id: 'r-0e0e0e0e' }),
      () => {},
    );
    expect(spooled).toEqual({
      spooledTo: join(spoolDir(dir), 'a.0e0e0e0e.json'),
      why: expect.stringMatching(/connection refused/),
    });
    expect(listSpool(dir, () => {}).map((s) => s.path)).toEqual([join(spoolDir(dir), 'a.0e0e0e0e.json')]);
    // a reconcile that runs before the spool is flushed (the flush met a passing error)
    expect(
      await new SpoolingStore(real, dir).reconcile(
        () => true,
        () => {},
      ),
    ).toBe(1);
    expect(await new SpoolingStore(real, dir).flushSpool(() => {})).toMatchObject({ recorded: 1, left: 0 });
    const history = await real.history('a');
    expect(history.map((h) => [h.run_id, h.result])).toEqual([
      ['r-0e0e0e0e', 'success'],
      ['r-0f0f0f0f', 'failure'],
    ]);
    expect(history[1]!.reason).toMatch(/^interrupted/);
  });

  it("a record sent again after a lost answer with the same key is stored once (the scheduler's retries after a failed spool write)", async () => {
    const { store: real } = await store();
    const keyed = withKey(fire(0, 'skipped', { reason: 'exec busy' }));
    await expect(ackLost(real, 1).recordFire('a', keyed, () => {})).rejects.toThrow(/timed out/);
    await real.recordFire('a', keyed, () => {}, { again: true });
    expect(await real.history('a')).toHaveLength(1);
    expect((await real.read(() => {})).routines.a).toMatchObject({ counts: { success: 0, failure: 0, skipped: 1 } });
  });

  it("a fire that did not start because its marker's answer was lost: its record closes the marker if it was stored, and is kept once either way", async () => {
    const { store: real } = await store();
    const dir = testdir();
    const notStarted = (s: number, closes: string): Fire => ({
      ...fire(s, 'failure', { closes }),
      reason: 'not started: database 127.0.0.1:5432/x: timed out',
      exit_code: null,
      unstarted: true,
    });
    // the marker was stored (the answer lost): the record closes it; reconcile finds nothing later
    await real.openFire(
      'a',
      { ...opened('1a1a1a1a', 0), owner: { pid: 999_999, host: 'gone', boot_id: null, start_time: null } },
      () => {},
    );
    expect(
      await new SpoolingStore({ ...real, ...down }, dir).recordFire('a', notStarted(0, '1a1a1a1a'), () => {}),
    ).toEqual({ spooledTo: join(spoolDir(dir), 'a.1a1a1a1a.json'), why: expect.stringMatching(/connection refused/) });
    // the marker never was stored: its record is kept all the same
    expect(
      await new SpoolingStore({ ...real, ...down }, dir).recordFire('a', notStarted(1, '1b1b1b1b'), () => {}),
    ).toEqual({ spooledTo: join(spoolDir(dir), 'a.1b1b1b1b.json'), why: expect.stringMatching(/connection refused/) });
    expect(listSpool(dir, () => {}).map((s) => s.path)).toEqual([
      join(spoolDir(dir), 'a.1a1a1a1a.json'),
      join(spoolDir(dir), 'a.1b1b1b1b.json'),
    ]);
    expect(await new SpoolingStore(real, dir).flushSpool(() => {})).toMatchObject({ recorded: 2, left: 0 });
    // sent once more (two flushers, a lost answer): nothing new
    await real.recordFire('a', notStarted(0, '1a1a1a1a'), () => {}, { again: true });
    await real.recordFire('a', notStarted(1, '1b1b1b1b'), () => {}, { again: true });
    expect(
      await real.reconcile(
        () => true,
        () => {},
      ),
    ).toBe(0);
    const history = await real.history('a');
    expect(history.map((h) => h.reason)).toEqual([
      expect.stringMatching(/^not started/),
      expect.stringMatching(/^not started/),
    ]);
    expect((await real.read(() => {})).routines.a).toMatchObject({ counts: { success: 0, failure: 2, skipped: 0 } });
    expect((await real.read(() => {})).routines.a?.open_fires).toBeUndefined();
  });

  it('a claim whose answer was lost is given back once the database answers, unless that tick was fired', async () => {
    const { store: real, query } = await store();
    const h1 = { host: 'h1', claimer: 'c1' };
    const dir = testdir();
    const at = new Date(T0);
    // the insert committed, the client timed out: this host did not fire the tick
    expect(await real.claimTick('a', at, h1)).toBe(true);
    spoolClaim(dir, 'a', at, 'h1', 'database …: timed out');
    // a tick claimed and fired by h1 (recorded) and one open: both keep their claims
    const fired = new Date(T0 + 60_000);
    expect(await real.claimTick('a', fired, h1)).toBe(true);
    await real.recordFire('a', { ...fire(60, 'success', { key: 'aa' }), scheduled_at: fired.toISOString() }, () => {});
    spoolClaim(dir, 'a', fired, 'h1', 'x');
    const running = new Date(T0 + 120_000);
    expect(await real.claimTick('a', running, h1)).toBe(true);
    await real.openFire('a', { ...opened('0c0c0c0c', 120), scheduled_at: running.toISOString() }, () => {});
    spoolClaim(dir, 'a', running, 'h1', 'x');
    // another host's claim of the same routine and time is never touched
    expect(await real.claimTick('b', at, { host: 'h2', claimer: 'c2' })).toBe(true);
    spoolClaim(dir, 'b', at, 'h1', 'x');
    expect(await new SpoolingStore(real, dir).flushSpool(() => {})).toEqual({
      recorded: 0,
      released: 1,
      refused: 0,
      left: 0,
    });
    const ticks = (await query(
      'SELECT routine, scheduled_at, host FROM routinely_ticks ORDER BY routine, scheduled_at',
    )) as { routine: string; scheduled_at: Date; host: string }[];
    expect(ticks.map((t) => `${t.routine} ${t.scheduled_at.toISOString()} ${t.host}`)).toEqual([
      `a ${fired.toISOString()} h1`,
      `a ${running.toISOString()} h1`,
      `b ${at.toISOString()} h2`,
    ]);
    // given back, the tick can be claimed again (a catch-up of this host may fire it)
    expect(await real.claimTick('a', at, h1)).toBe(true);
  });

  it("a claim sent again is its claimer's while unsettled; settled by its open marker or its record; taken over only from its claimer, and then refused to it", async () => {
    const { store: real, query } = await store();
    const a = { host: 'h1', claimer: 'c1' };
    const b = { host: 'h2', claimer: 'c2' };
    const t = (s: number): Date => new Date(T0 + s * 1000);
    // sent again after a lost answer: still its own (yes), never another's
    expect(await real.claimTick('a', t(0), a)).toBe(true);
    expect(await real.claimTick('a', t(0), a)).toBe(true);
    expect(await real.claimTick('a', t(0), b)).toBe(false);
    // no lease holds c1 or c2: both are gone; c2 asks and sees c1's unsettled claim
    expect((await real.orphanClaims!('c2', 10)).map((c) => `${c.routine} ${c.claimer}`)).toEqual(['a c1']);
    // opened by its claimer: settled, no orphan, and no longer claimable again even by itself
    await real.openFire('a', { ...opened('0d0d0d0d', 0), scheduled_at: t(0).toISOString() }, () => {}, 'c1');
    expect(await real.orphanClaims!('c2', 10)).toEqual([]);
    expect(await real.claimTick('a', t(0), a)).toBe(false);
    // a skip's record settles its claim too
    expect(await real.claimTick('a', t(1), a)).toBe(true);
    await real.recordFire('a', { ...fire(1, 'skipped', { key: 'bb' }), scheduled_at: t(1).toISOString() }, () => {}, {
      claimer: 'c1',
    });
    expect(await real.orphanClaims!('c2', 10)).toEqual([]);
    // taken over by c2: c1's marker is refused, c1's record is not stored; c2's is
    expect(await real.claimTick('a', t(2), a)).toBe(true);
    const [orphan] = await real.orphanClaims!('c2', 10);
    expect(await real.takeOverClaim!(orphan!, b)).toBe(true);
    expect(await real.takeOverClaim!(orphan!, { host: 'h3', claimer: 'c3' })).toBe(false); // one sweeper wins
    await expect(
      real.openFire('a', { ...opened('0e0e0e0e', 2), scheduled_at: t(2).toISOString() }, () => {}, 'c1'),
    ).rejects.toThrow(/taken over by another scheduler/);
    const warned: string[] = [];
    await real.recordFire(
      'a',
      { ...fire(2, 'skipped', { key: 'cc' }), scheduled_at: t(2).toISOString() },
      (m) => warned.push(m),
      { claimer: 'c1' },
    );
    expect(warned).toEqual([expect.stringMatching(/^a: not recorded \(skipped.*taken over by another scheduler/)]);
    await real.recordFire(
      'a',
      { ...fire(2, 'skipped', { key: 'dd' }), scheduled_at: t(2).toISOString(), reason: 'claimer died' },
      () => {},
      { claimer: 'c2' },
    );
    expect(
      (await real.history('a'))
        .map((h) => `${h.scheduled_at} ${h.reason}`)
        .filter((h) => h.startsWith(t(2).toISOString())),
    ).toEqual([`${t(2).toISOString()} claimer died`]);
    // a claim whose claimer holds its scheduler lease is nobody's to take
    expect(await real.claimTick('a', t(3), b)).toBe(true);
    await query(
      `INSERT INTO routinely_leases (project, key, lock_id, epoch, owner, created_at, heartbeat_at, expires_at) VALUES ('app', 'scheduler@h2', 'c2', 1, '{}', now(), now(), now() + interval '1 minute')`,
    );
    expect(await real.orphanClaims!('c1', 10)).toEqual([]);
    // a fire that could not start (its marker's answer lost, the marker never stored): its
    // record closes that marker and settles the claim all the same — no sweep records it again
    expect(await real.claimTick('a', t(4), b)).toBe(true);
    await real.recordFire(
      'a',
      {
        ...fire(4, 'failure', { closes: '0a0a0a0a' }),
        scheduled_at: t(4).toISOString(),
        reason: 'not started: timed out',
        unstarted: true,
      },
      () => {},
      { claimer: 'c2' },
    );
    expect((await real.orphanClaims!('c1', 10)).filter((c) => c.scheduledAt.getTime() === t(4).getTime())).toEqual([]);
    // in batches: a first claim of a tick its claimer holds is a second way to it (no); sent
    // again after a lost answer (again), its own unsettled claim is yes; another's never
    const batch = [
      { routine: 'a', scheduledAt: t(5) },
      { routine: 'b', scheduledAt: t(5) },
    ];
    expect(await real.claimTicks!(batch, a)).toEqual(new Set([`a@${t(5).getTime()}`, `b@${t(5).getTime()}`]));
    expect(await real.claimTicks!(batch, a)).toEqual(new Set());
    expect(await real.claimTicks!(batch, a, true)).toEqual(new Set([`a@${t(5).getTime()}`, `b@${t(5).getTime()}`]));
    expect(await real.claimTicks!(batch, b, true)).toEqual(new Set());
    // a manual fire (no claim) is no one's to refuse
    await real.openFire('a', { ...opened('0f0f0f0f', 9), scheduled_at: t(9).toISOString() }, () => {}, 'c1');
  });
});

describe('the scheduler with a spool (stub store, no server)', () => {
  it('a claim without an answer is sent again and the tick fires late, once; a record the database refused is spooled and flushed with backoff', async () => {
    const dir = testProject({ routines: [{ id: 'a', schedule: '* * * * *', action: 'command', run: 'true' }] });
    const project = loadProject({ cwd: dir });
    const real = fileRoutineStore(project);
    const clock = new ManualClock(Date.UTC(2026, 11, 1, 10, 0, 30));
    let claimFails = 1;
    let recordFails = 2;
    const released: string[] = [];
    const sent: (boolean | undefined)[] = [];
    const store: RoutineStore = {
      ...real,
      async claimTick(id, at, host) {
        if (claimFails-- > 0) throw new DatabaseError('database db:5432/x: timed out');
        return real.claimTick(id, at, host);
      },
      async releaseClaim(id, at, host) {
        released.push(`${id} ${at.toISOString()} ${host}`);
        return true;
      },
      async recordFire(id, f, warn, opts) {
        sent.push(opts?.again);
        if (recordFails-- > 0) throw new DatabaseError('database db:5432/x: connection refused');
        return real.recordFire(id, f, warn, opts);
      },
    };
    const fired: string[] = [];
    const events: LogEvent[] = [];
    const scheduler = new Scheduler({
      project,
      clock,
      log: (e) => events.push(e),
      reloadProject: () => project,
      shutdownTimeoutMs: 1000,
      watchConfig: false,
      store: new SpoolingStore(store, project.stateDir),
      host: 'h1',
      fire: async (_def, at) => {
        fired.push(at.toISOString());
        const t = new Date(clock.now()).toISOString();
        return {
          result: 'success',
          reason: null,
          scheduled_at: at.toISOString(),
          started_at: t,
          finished_at: t,
          duration_ms: 1,
          exit_code: 0,
          run_id: null,
        };
      },
    });
    const stop = new AbortController();
    const done = scheduler.run(stop.signal);
    const settle = async (): Promise<void> => {
      for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    };
    await settle();
    clock.advance(30_000); // 10:01:00, its claim unanswered
    await eventually(() => events.some((e) => e.event === 'scheduler.warning' && /^claims fail/.test(e.message)), 5000);
    expect(fired).toEqual([]);
    // nothing spooled for the claim: it is sent again, a moment later, and the tick fires late
    expect(listSpool(project.stateDir, () => {})).toEqual([]);
    clock.advance(100);
    await eventually(() => fired.length === 1 && sent.length >= 1, 5000);
    expect(fired).toEqual(['2026-12-01T10:01:00.000Z']);
    expect(released).toEqual([]);
    expect(events).toContainEqual({
      event: 'scheduler.warning',
      message: 'claims go through again (the database answers)',
    });
    for (let i = 0; i < 60 && readFires(project, 'a').length === 0; i++) {
      clock.advance(1000);
      await settle();
    }
    expect(readFires(project, 'a')).toHaveLength(1);
    expect(sent).toEqual([undefined, true, true]);
    expect(listSpool(project.stateDir, () => {})).toEqual([]);
    expect(events).toContainEqual({ event: 'scheduler.warning', message: 'database back: recorded 1 spooled fire' });
    stop.abort();
    await done;
  });

  it('a fire whose marker could not be written is recorded "not started", closing that marker', async () => {
    const dir = testProject({ routines: [{ id: 'a', schedule: '* * * * *', action: 'command', run: 'true' }] });
    const project = loadProject({ cwd: dir });
    const real = fileRoutineStore(project);
    const clock = new ManualClock(Date.UTC(2026, 11, 1, 10, 0, 30));
    const recorded: Fire[] = [];
    const store: RoutineStore = {
      ...real,
      async recordFire(id, f, warn, opts) {
        recorded.push(f);
        return real.recordFire(id, f, warn, opts);
      },
    };
    const scheduler = new Scheduler({
      project,
      clock,
      log: () => {},
      reloadProject: () => project,
      shutdownTimeoutMs: 1000,
      watchConfig: false,
      store: new SpoolingStore(store, project.stateDir),
      host: 'h1',
      fire: async () => {
        throw new NotStartedError(new DatabaseError('database db:5432/x: timed out'), '2c2c2c2c');
      },
    });
    const stop = new AbortController();
    const done = scheduler.run(stop.signal);
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    clock.advance(30_000);
    await eventually(() => recorded.length === 1, 5000);
    expect(recorded[0]).toMatchObject({
      result: 'failure',
      reason: 'not started: database db:5432/x: timed out',
      closes: '2c2c2c2c',
    });
    stop.abort();
    await done;
  });

  it('a claimed tick whose next step finds the connection gone (the pause flag unreadable) is recorded "not started", never left claimed without a record', async () => {
    const dir = testProject({ routines: [{ id: 'a', schedule: '* * * * *', action: 'command', run: 'true' }] });
    const project = loadProject({ cwd: dir });
    const real = fileRoutineStore(project);
    const clock = new ManualClock(Date.UTC(2026, 11, 1, 10, 0, 30));
    const recorded: Fire[] = [];
    const claimed: string[] = [];
    const fired: string[] = [];
    let readFails = 1;
    const store: RoutineStore = {
      ...real,
      async claimTick(id, at, host) {
        claimed.push(at.toISOString());
        return real.claimTick(id, at, host);
      },
      async readOne(id, warn) {
        if (readFails-- > 0) throw new DatabaseError('database db:5432/x: connection reset');
        return real.readOne(id, warn);
      },
      async recordFire(id, f, warn, opts) {
        recorded.push(f);
        return real.recordFire(id, f, warn, opts);
      },
    };
    const scheduler = new Scheduler({
      project,
      clock,
      log: () => {},
      reloadProject: () => project,
      shutdownTimeoutMs: 1000,
      watchConfig: false,
      store: new SpoolingStore(store, project.stateDir),
      host: 'h1',
      fire: async (_def, at) => {
        fired.push(at.toISOString());
        const t = new Date(clock.now()).toISOString();
        return {
          result: 'success',
          reason: null,
          scheduled_at: at.toISOString(),
          started_at: t,
          finished_at: t,
          duration_ms: 1,
          exit_code: 0,
          run_id: null,
        };
      },
    });
    const stop = new AbortController();
    const done = scheduler.run(stop.signal);
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    clock.advance(30_000); // 10:01:00: claimed, then the pause flag cannot be read
    await eventually(() => recorded.length === 1, 5000);
    expect(claimed).toEqual(['2026-12-01T10:01:00.000Z']);
    expect(fired).toEqual([]);
    expect(recorded[0]).toMatchObject({
      result: 'failure',
      scheduled_at: '2026-12-01T10:01:00.000Z',
      reason: 'not started: could not read whether it is paused: database db:5432/x: connection reset',
    });
    // the next tick, with the connection back, fires as usual
    clock.advance(60_000);
    await eventually(() => recorded.length === 2, 5000);
    expect(fired).toEqual(['2026-12-01T10:02:00.000Z']);
    stop.abort();
    await done;
  });
});
