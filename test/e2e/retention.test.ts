// `retention` (SPEC §3 "Output is bounded"): a run's output, a routine's log files, its history
// and the exec runs kept are bounded, so no command can fill the state disk. The built CLI, real
// commands printing real output.

import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadRun } from '../../src/exec/run-store.js';
import { eventually, runCli, startCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

const MiB = 1024 * 1024;
/** The bytes `seq 1 N` prints. */
const seqBytes = (n: number): number => {
  let total = 0;
  for (let i = 1; i <= n; i++) total += String(i).length + 1;
  return total;
};
/** 20 MB of numbered lines, FIRST before them and LAST after, on stdout and stderr in turn. */
const LOUD = `echo FIRST; i=0; while [ $i -lt 40 ]; do head -c 524288 /dev/zero | tr '\\0' x; echo " block $i" >&2; i=$((i+1)); done; echo LAST`;
const runsDir = (p: string): string => join(p, '.routinely', 'exec', 'runs');
const runIds = (p: string): string[] =>
  existsSync(runsDir(p))
    ? readdirSync(runsDir(p))
        .filter((n) => n.startsWith('r-'))
        .sort()
    : [];

describe('a run prints more than retention.runLogBytes', () => {
  it('a routine: about runLogBytes on disk, its head and tail kept, a line says how much was left out; routine logs says so', async () => {
    const project = testProject({
      retention: { runLogBytes: MiB },
      routines: [{ id: 'loud', schedule: '0 0 1 1 *', action: 'command', run: LOUD }],
    });
    const r = await runCli(['routine', 'run', 'loud'], { cwd: project });
    expect(r.code).toBe(0);
    const log = join(project, '.routinely', 'logs', 'loud.log');
    const size = statSync(log).size;
    expect(size).toBeLessThanOrEqual(MiB + 1024); // the run's frames come on top of its output
    expect(size).toBeGreaterThan(MiB - 1024);
    const text = readFileSync(log, 'utf8');
    expect(text).toMatch(/\nFIRST\n/);
    expect(text).toMatch(/ block 39\nLAST\n/); // stderr and stdout in the order printed
    const cut = /\n--- routinely: (\d+) bytes of output left out \(runLogBytes 1048576\) ---\n/.exec(text);
    expect(cut).not.toBeNull();
    const printed = 6 + 40 * (524288 + ' block 0\n'.length) + 30 + 5; // FIRST, blocks, block 10..39, LAST
    expect(Number(cut![1])).toBeGreaterThan(printed - MiB - 2000);
    expect(Number(cut![1])).toBeLessThan(printed - MiB + 2000);
    const shown = await runCli(['routine', 'logs', 'loud'], { cwd: project });
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain('LAST');
    expect(shown.stderr).toMatch(
      /a run shown here printed more than retention\.runLogBytes: \d+ bytes were left out of the middle/,
    );
  });

  it('an exec task: its log is bounded the same way, and exec show says its output was cut', async () => {
    const project = testProject({
      retention: { runLogBytes: MiB },
      exec: {
        tasks: [
          { id: 'loud', run: LOUD },
          { id: 'quiet', run: 'echo hi' },
        ],
      },
    });
    const r = await runCli(['exec', 'run'], { cwd: project });
    expect(r.code).toBe(0);
    const [id] = runIds(project);
    const log = join(runsDir(project), id!, 'loud.log');
    expect(statSync(log).size).toBeLessThanOrEqual(MiB);
    const text = readFileSync(log, 'utf8');
    expect(text.startsWith('FIRST\n')).toBe(true);
    expect(text.endsWith(' block 39\nLAST\n')).toBe(true);
    expect(text).toMatch(/--- routinely: \d+ bytes of output left out \(runLogBytes 1048576\) ---/);
    expect(readFileSync(join(runsDir(project), id!, 'quiet.log'), 'utf8')).toBe('hi\n');
    const run = loadRun(runsDir(project), id!)!;
    expect(run.tasks.loud?.output_cut_bytes).toBeGreaterThan(19 * MiB);
    expect(run.tasks.quiet?.output_cut_bytes ?? 0).toBe(0);
    const show = await runCli(['exec', 'show', id!], { cwd: project });
    expect(show.stdout).toMatch(/loud .*\(output cut: [\d.]+ MiB left out of the middle, retention\.runLogBytes\)/);
    expect(show.stdout).not.toMatch(/quiet .*output cut/);
  });

  it('a failing task resumed again and again: its log in the run stays within runLogBytes over all its attempts', async () => {
    const cap = 10_000;
    const project = testProject({
      retention: { runLogBytes: cap },
      exec: { tasks: [{ id: 'a', run: 'echo "attempt $(date +%s%N)"; seq 1 100000; exit 1' }] },
    });
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(1);
    const [id] = runIds(project);
    const log = join(runsDir(project), id!, 'a.log');
    for (let i = 0; i < 4; i++) {
      expect((await runCli(['exec', 'resume', id!], { cwd: project })).code).toBe(1);
      expect(statSync(log).size).toBeLessThanOrEqual(cap);
    }
    const text = readFileSync(log, 'utf8');
    // the earlier attempts' last bytes after a line saying how much of them was left out, then
    // the last attempt from its start
    expect(text).toMatch(/^--- routinely: \d+ bytes of output left out \(runLogBytes 10000\) ---\n/);
    expect(text).toMatch(/\n--- routinely: run attempt 5, [^\n]+ ---\nattempt \d+\n1\n2\n/);
    expect(text.endsWith('100000\n')).toBe(true);
    // every byte of output is either in the log or counted by a line that says it was left out,
    // over all five attempts (each earlier count carried into the next one's)
    const printed = 5 * (Buffer.byteLength(`attempt ${'1'.repeat(19)}\n`) + seqBytes(100_000));
    const lines = text.split(/(?<=\n)/);
    const ours = lines.filter((l) => l.startsWith('--- routinely: '));
    const leftOut = ours.reduce(
      (n, l) => n + Number(/^--- routinely: (\d+) bytes of output left out/.exec(l)?.[1] ?? 0),
      0,
    );
    // (each of routinely's lines after a newline of its own, but the first)
    const kept = Buffer.byteLength(text) - ours.reduce((n, l) => n + Buffer.byteLength(l) + 1, -1);
    expect(kept + leftOut).toBe(printed);
  });

  it('a command that leaves a background job holding its output does not keep the run open', async () => {
    const project = testProject({
      retention: { runLogBytes: MiB },
      routines: [
        { id: 'bg', schedule: '0 0 1 1 *', action: 'command', run: 'echo before; (sleep 30; echo late) & echo after' },
      ],
    });
    const r = await runCli(['routine', 'run', 'bg'], { cwd: project });
    expect(r.code).toBe(0);
    const text = readFileSync(join(project, '.routinely', 'logs', 'bg.log'), 'utf8');
    expect(text).toMatch(/before\nafter\n/);
    expect(text).toMatch(/ended \d+ leftover process/);
    expect(text).not.toContain('late');
  });
});

describe("a routine's log files stay within retention.routineLogBytes", () => {
  it('runs of 600 KiB each with routineLogBytes 2 MiB: the log and its one rotated file together stay within it', async () => {
    const run = `head -c 614400 /dev/zero | tr '\\0' y; echo; echo "run $(cat n 2>/dev/null)"`;
    const project = testProject({
      retention: { runLogBytes: MiB, routineLogBytes: 2 * MiB },
      routines: [{ id: 'r', schedule: '0 0 1 1 *', action: 'command', run }],
    });
    const log = join(project, '.routinely', 'logs', 'r.log');
    for (let i = 0; i < 8; i++) {
      writeFileSync(join(project, 'n'), String(i));
      const before = existsSync(log) ? statSync(log) : null;
      expect((await runCli(['routine', 'run', 'r'], { cwd: project })).code).toBe(0);
      const total = statSync(log).size + (existsSync(`${log}.1`) ? statSync(`${log}.1`).size : 0);
      expect(total).toBeLessThanOrEqual(2 * MiB);
      // as documented: rotated before a run exactly when the log held more than
      // routineLogBytes / 2 - runLogBytes (0 here), so it never passes routineLogBytes / 2
      const rotated = before !== null && existsSync(`${log}.1`) && statSync(`${log}.1`).ino === before.ino;
      expect(rotated, `run ${i}`).toBe(before !== null && before.size > 0);
      expect(statSync(log).size).toBeLessThanOrEqual(MiB);
    }
    expect(existsSync(`${log}.1`)).toBe(true);
    const shown = await runCli(['routine', 'logs', 'r', '--lines', '1'], { cwd: project });
    expect(shown.stdout).toMatch(/^\S.*\n$/); // the last line
    expect(readFileSync(log, 'utf8')).toContain('run 7');
  });
});

describe('retention.execRuns', () => {
  it('keeps the newest N runs; an interrupted (resumable) run is never removed, and resumes', async () => {
    const project = testProject();
    const cfg = (slow: boolean) =>
      JSON.stringify({
        retention: { execRuns: 3 },
        exec: {
          tasks: [
            { id: 'a', run: 'true' },
            { id: 'b', run: slow ? 'touch b.started; sleep 60' : 'true' },
          ],
        },
      });
    writeFileSync(join(project, 'routinely.json'), cfg(true));
    const p = startCli(['exec', 'run', 'b'], { cwd: project });
    await eventually(() => existsSync(join(project, 'b.started')), 10_000, 'b started');
    p.child.kill('SIGKILL');
    await p.exited;
    const [interrupted] = runIds(project);
    writeFileSync(join(project, 'routinely.json'), cfg(false));
    for (let i = 0; i < 6; i++) expect((await runCli(['exec', 'run', 'a'], { cwd: project })).code).toBe(0);
    const ids = runIds(project);
    expect(ids).toHaveLength(4); // the newest 3, and the interrupted one
    expect(ids).toContain(interrupted);
    const listed = (await runCli(['exec', 'runs'], { cwd: project })).stdout;
    for (const id of ids) expect(listed).toContain(id);
    const resumed = await runCli(['exec', 'resume', '--json'], { cwd: project });
    expect(resumed.code).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ run_id: interrupted, status: 'SUCCEEDED' });
    // once finished it holds b's success, the only record of it: kept beside the newest 3
    expect((await runCli(['exec', 'run', 'a'], { cwd: project })).code).toBe(0);
    expect(runIds(project)).toContain(interrupted);
    expect(runIds(project)).toHaveLength(4);
  });

  it("never removes the only run that proves a task's result: with tasks.json lost after pruning, a task that succeeded does not run again", async () => {
    const project = testProject({
      retention: { execRuns: 2 },
      exec: {
        tasks: [
          { id: 'bigt', run: 'echo ran >> bigt.count' },
          { id: 'small', run: 'true' },
          { id: 'flaky', run: 'exit 1' },
        ],
      },
    });
    expect((await runCli(['exec', 'run', 'bigt'], { cwd: project })).code).toBe(0);
    const [proof] = runIds(project);
    for (let i = 0; i < 5; i++) await runCli(['exec', 'run', 'small', 'flaky'], { cwd: project });
    const ids = runIds(project);
    expect(ids).toContain(proof);
    expect(ids.length).toBeLessThanOrEqual(3); // the newest 2, and bigt's proof
    // the index lost: rebuilt from the runs kept
    rmSync(join(project, '.routinely', 'exec', 'tasks.json'));
    const status = JSON.parse((await runCli(['exec', 'status', '--json'], { cwd: project })).stdout) as {
      id: string;
      status: string;
    }[];
    expect(Object.fromEntries(status.map((t) => [t.id, t.status]))).toMatchObject({
      bigt: 'succeeded',
      small: 'succeeded',
      flaky: 'failed',
    });
    await runCli(['exec', 'run'], { cwd: project });
    expect(readFileSync(join(project, 'bigt.count'), 'utf8')).toBe('ran\n');
  });
});

describe('retention in the config', () => {
  it('bad values name their JSON path; routineLogBytes below twice runLogBytes is refused', async () => {
    const project = testProject({ retention: { runLogBytes: 10, historyLines: 0, execRuns: 'many', nope: 1 } });
    const r = await runCli(['validate'], { cwd: project });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/retention\.runLogBytes/);
    expect(r.stderr).toMatch(/retention\.historyLines/);
    expect(r.stderr).toMatch(/retention\.execRuns/);
    expect(r.stderr).toMatch(/retention\.nope|"nope"/);
    const small = testProject({ retention: { runLogBytes: 4 * MiB, routineLogBytes: 6 * MiB } });
    const s = await runCli(['validate'], { cwd: small });
    expect(s.code).toBe(2);
    expect(s.stderr).toMatch(/retention\.routineLogBytes.*runLogBytes/);
  });
});
