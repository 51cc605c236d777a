import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, childEnv, runCli } from '../helpers/cli.js';
import { runInProcess } from '../helpers/in-process.js';
import { testdir, testProject } from '../helpers/testdir.js';

/** A folder without a config, and a project elsewhere that `--config` names. */
function elsewhere(): { cwd: string; config: string } {
  const project = testProject({
    routines: [{ id: 'nightly', schedule: '0 3 * * *', timezone: 'UTC', action: 'command', run: 'true' }],
  });
  return { cwd: testdir(), config: join(project, 'routinely.json') };
}

describe('global options', () => {
  it.each([
    [['validate', '--config', '$CONFIG'], /valid \(1 routine, 0 inline tasks\)/],
    [['validate', '-c', '$CONFIG'], /valid \(1 routine/],
    [['--config', '$CONFIG', 'validate'], /valid \(1 routine/],
    [['routine', 'list', '--config', '$CONFIG'], /nightly/],
    [['routine', '--config', '$CONFIG', 'list'], /nightly/],
    [['exec', 'run', '--config', '$CONFIG'], /nothing to run/],
    [['exec', 'runs', '--config', '$CONFIG', '--json'], /^\[\]/],
    [['lock', 'status', '--config', '$CONFIG'], /exec-run lock: free/],
    [['lock', 'run', '--config', '$CONFIG', '--', 'echo', 'ran', '--config', 'x'], /^ran --config x$/m],
  ])('are accepted after the subcommand too: %j', async (args, expected) => {
    const { cwd, config } = elsewhere();
    const r = await runCli(
      args.map((a) => (a === '$CONFIG' ? config : a)),
      { cwd },
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(expected);
  });

  it('given twice, the one nearer the subcommand wins; --version works after a subcommand', async () => {
    const { cwd, config } = elsewhere();
    const r = await runCli(['--config', 'nope.json', 'validate', '--config', config], { cwd });
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const v = await runCli(['validate', '--version'], { cwd });
    expect(v).toMatchObject({ code: 0, stdout: expect.stringMatching(/^\d+\.\d+\.\d+/) });
  });

  it('subcommand help lists them as global options', async () => {
    const r = await runInProcess(['validate', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/Global Options:\n(.*\n)*\s+-c, --config <path>/);
  });
});

describe('a working folder removed under the shell', () => {
  it.each([['validate'], ['routine', 'list'], ['lock', 'run', '--', 'true'], ['exec', 'status']])(
    '%s: exit 2 saying so, never an unexpected error (also with an absolute --config)',
    (...args) => {
      const { config } = elsewhere();
      const dir = join(testdir(), 'gone');
      mkdirSync(dir);
      const r = spawnSync(
        'sh',
        ['-c', 'cd "$1" && rmdir "$1" && shift && exec "$@"', 'sh', dir, process.execPath, CLI, '-c', config, ...args],
        { env: childEnv(), encoding: 'utf8' },
      );
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toBe(
        'routinely: the current folder no longer exists (removed, or moved away from this shell): cd to one that does\n',
      );
    },
  );
});

describe('help without a command', () => {
  it('bare `routinely` prints the help to stdout and exits 0', async () => {
    const r = await runCli([]); // the entry file itself: exit code and help, as a user types it
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toMatch(/^Usage: routinely \[options\] \[command\]/);
    expect(r.stdout).toMatch(/Commands:/);
  });

  it('a command group alone prints its help to stdout; an unknown subcommand is still an error', async () => {
    const r = await runInProcess(['exec']);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toMatch(/^Usage: routinely exec/);
    const bad = await runInProcess(['exec', 'frobnicate']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/unknown command 'frobnicate'/);
  });
  it("`help COMMAND…` prints that command's help to stdout (exec run's, not exec's); an unknown one is an error, exit 2", async () => {
    const run = await runInProcess(['help', 'exec', 'run']);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toMatch(/^Usage: routinely exec run /);
    expect((await runInProcess(['help'])).stdout).toMatch(/^Usage: routinely \[options\] \[command\]/);
    for (const [args, path] of [
      [['help', 'bogus'], 'bogus'],
      [['help', 'exec', 'bogus'], 'exec bogus'],
    ] as const)
      expect(await runInProcess([...args])).toMatchObject({
        code: 2,
        stdout: '',
        stderr: `routinely: help: unknown command '${path}' (routinely help lists the commands)\n`,
      });
  });
});

describe('--wait-timeout without --if-busy wait is refused, never ignored', () => {
  it.each([
    [['lock', 'run', '--wait-timeout', '5', '--', 'echo', 'ran']],
    [['register', '--wait-timeout', '5']],
    [['exec', 'run', '--wait-timeout', '5']],
    [['exec', 'resume', '--wait-timeout', '5']],
    [['exec', 'reset', 'build', '--wait-timeout', '5']],
    [['routine', 'run', 'nightly', '--wait-timeout', '5']],
    [['exec', 'run', '--if-busy', 'skip', '--wait-timeout', '5']],
  ])('%j', async (args) => {
    const project = testProject({
      exec: { tasks: [{ id: 'build', run: 'echo built' }] },
      routines: [{ id: 'nightly', schedule: '0 3 * * *', action: 'command', run: 'echo fired' }],
    });
    // refused before anything runs: the program's words (in this process), but `lock run`, whose
    // start-up path (src/cli/main.ts) is the built CLI's own
    const r = args[0] === 'lock' ? await runCli(args, { cwd: project }) : await runInProcess(args, { cwd: project });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(
      /^routinely: --wait-timeout only applies with --if-busy wait \((got --if-busy skip|--if-busy is fail by default)\); to wait up to 5s, add --if-busy wait\n$/,
    );
  });
});

describe('an option that takes a value, given twice, is refused (never the last one taken)', () => {
  it.each([
    [['lock', 'run', '--lock', 'a', '--lock', 'b', '--', 'echo', 'ran'], '--lock'],
    [['lock', 'run', '--if-busy', 'wait', '--if-busy', 'fail', '--', 'echo', 'ran'], '--if-busy'],
    [
      ['lock', 'run', '--if-busy', 'wait', '--wait-timeout', '1', '--wait-timeout', '2', '--', 'echo', 'ran'],
      '--wait-timeout',
    ],
    [['lock', 'status', '--key', 'exec-run', '--key', 'scheduler'], '--key'],
    [['lock', 'status', '--lock', 'a', '--json', '--lock', 'b'], '--lock'],
    [['exec', 'run', '--timeout', '1', '--timeout=2'], '--timeout'],
    [['routine', 'history', 'nightly', '--limit', '1', '--limit', '2'], '--limit'],
  ])('%j', async (args, flag) => {
    const project = testProject({
      exec: { tasks: [{ id: 'build', run: 'echo built' }] },
      routines: [{ id: 'nightly', schedule: '0 3 * * *', action: 'command', run: 'echo fired' }],
    });
    // the built CLI: `lock run` and `lock status` have start-up paths of their own (src/cli/main.ts)
    const r = await runCli(args, { cwd: project });
    expect(r).toMatchObject({ code: 2, stdout: '', stderr: `routinely: ${flag} given twice: give it once\n` });
  });

  it("a value after `--` is the command's, however often it repeats", async () => {
    const project = testProject({ routines: [] });
    const r = await runCli(['lock', 'run', '--', 'echo', '--lock', 'x', '--lock', 'y'], { cwd: project });
    expect(r).toMatchObject({ code: 0, stdout: '--lock x --lock y\n' });
  });
});

describe('a path given with a control character in it', () => {
  it('is named on one line, escaped (never a raw newline splitting the message)', async () => {
    const cwd = testdir();
    for (const [args, env, source] of [
      [['-c', 'a\nb', 'validate'], {}, '--config'],
      [['lock', 'status'], { ROUTINELY_CONFIG: 'a\nb' }, 'ROUTINELY_CONFIG'],
    ] as const) {
      const r = await runCli([...args], { cwd, env });
      expect([r.code, r.stderr]).toEqual([2, `routinely: ${source}: a\\x0ab does not exist\n`]);
    }
  });
});

describe('an output that cannot be written (> /dev/full)', () => {
  // (spawnSync: the output is the file itself, as `> /dev/full` makes it)
  const toFull = (args: string[], cwd: string) => {
    const fd = openSync('/dev/full', 'w');
    try {
      return spawnSync(process.execPath, [CLI, ...args], {
        cwd,
        env: childEnv(),
        stdio: ['ignore', fd, 'pipe'],
        encoding: 'utf8',
      });
    } finally {
      closeSync(fd);
    }
  };
  it.runIf(existsSync('/dev/full'))(
    'a view says so and exits 74, never 0 with its answer lost; a command that did its work keeps its code and says so',
    () => {
      const project = testProject({
        exec: { tasks: [{ id: 'a', run: 'true' }] },
        routines: [{ id: 'r', schedule: '0 0 1 1 *', action: 'command', run: 'true' }],
      });
      const lost = 'routinely: cannot write its output: no space left on device (ENOSPC)\n';
      for (const args of [
        ['--version'],
        ['validate'],
        ['routine', 'list'],
        ['routine', 'list', '--json'],
        ['lock', 'status'],
        ['exec', 'status', '--json'],
        ['exec', 'runs'],
        // (a global option's value is no command word)
        ['--config', 'routinely.json', 'routine', 'list'],
        ['-c', 'routinely.json', 'exec', 'status'],
      ]) {
        const r = toFull(args, project);
        expect([r.status, r.stderr], args.join(' ')).toEqual([74, lost]);
      }
      const ran = toFull(['exec', 'run', '--json'], project);
      expect([ran.status, ran.stderr]).toEqual([0, lost]);
      expect(
        JSON.parse(
          spawnSync(process.execPath, [CLI, 'exec', 'status', '--json'], {
            cwd: project,
            env: childEnv(),
            encoding: 'utf8',
          }).stdout,
        ),
      ).toEqual([expect.objectContaining({ id: 'a', status: 'succeeded' })]);
    },
  );
});
