// A lock record damaged under a live holder (issue 49, item 4; SPEC §4 rule 4): `: >` of
// `locks/exec-run.lock` zeroes the holder's slot (the view is a hard link to it). The lock is
// then judged by the holder's heartbeat, which names it: busy while it lives and beats, taken
// once it is dead or has not beaten for a TTL; the holder itself carries on and releases.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, startCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

const zero = (project: string): void => writeFileSync(join(project, '.routinely', 'locks', 'exec-run.lock'), '');

describe('a lock record zeroed under its holder', () => {
  it('a live holder that beats is busy, named, not free; it runs to its end and releases (exit 0); then the lock is taken', { timeout: 60_000 }, async () => {
    const project = testProject({});
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; while [ ! -e go ]; do sleep 0.05; done; echo done'], { cwd: project, timeoutMs: 50_000 });
    await holder.waitFor(/holding/);
    zero(project);
    const busy = await runCli(['lock', 'run', '--', 'true'], { cwd: project });
    expect(busy.code, busy.stderr).toBe(75);
    expect(busy.stderr).toMatch(new RegExp(`^exec busy: held by pid ${holder.pid} on \\S+ \\(lock run\\), heartbeat \\S+ ago; its lock record is unreadable \\(\\S+exec-run\\.slot\\.1 is not a valid lock record\\)`));
    const status = await runCli(['lock', 'status', '--json'], { cwd: project });
    expect(JSON.parse(status.stdout)).toMatchObject({ state: 'held' });
    writeFileSync(join(project, 'go'), '');
    const end = await holder.exited;
    expect([end.code, holder.stderr()]).toEqual([0, '']);
    expect((await runCli(['lock', 'run', '--', 'true'], { cwd: project })).code).toBe(0);
  });

  it('a holder SIGKILLed: taken at once (its death is the evidence)', { timeout: 60_000 }, async () => {
    const project = testProject({});
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; sleep 60'], { cwd: project, timeoutMs: 50_000 });
    await holder.waitFor(/holding/);
    zero(project);
    holder.child.kill('SIGKILL');
    await holder.exited;
    const next = await runCli(['lock', 'run', '--', 'echo', 'taken'], { cwd: project });
    expect([next.code, next.stdout]).toEqual([0, 'taken\n']);
  });

  it('a holder stopped (SIGSTOP): busy until its heartbeat is a TTL old, then a waiter takes it over', { timeout: 60_000 }, async () => {
    const project = testProject({ lock: { ttlSeconds: 2, refreshSeconds: 0.5 } });
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; sleep 60'], { cwd: project, timeoutMs: 50_000 });
    await holder.waitFor(/holding/);
    zero(project);
    holder.child.kill('SIGSTOP');
    const waiter = await runCli(['lock', 'run', '--if-busy', 'wait', '--wait-timeout', '30', '--', 'echo', 'taken'], { cwd: project });
    expect([waiter.code, waiter.stdout], waiter.stderr).toEqual([0, 'taken\n']);
    expect(waiter.stderr).toMatch(/^waiting for the exec lock, held by pid \d+ on \S+ \(lock run\), heartbeat \S+ ago; its lock record is unreadable/);
    holder.child.kill('SIGKILL');
    await holder.exited;
  });
});
