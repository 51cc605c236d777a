import { describe, expect, it } from 'vitest';
import { findStarter, isNpm, isShell, readProc, starterGone, type Proc } from '../../src/cli/wrapper.js';

const table =
  (procs: Proc[]) =>
  (pid: number): Proc | null =>
    procs.find((p) => p.pid === pid) ?? null;
const npm: Proc = { pid: 10, ppid: 1, startTime: '500', argv: ['npm run sched'] };
const dash: Proc = { pid: 11, ppid: 10, startTime: '501', argv: ['sh', '-c', 'routinely scheduler start'] };

describe('the npm that started a scheduler', () => {
  it('knows npm by its title or its script, and a shell by -c', () => {
    expect(isNpm({ argv: ['npm run sched'] })).toBe(true);
    expect(isNpm({ argv: ['npm exec routinely scheduler start'] })).toBe(true);
    expect(isNpm({ argv: ['/usr/bin/node', '/usr/lib/node_modules/npm/bin/npx-cli.js', 'routinely'] })).toBe(true);
    expect(isNpm({ argv: ['npm'] })).toBe(true);
    expect(isNpm({ argv: ['/usr/bin/node', 'server.js'] })).toBe(false);
    expect(isNpm({ argv: ['npmish run'] })).toBe(false);
    expect(isShell({ argv: ['sh', '-c', 'x'] })).toBe(true);
    expect(isShell({ argv: ['/bin/dash', '-c', 'x'] })).toBe(true);
    expect(isShell({ argv: ['/usr/bin/bash', '-c', 'x'] })).toBe(true);
    expect(isShell({ argv: ['bash'] })).toBe(false); // an interactive shell: a person started it
  });

  it('is our parent, or the parent of the shell that is our parent; nothing else', () => {
    expect(findStarter(10, table([npm]))).toEqual({ npm, shell: null });
    expect(findStarter(11, table([npm, dash]))).toEqual({ npm, shell: dash });
    // a shell not run by npm (a terminal's `sh -c`), a backgrounding shell already gone (PID 1)
    expect(findStarter(11, table([{ ...npm, argv: ['/usr/bin/node', 'app.js'] }, dash]))).toBeNull();
    expect(findStarter(1, table([{ pid: 1, ppid: 0, startTime: '1', argv: ['/sbin/init'] }]))).toBeNull();
    expect(findStarter(99, table([]))).toBeNull();
  });

  it('is gone when our parent changed, or npm is gone behind a living shell, or its pid is another process now', () => {
    const viaShell = { npm, shell: dash };
    expect(starterGone(viaShell, 11, table([npm, dash]))).toBeNull();
    expect(starterGone(viaShell, 1, table([npm]))).toBe('its shell (pid 11) under npm is gone');
    expect(starterGone(viaShell, 11, table([dash]))).toBe('npm (pid 10) is gone');
    expect(starterGone(viaShell, 11, table([{ ...npm, startTime: '900' }, dash]))).toBe('npm (pid 10) is gone');
    expect(starterGone({ npm, shell: null }, 10, table([npm]))).toBeNull();
    expect(starterGone({ npm, shell: null }, 1, table([]))).toBe('npm (pid 10) is gone');
  });

  it('reads this process from /proc, and a pid that is no process as gone', () => {
    const me = readProc(process.pid);
    expect(me?.ppid).toBe(process.ppid);
    expect(me?.startTime).toMatch(/^\d+$/);
    expect(me?.argv.length).toBeGreaterThan(0);
    expect(readProc(2 ** 22 + 7)).toBeNull();
  });
});
