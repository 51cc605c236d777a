// The stop request a stopper leaves for the fire's owner (fire/stop-request.ts): read once,
// checked as input (SPEC §12), never a path made of a name that is not one of ours.

import { mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stopRoutine, stoppedReason, takeStopRequest, writeStopRequest } from '../../src/fire/stop-request.js';
import { selfIdentity, systemProbe } from '../../src/process/identity.js';
import { systemClock } from '../../src/clock.js';
import type { Backend } from '../../src/backend-types.js';
import type { OpenFire, RoutineRecord } from '../../src/state/routine-state.js';
import { testdir } from '../helpers/testdir.js';

describe('stop requests', () => {
  it('written 0600 in a 0700 folder, taken once, saying who', () => {
    const state = testdir();
    writeStopRequest(state, 'a1b2c3d4e5f60718', { via: 'cli', pid: 4711 });
    expect(statSync(join(state, 'stops')).mode & 0o777).toBe(0o700);
    expect(statSync(join(state, 'stops', 'a1b2c3d4e5f60718.json')).mode & 0o777).toBe(0o600);
    expect(takeStopRequest(state, 'a1b2c3d4e5f60718')).toBe('cli, pid 4711');
    expect(takeStopRequest(state, 'a1b2c3d4e5f60718')).toBeNull();
    expect(stoppedReason('http, 10.0.0.7')).toBe('stopped by hand (http, 10.0.0.7)');
  });

  it('a name that is not a fire id is never a path; a file that is not a request reads as "unknown" and goes', () => {
    const state = testdir();
    expect(() => writeStopRequest(state, '../../etc/x', { via: 'cli', pid: 1 })).toThrow(/not a fire id/);
    expect(takeStopRequest(state, '../spool/x')).toBeNull();
    mkdirSync(join(state, 'stops'), { mode: 0o700 });
    writeFileSync(join(state, 'stops', 'abcdef01.json'), '{"version":1,"who":{"nested":true}}', { mode: 0o600 });
    expect(takeStopRequest(state, 'abcdef01')).toBe('unknown');
    expect(readdirSync(join(state, 'stops'))).toEqual([]);
    // a symbolic link is not followed
    writeFileSync(join(state, 'elsewhere.json'), '{"version":1,"who":"someone"}', { mode: 0o600 });
    symlinkSync(join(state, 'elsewhere.json'), join(state, 'stops', 'abcdef02.json'));
    expect(takeStopRequest(state, 'abcdef02')).toBe('unknown');
  });

  it('a request whose group was not signalled yet is no stop: the owner whose command ended by itself keeps its result', () => {
    const state = testdir();
    writeStopRequest(state, 'a1b2c3d4e5f60719', { via: 'http', address: '127.0.0.1' }, false);
    expect(takeStopRequest(state, 'a1b2c3d4e5f60719')).toBeNull();
    expect(readdirSync(join(state, 'stops'))).toEqual([]);
    // (signalled, or an older stopper's request without the field: a stop)
    writeFileSync(join(state, 'stops', 'a1b2c3d4e5f6071a.json'), '{"version":1,"who":"cli, pid 9"}', { mode: 0o600 });
    expect(takeStopRequest(state, 'a1b2c3d4e5f6071a')).toBe('cli, pid 9');
  });

  it('a fire that ends by itself while the stopper looks for its group is answered idle, and its owner finds no stop (it was recorded as stopped by hand, and answered not-found)', async () => {
    const state = testdir();
    const probe = systemProbe();
    const fire: OpenFire = {
      id: 'abcdef0123456789',
      scheduled_at: '2026-01-01T00:00:00.000Z',
      started_at: '2026-01-01T00:00:00.000Z',
      run_id: 'r-20260101T000000Z-ab12',
      trigger: 'manual',
      owner: selfIdentity(probe) as OpenFire['owner'],
    };
    let open = true;
    let ownerFound: string | null | undefined;
    const backend = {
      routines: { readOne: async () => ({ open_fires: open ? [fire] : [] }) as unknown as RoutineRecord },
    } as unknown as Backend;
    const outcome = await stopRoutine({
      backend,
      stateDir: state,
      routine: 'short',
      who: { via: 'http', address: '127.0.0.1' },
      graceMs: 1000,
      clock: { ...systemClock, sleep: async () => {} },
      probe: {
        ...probe,
        // the command ends as the stopper looks: its owner takes the request, then records
        markedGroupLeaders: () => {
          if (open) {
            ownerFound = takeStopRequest(state, fire.id);
            open = false;
          }
          return [];
        },
      },
    });
    expect(ownerFound).toBeNull();
    expect(outcome).toEqual({ kind: 'idle' });
    expect(readdirSync(join(state, 'stops'))).toEqual([]);
  });
});
