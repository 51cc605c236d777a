// The stop request a stopper leaves for the fire's owner (fire/stop-request.ts): read once,
// checked as input (SPEC §12), never a path made of a name that is not one of ours.

import { mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stoppedReason, takeStopRequest, writeStopRequest } from '../../src/fire/stop-request.js';
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
});
