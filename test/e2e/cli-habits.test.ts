// The habits of a command-line user (SPEC §10): --help with every exit code and an example for
// each command (the help texts from the program run in this process: helpers/in-process.ts),
// --json where CI reads the answer, completion in the user's real shell.

import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, childEnv, runCli } from '../helpers/cli.js';
import { runInProcess } from '../helpers/in-process.js';
import { testdir, testProject } from '../helpers/testdir.js';

/** Every command a user can run, from the help of the program and of each group. */
async function leafCommands(): Promise<string[][]> {
  const names = (help: string): string[] => {
    const block = help.split('\nCommands:\n')[1]?.split('\n\n')[0] ?? '';
    return block
      .split('\n')
      .map((l) => /^  (\S+)/.exec(l)?.[1])
      .filter((n): n is string => n !== undefined && n !== 'help');
  };
  const top = names((await runInProcess(['--help'])).stdout);
  const leaves: string[][] = [];
  for (const c of top) {
    const subs = names((await runInProcess([c, '--help'])).stdout);
    if (subs.length === 0) leaves.push([c]);
    else for (const s of subs) leaves.push([c, s]);
  }
  return leaves;
}

const shellMissing = (shell: string): string | null => {
  if (existsSync(`/usr/bin/${shell}`)) return null;
  if (process.env.CI === 'true')
    throw new Error(`CI=true but ${shell} is missing (Debian package "${shell}"; .ci/run installs it)`);
  return `no /usr/bin/${shell}`;
};

describe('--help', () => {
  it('the program lists every exit code of the contract, 74 among them', async () => {
    const help = (await runInProcess(['--help'])).stdout;
    for (const code of ['0', '1', '2', '3', '74', '75']) expect(help).toMatch(new RegExp(`^  ${code} +\\S`, 'm'));
    expect(help).toMatch(/^ {2}129, 130, 131, 143 +stopped by SIGHUP, SIGINT, SIGQUIT, SIGTERM$/m);
    expect(help).toMatch(/lock run -- CMD exits with CMD's own exit code/);
    expect(help.split('\n').filter((l) => l.length > 80)).toEqual([]);
  });

  it('every command shows at least one example and where its exit codes are', async () => {
    const leaves = await leafCommands();
    expect(leaves.length).toBeGreaterThanOrEqual(24);
    expect(leaves).toContainEqual(['import-crontab']);
    expect(leaves).toContainEqual(['completion']);
    const without: string[] = [];
    for (const words of leaves) {
      const help = (await runInProcess([...words, '--help'])).stdout;
      const examples = help.split('\nExamples:\n')[1]?.split('\n\n')[0] ?? '';
      if (!examples.split('\n').some((l) => l.includes(`routinely ${words.join(' ')}`))) without.push(words.join(' '));
      expect(help, words.join(' ')).toMatch(
        /Exit codes: 0 ok, 1 failed, 2 usage or config, 3 no scheduler, 74 state I\/O,\n75 busy/,
      );
      // it fits an 80-column terminal
      expect(
        help.split('\n').filter((l) => l.length > 80),
        words.join(' '),
      ).toEqual([]);
    }
    expect(without).toEqual([]);
  });
});

describe('--json for CI', () => {
  it('validate --json: valid with next times and warnings, or not with every problem named; exit codes as without', async () => {
    const project = testProject({
      routines: [{ id: 'nightly', schedule: '0 3 * * * *', action: 'command', run: 'true', timezone: 'Europe/Paris' }],
    });
    const ok = await runCli(['validate', '--json'], { cwd: project });
    expect(ok.code, ok.stderr).toBe(0);
    const doc = JSON.parse(ok.stdout) as {
      valid: boolean;
      config: string;
      routines: { id: string; timezone: string; next: string[] }[];
      errors: unknown[];
      warnings: string[];
    };
    expect(doc).toMatchObject({ valid: true, config: 'routinely.json', errors: [] });
    expect(doc.routines).toHaveLength(1);
    expect(doc.routines[0]).toMatchObject({ id: 'nightly', timezone: 'Europe/Paris' });
    expect(doc.routines[0]!.next.map((t) => new Date(t).getUTCSeconds())).toEqual([0, 0, 0]);
    expect(doc.warnings).toEqual([expect.stringMatching(/^routine nightly: "0 3 \* \* \* \*" has 6 fields/)]);
    // the same times as the text form
    const text = (await runCli(['validate'], { cwd: project })).stdout;
    for (const t of doc.routines[0]!.next) expect(text).toContain(t);

    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({ routines: [{ id: 'x', schedule: '61 * * * *', action: 'command', run: 'true' }] }),
    );
    const bad = await runCli(['validate', '--json'], { cwd: project });
    expect(bad.code).toBe(2);
    expect(JSON.parse(bad.stdout)).toEqual({
      valid: false,
      config: 'routinely.json',
      warnings: [],
      errors: [
        {
          file: 'routinely.json',
          path: 'routines[0].schedule',
          message: expect.stringMatching(/minute 61 out of range 0-59/),
        },
      ],
    });
    const none = await runCli(['validate', '--json', '--config', join(project, 'nope.json')], { cwd: project });
    expect(none.code).toBe(2);
    expect(JSON.parse(none.stdout)).toMatchObject({
      valid: false,
      errors: [{ message: expect.stringMatching(/nope\.json does not exist/) }],
    });
  });

  it('routine run --json: the record on stdout, the output on stderr; busy is said in JSON with exit 75', async () => {
    const project = testProject({
      routines: [
        { id: 'hi', schedule: '@daily', action: 'command', run: 'echo out; echo err >&2' },
        { id: 'bad', schedule: '@daily', action: 'command', run: 'exit 3' },
      ],
    });
    const ok = await runCli(['routine', 'run', 'hi', '--json'], { cwd: project });
    expect(ok.code).toBe(0);
    expect(ok.stderr).toBe('out\nerr\n');
    const fire = JSON.parse(ok.stdout) as Record<string, unknown>;
    expect(fire).toMatchObject({
      routine: 'hi',
      result: 'success',
      exit_code: 0,
      trigger: 'manual',
      by: expect.stringMatching(/^cli, pid \d+$/),
    });
    // what history shows of it, field for field
    const [entry] = JSON.parse(
      (await runCli(['routine', 'history', 'hi', '--json'], { cwd: project })).stdout,
    ) as Record<string, unknown>[];
    const { routine: _r, log: _l, ...recorded } = fire;
    expect(entry).toEqual(recorded);
    const failed = await runCli(['routine', 'run', 'bad', '--json'], { cwd: project });
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.stdout)).toMatchObject({
      routine: 'bad',
      result: 'failure',
      reason: 'exit code 3',
      exit_code: 3,
    });
    // the lock held by someone else
    const holder = spawnSync(
      process.execPath,
      [CLI, 'lock', 'run', '--', 'sh', '-c', `"${process.execPath}" "${CLI}" routine run hi --json; echo "code=$?"`],
      { cwd: project, env: childEnv(), encoding: 'utf8' },
    );
    expect(holder.stdout).toMatch(/"result": "busy"/);
    expect(holder.stdout).toMatch(/"recorded": false/);
    expect(holder.stdout).toMatch(/code=75\n$/);
  });
});

describe('routinely completion', () => {
  const withBin = (): { env: NodeJS.ProcessEnv; project: string } => {
    const project = testProject({
      routines: [
        { id: 'backup', schedule: '@daily', action: 'command', run: 'true' },
        { id: 'report', schedule: '@daily', action: 'command', run: 'true' },
      ],
    });
    const bin = join(testdir(), 'bin');
    mkdirSync(bin);
    symlinkSync(CLI, join(bin, 'routinely'));
    return { project, env: childEnv({ PATH: `${bin}:${process.env.PATH}` }) };
  };

  it('bash: commands, options, choices and routine ids', () => {
    const { project, env } = withBin();
    const script = `eval "$(routinely completion bash)"
t() { COMP_WORDS=("$@"); COMP_CWORD=$(( \${#COMP_WORDS[@]} - 1 )); COMPREPLY=(); _routinely; echo "\${COMPREPLY[*]}"; }
complete -p routinely
t routinely ro
t routinely routine run ''
t routinely --config x.json lock run --if-busy ''
t routinely exec run --p
t routinely completion ''`;
    const out = execFileSync('/bin/bash', ['-c', script], { cwd: project, env, encoding: 'utf8' }).split('\n');
    expect(out.slice(0, 6)).toEqual([
      'complete -F _routinely routinely',
      'routine',
      '--if-busy --wait-timeout --json --help -h --config -c backup report',
      'fail skip wait',
      '--parallel',
      '--help -h --config -c',
    ]);
  });

  it.skipIf(shellMissing('zsh') !== null)('zsh: registered with compinit, the same answers', () => {
    const { project, env } = withBin();
    const script = `autoload -U compinit && compinit -u -d "$PWD/.zcompdump"; eval "$(routinely completion zsh)"; print -r -- "$_comps[routinely]"
setopt ksharrays   # as zsh's bashcompinit runs the function
COMP_WORDS=(routinely routine stop ''); COMP_CWORD=3; _routinely; print -r -- "\${COMPREPLY[*]}"
COMP_WORDS=(routinely scheduler start --log-format ''); COMP_CWORD=4; _routinely; print -r -- "\${COMPREPLY[*]}"`;
    const out = execFileSync('/usr/bin/zsh', ['-f', '-c', script], { cwd: project, env, encoding: 'utf8' }).split('\n');
    expect(out.slice(0, 3)).toEqual([
      '_bash_complete -F _routinely',
      '--timeout --help -h --config -c backup report',
      'text json',
    ]);
  });

  it.skipIf(shellMissing('fish') !== null)('fish: complete -C answers as a user at the prompt sees it', () => {
    const { project, env } = withBin();
    const script =
      'routinely completion fish | source; complete -C "routinely sch"; echo ---; complete -C "routinely routine logs "; echo ---; complete -C "routinely lock status --key "; echo ---; complete -C "routinely exec "';
    const out = execFileSync('/usr/bin/fish', ['--no-config', '-c', script], {
      cwd: project,
      env: { ...env, HOME: testdir() },
      encoding: 'utf8',
    });
    const [sch, ids, keys, exec] = out.split('---\n').map((b) =>
      b
        .trim()
        .split('\n')
        .map((l) => l.split('\t')[0]),
    );
    expect(sch).toEqual(['scheduler']);
    expect(ids).toEqual(['backup', 'report']);
    expect(keys).toEqual(['exec-run', 'scheduler']);
    expect(exec).toEqual(['reset', 'resume', 'run', 'runs', 'show', 'status']);
  });
});
