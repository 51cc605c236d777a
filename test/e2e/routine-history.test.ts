// `routine history [ID]` across routines (SPEC §10): "what ran last night", as journalctl
// --since shows it — every routine's fires in time order, filtered by time and result.

import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

interface Row {
  routine?: string;
  result: string;
  scheduled_at: string;
  trigger?: string;
}

const cmd = (id: string, run: string) => ({ id, schedule: '0 0 1 1 *', action: 'command', run });

describe('routine history without an id', () => {
  it('merges every routine in time order, filters by --since/--until/--result, keeps the newest --limit, text and --json', async () => {
    const project = testProject({ routines: [cmd('backup', 'true'), cmd('report', 'exit 2'), cmd('sync', 'true')] });
    for (const id of ['backup', 'report', 'sync', 'backup']) await runCli(['routine', 'run', id], { cwd: project });
    const json = async (...args: string[]): Promise<Row[]> => JSON.parse((await runCli(['routine', 'history', ...args, '--json'], { cwd: project })).stdout) as Row[];

    const all = await json();
    expect(all.map((r) => `${r.routine}:${r.result}`)).toEqual(['backup:success', 'report:failure', 'sync:success', 'backup:success']);
    expect(all.map((r) => r.scheduled_at)).toEqual([...all.map((r) => r.scheduled_at)].sort());
    expect((await json('--result', 'failure')).map((r) => r.routine)).toEqual(['report']);
    expect((await json('--limit', '2')).map((r) => r.routine)).toEqual(['sync', 'backup']);
    expect(await json('--since', '1h')).toHaveLength(4);
    expect(await json('--until', '1h')).toEqual([]);
    const from = all[2]!.scheduled_at;
    expect((await json('--since', from)).map((r) => r.routine)).toEqual(['sync', 'backup']);
    // one routine: newest first, as before, without the routine field
    const one = await json('backup');
    expect(one).toHaveLength(2);
    expect(one[0]).not.toHaveProperty('routine');
    expect(Date.parse(one[0]!.scheduled_at)).toBeGreaterThan(Date.parse(one[1]!.scheduled_at));

    const text = await runCli(['routine', 'history', '--since', 'today'], { cwd: project });
    expect(text.code).toBe(0);
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(4);
    expect(lines[1]).toMatch(/^\S+Z {2}report {2}failed +\S+ {2}exit code 2 {2}r-/);
    expect((await runCli(['routine', 'history', '--until', '2000-01-01'], { cwd: project })).stdout).toBe('no fires in that range\n');
  });

  it('names the flag of a time it cannot read, and a result it does not know', async () => {
    const project = testProject({ routines: [cmd('a', 'true')] });
    const bad = await runCli(['routine', 'history', '--since', 'last night'], { cwd: project });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--since "last night" is not a time: give ISO-8601/);
    const result = await runCli(['routine', 'history', '--result', 'failed'], { cwd: project });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/--result.*failed.*(success|choices)/);
    const order = await runCli(['routine', 'history', '--since', '1h', '--until', '2h'], { cwd: project });
    expect(order.code).toBe(2);
    expect(order.stderr).toMatch(/--since 1h is after --until 2h/);
  });
});
