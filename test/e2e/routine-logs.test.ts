// `routinely routine logs` through the built CLI (SPEC §10): every run framed by a start and an
// end line (command routines and exec actions, whose runs log what `exec run` says), --run, --lines, --follow of a live scheduler
// (stopped by SIGTERM with exit 0) and of one run (ends with the run), and the errors.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually, runCli, startCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

const START = /^--- routinely: (\S+) run (\S+) started \S+ \(scheduled \S+, (schedule|manual|retry)\) ---$/;
const END = /^--- routinely: (\S+) run (\S+) finished \S+: (success|failure|skipped)(?: \(.*\))? in \d+\.\ds ---$/;

describe('routine logs', () => {
  it('shows every run framed, selects one with --run, the last lines with --lines', async () => {
    const dir = testProject({
      exec: { tasks: [{ id: 'build', run: 'echo building' }] },
      routines: [
        { id: 'backup', schedule: '0 3 * * *', action: 'command', run: 'echo "dumping $ROUTINELY_RUN_ID"; echo done' },
        { id: 'flaky', schedule: '0 3 * * *', action: 'command', run: 'echo starting; exit 3' },
        { id: 'auto', schedule: '0 3 * * *', action: 'exec-auto' },
      ],
    });
    for (const id of ['backup', 'flaky', 'backup', 'auto']) await runCli(['routine', 'run', id], { cwd: dir });
    const all = await runCli(['routine', 'logs', 'backup'], { cwd: dir });
    expect(all.code).toBe(0);
    const lines = all.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(8);
    const runs = [lines[0]!.match(START)![2]!, lines[4]!.match(START)![2]!];
    expect(lines.map((l) => (START.test(l) ? 'start' : END.test(l) ? 'end' : l))).toEqual([
      'start',
      `dumping ${runs[0]}`,
      'done',
      'end',
      'start',
      `dumping ${runs[1]}`,
      'done',
      'end',
    ]);
    expect(lines[3]).toMatch(new RegExp(`^--- routinely: backup run ${runs[0]} finished .*: success in`));
    const one = await runCli(['routine', 'logs', 'backup', '--run', runs[1]!], { cwd: dir });
    expect(one).toMatchObject({ code: 0, stdout: `${lines.slice(4).join('\n')}\n` });
    expect((await runCli(['routine', 'logs', 'backup', '--lines', '2'], { cwd: dir })).stdout).toBe(
      `${lines.slice(6).join('\n')}\n`,
    );
    const flaky = (await runCli(['routine', 'logs', 'flaky'], { cwd: dir })).stdout;
    expect(flaky).toMatch(
      /^--- routinely: flaky run r-\S+ started .*\nstarting\n--- routinely: flaky run r-\S+ finished .*: failure \(exit code 3\) in \d+\.\ds ---\n$/,
    );
    // an exec action: its start frame says pending, its end frame names the exec run
    const auto = (await runCli(['routine', 'logs', 'auto'], { cwd: dir })).stdout;
    const runId = /^--- routinely: auto run (r-\S+) finished .*: success in/m.exec(auto)?.[1];
    expect(auto).toMatch(/^--- routinely: auto run pending started /);
    expect(runId).toBeDefined();
    expect((await runCli(['routine', 'logs', 'auto', '--run', runId!], { cwd: dir })).stdout).toBe(auto);
    // between the frames, what `exec run` says on a terminal (without colour)
    expect(auto.trimEnd().split('\n').slice(1, -1)).toEqual([
      `run ${runId}: 1 task`,
      'started build',
      expect.stringMatching(/^succeeded build in \d+\.\ds$/),
      expect.stringMatching(new RegExp(`^run ${runId} SUCCEEDED: 1 succeeded in \\d+\\.\\ds$`)),
    ]);
  });

  it('an exec action with a failing task, with nothing to do, and a register: the log says what the terminal would', async () => {
    const dir = testProject({
      exec: {
        tasks: [
          { id: 'build', run: 'echo building' },
          { id: 'bad', run: 'exit 3', dependsOn: ['build'] },
        ],
      },
      routines: [
        { id: 'auto', schedule: '0 3 * * *', action: 'exec-auto' },
        { id: 'reg', schedule: '0 3 * * *', action: 'register' },
      ],
    });
    for (const id of ['auto', 'auto', 'reg']) await runCli(['routine', 'run', id], { cwd: dir });
    const body = (text: string): string[] =>
      text
        .trimEnd()
        .split('\n')
        .filter((l) => !START.test(l) && !END.test(l));
    const auto = body((await runCli(['routine', 'logs', 'auto'], { cwd: dir })).stdout);
    const runId = /^run (r-\S+): 2 tasks$/.exec(auto[0]!)?.[1];
    expect(auto).toEqual([
      `run ${runId}: 2 tasks`,
      'started build',
      expect.stringMatching(/^succeeded build in /),
      'started bad',
      expect.stringMatching(
        new RegExp(
          `^failed bad: the command exited with code 3 in \\d+\\.\\ds {2}\\(log: \\.routinely/exec/runs/${runId}/bad\\.log\\)$`,
        ),
      ),
      expect.stringMatching(new RegExp(`^run ${runId} FAILED: 1 succeeded, 1 failed in `)),
      '  why:  1 of 2 tasks failed: bad (exit 3)',
      `  next: routinely exec show ${runId} (logs beside it), fix, then: routinely exec resume ${runId}`,
      'nothing to run: 1 succeeded, 1 failed',
    ]);
    expect(body((await runCli(['routine', 'logs', 'reg'], { cwd: dir })).stdout)).toEqual([
      'registered: 0 new, 0 changed, 0 retired',
    ]);
  });

  it('says so for an unknown routine (2), a bad or unknown run id (2), and a routine with no log yet (0)', async () => {
    const dir = testProject({
      routines: [
        { id: 'backup', schedule: '0 3 * * *', action: 'command', run: 'true' },
        { id: 'new', schedule: '0 3 * * *', action: 'command', run: 'true' },
      ],
    });
    await runCli(['routine', 'run', 'backup'], { cwd: dir });
    const unknown = await runCli(['routine', 'logs', 'nope'], { cwd: dir });
    expect(unknown).toMatchObject({ code: 2, stdout: '' });
    expect(unknown.stderr).toBe('routinely: unknown routine "nope" (known: backup, new)\n');
    const bad = await runCli(['routine', 'logs', 'backup', '--run', '../../etc/passwd'], { cwd: dir });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--run: "\.\.\/\.\.\/etc\/passwd" is not a run id/);
    const missing = await runCli(['routine', 'logs', 'backup', '--run', 'r-20000101T000000Z-dead'], { cwd: dir });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(
      /^routinely: no run r-20000101T000000Z-dead in the log of backup \(\.routinely\/logs\/backup\.log and its rotated \.1\); routinely routine history backup lists its runs\n$/,
    );
    expect(await runCli(['routine', 'logs', 'new'], { cwd: dir })).toMatchObject({
      code: 0,
      stdout: 'no output logged for new yet (.routinely/logs/new.log does not exist)\n',
    });
  });

  it('works while the config is broken: a warning, then the output', async () => {
    const dir = testProject({
      routines: [{ id: 'backup', schedule: '0 3 * * *', action: 'command', run: 'echo safe' }],
    });
    await runCli(['routine', 'run', 'backup'], { cwd: dir });
    writeFileSync(join(dir, 'routinely.json'), '{ "routines": [ { "id": "backup", } ] }');
    const r = await runCli(['routine', 'logs', 'backup'], { cwd: dir });
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(
      /^routinely: warning: routinely\.json is invalid, so this shows only what the state in \.routinely holds:/,
    );
    expect(r.stdout).toMatch(/^--- routinely: backup run r-\S+ started .*\nsafe\n--- routinely: backup run/);
    expect((await runCli(['routine', 'logs', '../x'], { cwd: dir })).code).toBe(2);
  });

  it('--follow prints what a running scheduler writes, until SIGTERM (exit 0)', async () => {
    const dir = testProject({
      routines: [{ id: 'tick', schedule: '* * * * * *', action: 'command', run: 'echo "tick $ROUTINELY_RUN_ID"' }],
    });
    const follow = startCli(['routine', 'logs', 'tick', '--follow'], { cwd: dir });
    await follow.waitFor(/no output logged for tick yet; waiting for it/);
    const s = startCli(['scheduler', 'start'], { cwd: dir });
    await follow.waitFor(/finished [^\n]*: success in[^\n]*\n[^]*finished [^\n]*: success in/);
    follow.child.kill('SIGTERM');
    expect(await follow.exited).toEqual({ code: 0, signal: null });
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    // what it printed is the log byte for byte, as written, from its first frame
    const log = readFileSync(join(dir, '.routinely/logs/tick.log'), 'utf8');
    expect(log.startsWith(follow.stdout())).toBe(true);
    const shown = follow.stdout().split('\n');
    expect(shown[0]).toMatch(START);
    expect(shown[1]).toMatch(/^tick r-/);
  });

  it('--follow --run follows one run while it runs and ends with it', async () => {
    const dir = testProject({
      routines: [
        {
          id: 'slow',
          schedule: '0 3 * * *',
          action: 'command',
          run: 'echo begin; while [ ! -f go ]; do sleep 0.05; done; echo end',
        },
      ],
    });
    const running = startCli(['routine', 'run', 'slow'], { cwd: dir });
    await running.waitFor(/begin/);
    const log = join(dir, '.routinely/logs/slow.log');
    await eventually(() => existsSync(log));
    const runId = START.exec(readFileSync(log, 'utf8').split('\n')[0]!)![2]!;
    const follow = startCli(['routine', 'logs', 'slow', '--run', runId, '--follow'], { cwd: dir });
    await follow.waitFor(/begin\n/);
    expect(follow.stdout()).not.toMatch(/end/);
    writeFileSync(join(dir, 'go'), '');
    expect(await follow.exited).toEqual({ code: 0, signal: null });
    expect(follow.stdout()).toMatch(
      new RegExp(
        `^--- routinely: slow run ${runId} started [^\\n]*\\nbegin\\nend\\n--- routinely: slow run ${runId} finished [^\\n]*: success in \\d+\\.\\ds ---\\n$`,
      ),
    );
    expect((await running.exited).code).toBe(0);
  });

  it('what a command printed reaches the terminal escaped (SPEC §12): no window title (OSC), clear-screen or carriage return; colour kept; the log file keeps the bytes', async () => {
    const printf = String.raw`printf 'title\033]0;pwned\007 clear\033[2J\033[H home\rover \033[31mred\033[0m\n'`;
    const dir = testProject({ routines: [{ id: 'loud', schedule: '0 3 * * *', action: 'command', run: printf }] });
    expect((await runCli(['routine', 'run', 'loud'], { cwd: dir })).code).toBe(0);
    const shown = await runCli(['routine', 'logs', 'loud'], { cwd: dir });
    expect(shown.code).toBe(0);
    expect(shown.stdout.split('\n')[1]).toBe(
      String.raw`title\x1b]0;pwned\x07 clear\x1b[2J\x1b[H home\x0dover ` + '\u001b[31mred\u001b[0m',
    );
    // followed (read as it is written), the same
    const follow = startCli(['routine', 'logs', 'loud', '--follow'], { cwd: dir });
    await follow.waitFor(/finished [^\n]*: success in/);
    follow.child.kill('SIGTERM');
    expect((await follow.exited).code).toBe(0);
    expect(follow.stdout()).toBe(shown.stdout);
    expect(readFileSync(join(dir, '.routinely/logs/loud.log'), 'utf8')).toContain(
      'title\u001b]0;pwned\u0007 clear\u001b[2J\u001b[H home\rover \u001b[31mred\u001b[0m\n',
    );
  });
});
