// An invalid routinely.json must not hide the state: the read-only views warn and show what the
// state folder holds (exit 0); the commands that act, and `routine list --check`, exit 2.

import { existsSync, mkdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, startCli } from '../helpers/cli.js';
import { testdir, testProject } from '../helpers/testdir.js';

const config = {
  exec: { tasks: [{ id: 'build', run: 'echo built' }] },
  routines: [{ id: 'tick', schedule: '*/5 * * * *', action: 'command', run: 'echo tick' }],
};

/** A project that has run a routine and an exec run, and whose config then broke. */
async function brokenProject(extra: object = {}): Promise<{ project: string; runId: string }> {
  const project = testProject({ ...config, ...extra });
  expect((await runCli(['routine', 'run', 'tick'], { cwd: project })).code).toBe(0);
  const run = await runCli(['exec', 'run'], { cwd: project });
  const runId = /^run (r-\S+) SUCCEEDED/m.exec(run.stdout)![1]!;
  const text = readFileSync(join(project, 'routinely.json'), 'utf8');
  writeFileSync(join(project, 'routinely.json'), text.replace(/\n\}$/, ',\n}')); // a trailing comma
  return { project, runId };
}

const WARNING =
  /^routinely: warning: routinely\.json is invalid, so this shows only what the state in (\S+) holds:\nroutinely: {3}routinely\.json: line \d+, column \d+: invalid JSON: trailing comma before "\}" \(JSON allows none\)\n/;

describe('read-only views with an invalid config', () => {
  it('routine list shows the routines of the state, without schedules, and warns', async () => {
    const { project } = await brokenProject();
    const r = await runCli(['routine', 'list'], { cwd: project });
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(WARNING);
    expect(WARNING.exec(r.stderr)![1]).toBe('.routinely');
    expect(r.stdout).toMatch(/^scheduler: not running\n/);
    expect(r.stdout).toMatch(/^tick +- +- +ok \S+ ago +1\/0\/0$/m);
    const json = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as object[];
    expect(json).toEqual([
      expect.objectContaining({ id: 'tick', schedule: null, action: null, next_run_at: null, last_result: 'success' }),
    ]);
  });

  it('routine list --check still fails with exit 2: monitoring must notice', async () => {
    const { project } = await brokenProject();
    const r = await runCli(['routine', 'list', '--check'], { cwd: project });
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(r.stderr).toMatch(/^routinely: routinely\.json: line \d+, column \d+: invalid JSON/);
  });

  it('routine history, exec status, exec runs and exec show still show the state', async () => {
    const { project, runId } = await brokenProject();
    const history = await runCli(['routine', 'history', 'tick'], { cwd: project });
    expect(history).toMatchObject({ code: 0, stderr: expect.stringMatching(WARNING) });
    expect(history.stdout).toMatch(/ ok /);
    const status = await runCli(['exec', 'status'], { cwd: project });
    expect(status).toMatchObject({ code: 0, stderr: expect.stringMatching(WARNING) });
    expect(status.stdout).toMatch(/^build +succeeded/m);
    expect((await runCli(['exec', 'runs'], { cwd: project })).stdout).toContain(`${runId}  SUCCEEDED`);
    expect((await runCli(['exec', 'show', runId], { cwd: project })).stdout).toMatch(
      new RegExp(`^run ${runId}: SUCCEEDED`),
    );
  });

  it('lock status still names the holder', async () => {
    const { project } = await brokenProject();
    writeFileSync(join(project, 'routinely.json'), JSON.stringify(config));
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo started; while [ ! -f go ]; do sleep 0.02; done'], {
      cwd: project,
    });
    await holder.waitFor(/started/);
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ ...config, lock: { ttlSeconds: 'soon' } }));
    const r = await runCli(['lock', 'status'], { cwd: project });
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(
      /^routinely: warning: routinely\.json is invalid, so this shows only what the state in \.routinely holds:\nroutinely: {3}routinely\.json: lock\.ttlSeconds: "soon" is a string; expected number\n$/,
    );
    expect(r.stdout).toMatch(/^exec-run lock: held\n/);
    expect(r.stdout).toMatch(new RegExp(`holder: +pid ${holder.pid} `));
    writeFileSync(join(project, 'go'), '');
    expect((await holder.exited).code).toBe(0);
  });

  it('the state folder comes from what still validates, or ROUTINELY_STATE_DIR', async () => {
    const { project } = await brokenProject({ stateDir: 'var/state' });
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({
        ...config,
        stateDir: 'var/state',
        routines: [{ id: 'tick', schedule: '*/61 * * * *', action: 'command', run: 'echo tick' }],
      }),
    );
    const r = await runCli(['routine', 'list'], { cwd: project });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(
      'routinely: warning: routinely.json is invalid, so this shows only what the state in var/state holds:\nroutinely:   routinely.json: routines[0].schedule: "*/61 * * * *" is not a valid cron expression (minute 61 out of range 0-59)\n',
    );
    expect(r.stdout).toMatch(/^tick +- +- +ok \S+ ago/m);
    const env = await runCli(['routine', 'list'], { cwd: project, env: { ROUTINELY_STATE_DIR: 'elsewhere' } });
    expect(env.stderr).toContain('the state in elsewhere holds');
    expect(env.stdout).toBe('scheduler: not running\nno routines recorded in the state\n');
    const bad = await runCli(['routine', 'list'], { cwd: project, env: { ROUTINELY_LOCK_TTL_SECONDS: 'abc' } });
    expect(bad.code).toBe(2); // a bad environment override stays an error
  });

  it.each([
    [['exec', 'run']],
    [['routine', 'run', 'tick']],
    [['lock', 'run', '--', 'true']],
    [['register']],
    [['routine', 'pause', 'tick']],
  ])('commands that act still refuse: %j exits 2', async (args) => {
    const { project } = await brokenProject();
    const r = await runCli(args, { cwd: project });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^routinely: routinely\.json: line \d+, column \d+: invalid JSON/);
  });
});

// Bytes that are not UTF-8 were replaced by U+FFFD when the file was read: a command ran that
// the file does not hold (found by a fault pass). Refused by line and column, exit 2.
describe('a config or task file that is not UTF-8', () => {
  it('is refused naming the line and column, exit 2, nothing runs; U+FFFD written as such is a character like any other', async () => {
    const project = testProject({});
    const bytes = Buffer.concat([
      Buffer.from('{"routines":[{"id":"a","schedule":"* * * * *","action":"command",\n"run":"echo éé '),
      Buffer.from([0xff]),
      Buffer.from(' > ran"}]}'),
    ]);
    writeFileSync(join(project, 'routinely.json'), bytes);
    for (const args of [['validate'], ['routine', 'run', 'a']]) {
      const r = await runCli(args, { cwd: project });
      expect([r.code, r.stderr], args.join(' ')).toEqual([
        2,
        'routinely: routinely.json: line 2, column 16: byte 0xff is not UTF-8 (save the file as UTF-8)\n',
      ]);
    }
    expect(existsSync(join(project, 'ran'))).toBe(false);
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({ routines: [{ id: 'a', schedule: '* * * * *', action: 'command', run: 'echo \uFFFD € > ran' }] }),
    );
    expect((await runCli(['routine', 'run', 'a'], { cwd: project })).code).toBe(0);
    expect(readFileSync(join(project, 'ran'), 'utf8')).toBe('\uFFFD €\n');
    // a task file under taskDirs: the same
    mkdirSync(join(project, 'tasks'));
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ exec: { taskDirs: ['tasks'] } }));
    writeFileSync(
      join(project, 'tasks', 'a.json'),
      Buffer.concat([Buffer.from('{"id":"x","run":"echo '), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]),
    );
    const run = await runCli(['exec', 'run'], { cwd: project });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/tasks\/a\.json.*line 1, column 23: byte 0xc3 is not UTF-8/);
  });
});

// SPEC §2: a config is refused by validate and at start, never found by the first fire. Task files
// under exec.taskDirs were read only by the first exec run or exec-auto fire (found by a fault
// pass): validate said valid, and the scheduler started.
describe('task files under exec.taskDirs', () => {
  it('a bad task file fails validate and scheduler start (exit 2, named), also after a validate answered from its cache', async () => {
    const project = testProject({
      exec: { taskDirs: ['tasks'] },
      routines: [{ id: 'auto', schedule: '0 0 1 1 *', action: 'exec-auto' }],
    });
    mkdirSync(join(project, 'tasks'));
    writeFileSync(join(project, 'tasks', 'a.json'), JSON.stringify({ id: 'x', run: 'true' }));
    expect((await runCli(['validate'], { cwd: project })).code).toBe(0);
    expect((await runCli(['validate'], { cwd: project })).code).toBe(0);
    writeFileSync(join(project, 'tasks', 'a.json'), JSON.stringify({ id: 'x', run: 'true', bogus: 1 }));
    const bad = /^routinely: tasks\/a\.json: unknown key "bogus" \(allowed: id, run, /;
    const v = await runCli(['validate'], { cwd: project });
    expect(v.code).toBe(2);
    expect(v.stderr).toMatch(bad);
    const json = await runCli(['validate', '--json'], { cwd: project });
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout)).toMatchObject({ valid: false, errors: [{ file: 'tasks/a.json' }] });
    const s = await runCli(['scheduler', 'start'], { cwd: project });
    expect(s.code).toBe(2);
    expect(s.stderr).toMatch(bad);
  });
});

describe('a working folder (cwd) that is a file, or leaves the project through a link, is refused by validate and at start', () => {
  it("routines, inline tasks and a task file's tasks: exit 2 naming each file and JSON path", async () => {
    const outside = testdir();
    const project = testProject({
      exec: { tasks: [{ id: 'inline', run: 'true', cwd: 'afile' }], taskDirs: ['tasks'] },
      routines: [
        { id: 'out', schedule: '0 0 1 1 *', action: 'command', run: 'true', cwd: 'sub' },
        { id: 'file', schedule: '0 0 1 1 *', action: 'command', run: 'true', cwd: 'afile' },
        { id: 'later', schedule: '0 0 1 1 *', action: 'command', run: 'true', cwd: 'made/later' },
      ],
    });
    symlinkSync(outside, join(project, 'sub'));
    writeFileSync(join(project, 'afile'), '');
    const said = [
      `routinely: routinely.json: routines[0].cwd: "sub" leaves the project root through a symbolic link (it is ${realpathSync(outside)})`,
      'routinely.json: routines[1].cwd: "afile" is not a folder',
      'routinely.json: exec.tasks[0].cwd: "afile" is not a folder',
    ].join('\n');
    for (const args of [['validate'], ['scheduler', 'start']]) {
      const r = await runCli(args, { cwd: project });
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toBe(`${said}\n`);
    }
    // a task from a task folder: refused where the tasks are read (validate, exec run), its
    // file and JSON path named
    const config = JSON.parse(readFileSync(join(project, 'routinely.json'), 'utf8'));
    config.exec.tasks = [];
    config.routines = [];
    writeFileSync(join(project, 'routinely.json'), JSON.stringify(config));
    mkdirSync(join(project, 'tasks'));
    writeFileSync(join(project, 'tasks', 'f.json'), JSON.stringify([{ id: 'f', run: 'true', cwd: 'afile' }]));
    for (const args of [['validate'], ['exec', 'run']]) {
      const r = await runCli(args, { cwd: project });
      expect([r.code, r.stderr], args.join(' ')).toEqual([
        2,
        'routinely: tasks/f.json: [0].cwd: "afile" is not a folder\n',
      ]);
    }
    // a task folder that leaves the project through a link, as "../x" may not: its tasks are
    // never read (before: validate passed and exec run ran them)
    rmSync(join(project, 'tasks'), { recursive: true });
    writeFileSync(join(outside, 'e.json'), JSON.stringify({ id: 'e', run: 'touch ran' }));
    symlinkSync(outside, join(project, 'tasks'));
    for (const args of [['validate'], ['exec', 'run']]) {
      const r = await runCli(args, { cwd: project });
      expect([r.code, r.stderr], args.join(' ')).toEqual([
        2,
        `routinely: routinely.json: exec.taskDirs: tasks leaves the project root through a symbolic link (it is ${realpathSync(outside)})\n`,
      ]);
    }
    expect(existsSync(join(project, 'ran'))).toBe(false);
  });
});

describe('validate --json names the file and the JSON path of what it finds past the schema', () => {
  it.each([
    [{ stateDir: '/etc/hostname' }, 'stateDir', '/etc/hostname is not a folder'],
    [
      { project: 'p', backend: { type: 'postgres', url: 'postgres://u@h:99999/db' } },
      'backend.url',
      '"postgres://u@h:99999/db": port 99999 is out of range 1-65535',
    ],
    [
      { http: { listen: '0.0.0.0:19467' } },
      'http.listen',
      '0.0.0.0:19467 listens on every interface: set ROUTINELY_HTTP_TOKEN (clients send "Authorization: Bearer <token>"), or listen on 127.0.0.1',
    ],
    [
      { http: { listen: '127.0.0.1:19467', actions: true } },
      'http.actions',
      'the actions need ROUTINELY_HTTP_TOKEN (at least 16 characters, e.g. `openssl rand -hex 32`), also on loopback; clients send it as "Authorization: Bearer <token>"',
    ],
  ])('%j', async (config, path, message) => {
    const project = testProject(config);
    const r = await runCli(['validate', '--json'], { cwd: project });
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout)).toEqual({
      valid: false,
      config: 'routinely.json',
      errors: [{ file: 'routinely.json', path, message }],
      warnings: [],
    });
  });
});

describe('what validate refuses as scheduler start does (SPEC §2, §10: the environment applied)', () => {
  it.each([
    [{ stateDir: '/etc/hostname' }, {}, 'routinely: routinely.json: stateDir: /etc/hostname is not a folder\n'],
    [
      {},
      { ROUTINELY_STATE_DIR: '/proc/1' },
      'routinely: ROUTINELY_STATE_DIR: /proc/1 is on /proc, a kernel pseudo file system; choose a real folder for state\n',
    ],
    [
      {},
      { ROUTINELY_STATE_DIR: '/etc/hostname/state' },
      'routinely: ROUTINELY_STATE_DIR: /etc/hostname/state cannot be made: /etc/hostname is not a folder\n',
    ],
    [{}, { ROUTINELY_LOCK_DIR: '/etc/hostname' }, 'routinely: ROUTINELY_LOCK_DIR: /etc/hostname is not a folder\n'],
    [
      { stateDir: '   ' },
      {},
      'routinely: routinely.json: stateDir: "PROJECT/   " has a folder name of blanks only in it (a typo?); give a real path\n',
    ],
    [
      {},
      { ROUTINELY_HOST_ID: 'a\nb' },
      'routinely: ROUTINELY_HOST_ID: "a\\nb" is not a host identity (letters, digits, ".", "_", ":", "@" and "-", starting with a letter or digit, at most 253 characters)\n',
    ],
    [
      {},
      { ROUTINELY_STATE_DIR: `/tmp/${'d'.repeat(300)}` },
      `routinely: ROUTINELY_STATE_DIR: /tmp/${'d'.repeat(300)} has a name of 300 bytes in it; a file system takes at most 255\n`,
    ],
    [
      { stateDir: `/tmp/${'abcdefghi/'.repeat(390)}` },
      {},
      `routinely: routinely.json: stateDir: /tmp/${'abcdefghi/'.repeat(389)}abcdefghi is 3904 bytes long; the files in it need a path of at most 3800 for the folder (4096 in all)\n`,
    ],
    [
      { exec: { taskDirs: ['tasks'] } },
      { ROUTINELY_STATE_DIR: 'tasks' },
      'routinely: ROUTINELY_STATE_DIR: PROJECT/tasks is also the task folder "tasks" (exec.taskDirs in routinely.json): the files routinely keeps there would be read as task files; give the state folder a folder of its own\n',
    ],
    [
      { http: { listen: '0.0.0.0:19467' } },
      {},
      'routinely: routinely.json: http.listen: 0.0.0.0:19467 listens on every interface: set ROUTINELY_HTTP_TOKEN (clients send "Authorization: Bearer <token>"), or listen on 127.0.0.1\n',
    ],
  ])('%j %j: exit 2, named where it came from', async (config, env, message) => {
    const project = testProject(config);
    message = message.replace('PROJECT', project);
    for (const args of [['validate'], ['scheduler', 'start']]) {
      const r = await runCli(args, { cwd: project, env });
      expect([r.code, r.stderr], args.join(' ')).toEqual([2, message]);
    }
    // and the commands the entry answers itself (lock run, lock status: their own start-up)
    if (!('http' in config)) {
      const r = await runCli(['lock', 'run', '--', 'true'], { cwd: project, env });
      expect([r.code, r.stderr]).toEqual([2, message]);
    }
  });
});

describe("a routinely.json that cannot be read stops the search: never a parent folder's config", () => {
  it.each([
    ['a folder', (p: string) => mkdirSync(p), 'is a folder, not a regular file'],
    ['a FIFO', (p: string) => spawnSync('mkfifo', [p]), 'is a FIFO (named pipe), not a regular file'],
    [
      'a link to nothing',
      (p: string) => symlinkSync('gone.json', p),
      'is a symbolic link to nothing (its target does not exist)',
    ],
    ['a link in a loop', (p: string) => symlinkSync('routinely.json', p), 'is a symbolic link in a loop'],
  ])('%s', async (_, make, what) => {
    // the parent has a valid config of its own; the project below it has a broken one
    const parent = testProject({
      routines: [{ id: 'parents', schedule: '0 3 * * *', action: 'command', run: 'true' }],
    });
    const project = join(parent, 'app');
    mkdirSync(join(project, 'src'), { recursive: true });
    make(join(project, 'routinely.json'));
    for (const args of [['validate'], ['routine', 'list'], ['lock', 'status'], ['lock', 'run', '--', 'echo', 'ran']]) {
      const r = await runCli(args, { cwd: join(project, 'src') });
      expect([r.code, r.stdout, r.stderr], args.join(' ')).toEqual([
        2,
        '',
        `routinely: ${join(project, 'routinely.json')} ${what}: the config search stops at it (a parent folder's config is not this project's); fix it or pass --config PATH\n`,
      ]);
    }
  });
});

describe('small refusals with their words (a fault pass)', () => {
  it('a config with a byte-order mark reads as without one; routine pause --note takes what the HTTP pause takes (500 characters)', async () => {
    const project = testProject({});
    writeFileSync(
      join(project, 'routinely.json'),
      '\uFEFF' + JSON.stringify({ routines: [{ id: 'a', schedule: '0 0 1 1 *', action: 'command', run: 'true' }] }),
    );
    expect((await runCli(['validate'], { cwd: project })).code).toBe(0);
    // every reader of the config takes it so: the caches are written (their text matched no more)
    expect(existsSync(join(project, '.routinely', 'list-cache.json'))).toBe(true);
    writeFileSync(join(project, 'ct'), '0 3 * * * echo x\n');
    const merged = await runCli(['import-crontab', 'ct', '--merge'], { cwd: project });
    expect(merged.code, merged.stderr).toBe(0);
    const long = await runCli(['routine', 'pause', 'a', '--note', '€'.repeat(501)], { cwd: project });
    expect([long.code, long.stderr]).toEqual([
      2,
      'routinely: --note: at most 500 characters (it has 501), as the HTTP pause takes\n',
    ]);
    expect((await runCli(['routine', 'pause', 'a', '--note', '€'.repeat(500)], { cwd: project })).code).toBe(0);
  });

  it('an empty --config says so (it said: is a folder); an empty ROUTINELY_CONFIG is unset, as for every variable', async () => {
    const project = testProject({});
    const flag = await runCli(['--config', '', 'validate'], { cwd: project });
    expect([flag.code, flag.stderr]).toEqual([2, 'routinely: --config is empty: give the path of a routinely.json\n']);
  });

  it('a TZ this machine does not know is UTC, as the C library takes it (validate said "undefined")', async () => {
    const project = testProject({ routines: [{ id: 'a', schedule: '0 0 1 1 *', action: 'command', run: 'true' }] });
    const r = await runCli(['validate'], { cwd: project, env: { TZ: 'Invalid/Zone' } });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^a {2}0 0 1 1 \* {2}\(UTC; command\)$/m);
  });
});

describe('validate after the commands that leave the cache behind (routine list, lock status)', () => {
  it('refuses what scheduler start refuses: an HTTP token this environment gives that is too short, however often the views ran', async () => {
    const project = testProject({
      routines: [{ id: 't', schedule: '*/3 * * * * *', action: 'command', run: 'true' }],
      http: { listen: '127.0.0.1:19468', actions: true },
    });
    const short = { ROUTINELY_HTTP_TOKEN: 'short' };
    const message =
      'routinely: routinely.json: http.listen: 127.0.0.1:19468 ROUTINELY_HTTP_TOKEN must be at least 16 printable ASCII characters without spaces (e.g. the output of `openssl rand -hex 32`)\n';
    expect((await runCli(['routine', 'list'], { cwd: project, env: short })).code).toBe(0);
    expect((await runCli(['lock', 'status'], { cwd: project, env: short })).code).toBe(0);
    for (const args of [['validate'], ['validate'], ['scheduler', 'start']]) {
      const r = await runCli(args, { cwd: project, env: short });
      expect([r.code, r.stderr], args.join(' ')).toEqual([2, message]);
    }
    // with a token that works, the cache is left behind and validate answers from it: valid
    const good = { ROUTINELY_HTTP_TOKEN: '0123456789abcdef0123' };
    expect((await runCli(['routine', 'list'], { cwd: project, env: good })).code).toBe(0);
    expect(existsSync(join(project, '.routinely', 'config-cache.json'))).toBe(true);
    const valid = await runCli(['validate'], { cwd: project, env: good });
    expect([valid.code, valid.stderr]).toEqual([0, '']);
  });

  it('refuses HTTP settings a running scheduler reloaded (it never listens with them) after it rewrote the cache', async () => {
    const routines = [{ id: 't', schedule: '*/3 * * * * *', action: 'command', run: 'true' }];
    const project = testProject({ routines });
    const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 60_000 });
    await s.waitFor(/\[scheduler\] started/);
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ routines, http: { listen: '0.0.0.0:18931' } }));
    s.child.kill('SIGHUP');
    await s.waitFor(/reloaded config/);
    const r = await runCli(['validate'], { cwd: project });
    expect([r.code, r.stderr]).toEqual([
      2,
      'routinely: routinely.json: http.listen: 0.0.0.0:18931 listens on every interface: set ROUTINELY_HTTP_TOKEN (clients send "Authorization: Bearer <token>"), or listen on 127.0.0.1\n',
    ]);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });
});
