// A fire's times (SPEC §11: the duration metric and the history agree): one measurement, the
// duration on the monotonic clock, from which the record's duration and its finish stamp both come.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { disposable, openBackend, type Backend } from '../../src/backend.js';
import { ManualClock, systemClock } from '../../src/clock.js';
import { loadProject } from '../../src/config/load.js';
import { fireRoutine, fireTimes } from '../../src/fire/firing.js';
import { selfIdentity, systemProbe } from '../../src/process/identity.js';
import type { OpenFire } from '../../src/state/routine-state.js';
import { testProject } from '../helpers/testdir.js';

describe('fireTimes', () => {
  it('the stamps differ by exactly the recorded duration, also when the wall clock stepped during the fire', () => {
    const clock = new ManualClock();
    const span = { startedMs: clock.now(), started: clock.monotonic() };
    clock.advance(71.4);
    clock.jumpWall(-3_600_000); // NTP stepped back an hour while the command ran
    clock.advance(17.9);
    const t = fireTimes(span, clock.monotonic());
    expect(t.duration_ms).toBe(89);
    expect(Date.parse(t.finished_at) - Date.parse(t.started_at)).toBe(t.duration_ms);
    expect(t.started_at).toBe(new Date(span.startedMs).toISOString());
  });

  it('never a negative duration', () => {
    const t = fireTimes({ startedMs: Date.UTC(2026, 11, 4), started: 500 }, 499.6);
    expect(t.duration_ms).toBe(0);
    expect(t.finished_at).toBe(t.started_at);
  });
});

// A routine never runs beside itself (SPEC §6), also when its lock does not keep its fires apart
// ("exclusive": false, or a named lock of several slots) and two processes fire it within the same
// moment. The other process is a live child whose marker lands between this fire's look and its
// own marker: the fire looks after writing its marker, and the later marker yields.
describe('fireRoutine: two fires of a lockless routine opened within the same moment', () => {
  const setup = async (other: 'before' | 'after') => {
    const dir = testProject({
      project: 'app',
      routines: [{ id: 'nx', schedule: '0 0 1 1 *', action: 'command', run: 'echo ran >> ran.txt', exclusive: false }],
    });
    const project = loadProject({ cwd: dir });
    const backend = disposable(await openBackend(project));
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    onTestFinished(() => void child.kill('SIGKILL'));
    await new Promise((r) => child.once('spawn', r));
    const probe = systemProbe();
    const seen = probe.inspect(child.pid!);
    const foreign: OpenFire = {
      id: 'f0000000000000aa',
      scheduled_at: new Date().toISOString(),
      started_at: new Date().toISOString(),
      run_id: null,
      trigger: 'manual',
      owner: {
        ...selfIdentity(probe),
        pid: child.pid!,
        start_time: seen.state === 'alive' ? seen.startTime : null,
      },
    };
    // the other process's marker is appended next to this fire's own: just before, or just after
    const routines = backend.routines;
    const raced = {
      ...backend,
      routines: Object.assign(Object.create(routines) as typeof routines, {
        openFire: async (id: string, open: OpenFire, warn: (m: string) => void) => {
          if (other === 'before') await routines.openFire(id, foreign, warn);
          await routines.openFire(id, open, warn);
          if (other === 'after') await routines.openFire(id, foreign, warn);
        },
      }),
    } as Backend;
    const def = project.config.routines[0]!;
    const fired = await fireRoutine(
      { project, backend: raced, clock: systemClock, trigger: 'manual', ifBusy: 'skip', warn: () => {} },
      def,
      new Date(),
    );
    await backend.routines.recordFire('nx', fired!, () => {});
    const record = await backend.routines.readOne('nx', () => {});
    await backend.close();
    return { dir, fired: fired!, record };
  };

  it('the later marker yields: a skip (previous run still running) that closes its own marker', async () => {
    const { dir, fired, record } = await setup('before');
    expect(fired.result).toBe('skipped');
    expect(fired.reason).toBe('previous run still running');
    expect(existsSync(join(dir, 'ran.txt'))).toBe(false);
    // only the other process's fire is still open
    expect(record?.open_fires?.map((o) => o.id)).toEqual(['f0000000000000aa']);
  });

  it('the earlier marker goes: it runs, whatever came after it', async () => {
    const { dir, fired, record } = await setup('after');
    expect(fired.result).toBe('success');
    expect(readFileSync(join(dir, 'ran.txt'), 'utf8')).toBe('ran\n');
    expect(record?.open_fires?.map((o) => o.id)).toEqual(['f0000000000000aa']);
  });
});
