import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configJsonSchema, taskFileJsonSchema } from '../../src/config/json-schema.js';
import { validateConfig, validateTaskFile, validateTaskSet } from '../../src/config/validate.js';

function problems(input: unknown): string[] {
  const r = validateConfig(input);
  if (r.ok) return [];
  return r.issues.map((i) => `${i.path}: ${i.message}`);
}

const routine = (over: object = {}) => ({ id: 'auto', schedule: '*/5 * * * *', action: 'exec-auto', ...over });
const task = (over: object = {}) => ({ id: 'build', run: 'true', ...over });

describe('validateConfig', () => {
  it('accepts the SPEC §2 example and applies defaults', () => {
    const example = JSON.parse(readFileSync(join(import.meta.dirname, '../../examples/spec-example.json'), 'utf8'));
    const r = validateConfig(example);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.routines.find((x) => x.id === 'auto')).toMatchObject({
      enabled: true,
      catchUp: 'none',
      jitterSeconds: 0,
    });
    expect(validateConfig({})).toMatchObject({
      ok: true,
      value: { stateDir: '.routinely', lock: { ttlSeconds: 60 }, exec: { parallel: 2 } },
    });
  });

  it('a state folder that is also a task folder is refused, naming both (its files would be read as tasks)', () => {
    expect(problems({ stateDir: 'tasks', exec: { taskDirs: ['tasks/'] } })).toEqual([
      'stateDir: "tasks" is also exec.taskDirs[0]: the files routinely keeps there would be read as task files; give the state folder a folder of its own',
    ]);
    expect(problems({ stateDir: 'tasks/state', exec: { taskDirs: ['tasks'] } })).toEqual([]);
  });

  it('backend.poolSize: 2 by default, 1..100, postgres only', () => {
    expect(validateConfig({ project: 'p', backend: { type: 'postgres' } })).toMatchObject({
      ok: true,
      value: { backend: { type: 'postgres', poolSize: 2 } },
    });
    expect(validateConfig({ project: 'p', backend: { type: 'postgres', poolSize: 1 } })).toMatchObject({
      ok: true,
      value: { backend: { poolSize: 1 } },
    });
    expect(problems({ project: 'p', backend: { type: 'postgres', poolSize: 0 } })).toEqual([
      expect.stringMatching(/^backend\.poolSize: 0 /),
    ]);
    expect(problems({ project: 'p', backend: { type: 'postgres', poolSize: 2.5 } })).toEqual([
      expect.stringMatching(/^backend\.poolSize: 2\.5 /),
    ]);
    expect(problems({ backend: { type: 'file', poolSize: 4 } })).toEqual([
      'backend.poolSize: 4 applies to the postgres backend only (backend.type is "file")',
    ]);
  });

  it('names the path, the value and the range of a bad cron field (SPEC §2 example)', () => {
    const input = {
      routines: [routine({ id: 'a' }), routine({ id: 'b' }), routine({ id: 'c', schedule: '*/61 * * * *' })],
    };
    expect(problems(input)).toEqual([
      'routines[2].schedule: "*/61 * * * *" is not a valid cron expression (minute 61 out of range 0-59)',
    ]);
  });

  it.each([
    ['61 * * * *', 'minute 61 out of range 0-59'],
    ['0 24 * * *', 'hour 24 out of range 0-23'],
    ['0 0 0 * *', 'day-of-month 0 out of range 1-31'],
    ['0 0 1 13 *', 'month 13 out of range 1-12'],
    ['0 0 * * 9', 'day-of-week 9 out of range 0-7'],
    ['60 * * * * *', 'second 60 out of range 0-59'],
    ['* * * *', 'has 4 fields'],
    ['0 0 0 * * * 2030', 'has 7 fields'],
    [
      '@reboot',
      '@reboot is not a time: for work at every scheduler start give the routine its real schedule with "catchUp": "latest"',
    ],
    ['*/0 * * * *', 'minute step 0 must be at least 1'],
  ])('rejects schedule %j: %s', (schedule, why) => {
    expect(problems({ routines: [routine({ schedule })] })[0]).toContain(why);
  });

  it.each([
    '@hourly',
    '@daily',
    '@midnight',
    '@weekly',
    '@monthly',
    '@yearly',
    '@annually',
    '*/10 * * * * *',
    '0 9 * * MON-FRI',
    '0 3 * * *',
    // croner's extensions (docs/routines.md, "Schedules")
    '0 0 L * *',
    '0 0 15W * *',
    '0 0 LW * *',
    '0 0 * * 5L',
    '0 0 * * FRI#2',
    '0 0 ? * MON',
    '0 0 */2 * +1',
  ])('accepts schedule %j', (schedule) => {
    expect(problems({ routines: [routine({ schedule })] })).toEqual([]);
  });

  it.each(['0 0 30 2 *', '0 0 31 4 *', '0 0 0 31 11 *'])('refuses schedule %j, which never fires', (schedule) => {
    expect(problems({ routines: [routine({ schedule })] })).toEqual([
      `routines[0].schedule: ${JSON.stringify(schedule)} is not a valid cron expression (never fires: no date matches it (like 30 February or 31 April))`,
    ]);
  });

  it('accepts the operations fields of SPEC §10 and applies their defaults', () => {
    const r = validateConfig({
      notify: { webhook: 'https://alerts.example/hook' },
      routines: [
        routine({ id: 'plain' }),
        routine({
          id: 'daily',
          schedule: '0 3 * * *',
          ifBusy: 'wait',
          waitTimeoutSeconds: 600,
          retry: { attempts: 2, backoffSeconds: 30 },
          starvedAfterSkips: 5,
          notify: { command: './alert.sh', on: ['failure'] },
        }),
        routine({ id: 'quiet', notify: false }),
      ],
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.notify).toEqual({
      webhook: 'https://alerts.example/hook',
      on: ['failure', 'recovery', 'starved'],
      outputLines: 20,
    });
    const [plain, daily, quiet] = r.value.routines;
    expect(plain).toMatchObject({ ifBusy: 'skip', starvedAfterSkips: 3 });
    expect(plain).not.toHaveProperty('notify');
    expect(daily).toMatchObject({
      ifBusy: 'wait',
      waitTimeoutSeconds: 600,
      retry: { attempts: 2, backoffSeconds: 30 },
      starvedAfterSkips: 5,
      notify: { command: './alert.sh', on: ['failure'], outputLines: 20 },
    });
    expect(quiet).toMatchObject({ notify: false });
  });

  it('names what is wrong with the operations fields', () => {
    expect(
      problems({
        notify: { on: ['failure'] },
        routines: [
          routine({ id: 'a', waitTimeoutSeconds: 5 }),
          routine({ id: 'b' }),
          routine({ id: 'c', notify: { webhook: 'ftp://x', on: [] } }),
        ],
      }),
    ).toEqual(
      expect.arrayContaining([
        'notify: needs "webhook" or "command" (or both); to silence a routine use "notify": false',
        'routines[0].waitTimeoutSeconds: is only allowed with "ifBusy": "wait"',
        'routines[2].notify.webhook: is not an http: or https: URL',
        'routines[2].notify.on: is empty: list at least one event, or use "notify": false',
      ]),
    );
    const shapeProblems = problems({
      routines: [
        routine({ retry: { attempts: 11, backoffSeconds: 1 } }),
        routine({ id: 'd', ifBusy: 'queue' }),
        routine({ id: 'e', starvedAfterSkips: 0 }),
      ],
    });
    expect(shapeProblems.join('\n')).toMatch(/routines\[0\]\.retry\.attempts/);
    expect(shapeProblems.join('\n')).toMatch(/routines\[1\]\.ifBusy/);
    expect(shapeProblems.join('\n')).toMatch(/routines\[2\]\.starvedAfterSkips/);
  });

  it("a number past an integer's safe range and past the field's maximum: one line, the field's maximum", () => {
    expect(problems({ routines: [routine({ starvedAfterSkips: 1e300 })] })).toEqual([
      'routines[0].starvedAfterSkips: 1e+300 is too big (maximum 1000)',
    ]);
  });

  it('a number too large to read (1e400 is Infinity to JSON.parse) is said as such, not as null', () => {
    expect(problems(JSON.parse('{"lock":{"ttlSeconds":1e400}}'))).toEqual([
      'lock.ttlSeconds: is a number too large to read (over 1.8e308)',
    ]);
  });

  it("a routine's notify (false or an object) names what is wrong where, as the top-level notify does (it said: Invalid input)", () => {
    expect(
      problems({
        routines: [
          routine({ id: 'a', notify: { webhook: 5 } }),
          routine({ id: 'b', notify: 5 }),
          routine({ id: 'c', notify: { webhok: 'https://x' } }),
          routine({ id: 'd', notify: { command: 'x', on: ['bogus'] } }),
          routine({ id: 'e', notify: true }),
        ],
      }),
    ).toEqual([
      'routines[0].notify.webhook: 5 is a number; expected string',
      'routines[1].notify: 5 is a number; expected false or an object',
      'routines[2].notify: unknown key "webhok" (did you mean "webhook"? allowed: webhook, command, on, outputLines)',
      'routines[3].notify.on[0]: "bogus" is not one of "failure", "recovery", "starved"',
      'routines[4].notify: true is a boolean; expected false or an object',
    ]);
  });

  it('a value of the wrong type is named with its article: "an array", "an object", "null"', () => {
    expect(problems({ locks: { a: [], b: { slots: '3' } }, routines: [routine({ id: 'x', notify: null })] })).toEqual(
      expect.arrayContaining([
        'locks.a: [] is an array; expected object',
        'locks.b.slots: "3" is a string; expected number',
      ]),
    );
  });

  it('"exclusive": false only for command routines, and then without ifBusy; routine run\'s busy default follows the routine\'s own ifBusy', () => {
    expect(
      problems({
        routines: [
          routine({ id: 'a', action: 'command', run: 'true', exclusive: false, ifBusy: 'wait' }),
          { id: 'b', schedule: '* * * * *', action: 'register', exclusive: false },
        ],
      }),
    ).toEqual([
      'routines[0].ifBusy: is only allowed for a routine that takes a lock ("exclusive": false takes none, so it is never busy)',
      'routines[1].exclusive: false is only allowed with action "command" (action "register" always runs under the exec lock)',
    ]);
    const ok = validateConfig({
      routines: [
        routine({ id: 'a' }),
        routine({ id: 'b', ifBusy: 'wait' }),
        routine({ id: 'c', ifBusy: 'skip' }),
        routine({ id: 'd', action: 'command', run: 'true', exclusive: false }),
      ],
    });
    if (!ok.ok) throw new Error(JSON.stringify(ok.issues));
    expect(ok.value.routines.map((r) => [r.id, r.ifBusy, r.manualIfBusy, r.exclusive])).toEqual([
      ['a', 'skip', 'fail', true],
      ['b', 'wait', 'wait', true],
      ['c', 'skip', 'skip', true],
      ['d', 'skip', 'fail', false],
    ]);
  });

  it('refuses what no config can use: a NUL byte in any string or key, env names that are not names, nesting deeper than a config needs (issue 49)', () => {
    expect(problems({ routines: [routine({ action: 'command', run: 'echo \0hi' })] })).toEqual([
      'routines[0].run: holds a NUL byte (\\u0000): no command, path or environment value can',
    ]);
    expect(problems({ stateDir: 'st\0x' })).toEqual([
      'stateDir: holds a NUL byte (\\u0000): no command, path or environment value can',
    ]);
    expect(problems({ routines: [routine({ action: 'command', run: 'true', env: { 'A\0B': 'x' } })] })).toEqual([
      'routines[0].env["A\\u0000B"]: is a key with a NUL byte (\\u0000): no name can hold one',
    ]);
    expect(
      problems({
        routines: [routine({ action: 'command', run: 'true', env: { 'B=C': 'x', _OK: 'y', '1D': 'z', ok2: 'w' } })],
      }),
    ).toEqual([
      'routines[0].env["B=C"]: "B=C" is not an environment variable name (letters, digits and "_", not starting with a digit)',
      'routines[0].env["1D"]: "1D" is not an environment variable name (letters, digits and "_", not starting with a digit)',
    ]);
    expect(problems({ exec: { tasks: [task({ env: { 'X Y': '1' } })] } })).toEqual([
      'exec.tasks[0].env["X Y"]: "X Y" is not an environment variable name (letters, digits and "_", not starting with a digit)',
    ]);
    // 100 000 levels: an answer, not a stack overflow
    let deep: unknown = [];
    for (let i = 0; i < 100_000; i++) deep = [deep];
    const found = problems({ routines: deep });
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(/^routines(\[0\]){31}: is nested deeper than 32 levels, more than any config needs$/);
    // a task file says the same, with its name
    const file = validateTaskFile({ id: 'x', run: 'a\0b' }, 'tasks/x.json');
    expect(file).toEqual({
      ok: false,
      issues: [
        {
          file: 'tasks/x.json',
          path: 'run',
          message: 'holds a NUL byte (\\u0000): no command, path or environment value can',
        },
      ],
    });
  });

  it('rejects unknown keys and lists the allowed ones', () => {
    expect(problems({ routines: [routine({ scheduel: 'x' })] })).toEqual([
      'routines[0]: unknown key "scheduel" (did you mean "schedule"? allowed: id, schedule, action, run, timezone, enabled, timeoutSeconds, jitterSeconds, catchUp, env, cwd, ifBusy, exclusive, lock, waitTimeoutSeconds, retry, starvedAfterSkips, notify)',
    ]);
    expect(problems({ lokc: {} })[0]).toMatch(
      /^: unknown key "lokc" \(did you mean "lock"\? allowed: \$schema, project, stateDir, backend, lock, exec, routines, locks, passEnv, http, notify, retention\)$/,
    );
  });

  it('named locks (SPEC §4.16): declared with 1..64 slots, lowercase names, never "exec"; a routine\'s lock only for a command routine that takes a lock', () => {
    const ok = validateConfig({
      locks: { agents: { slots: 3 }, db: {} },
      routines: [
        routine({ id: 'a', action: 'command', run: 'true', lock: 'agents' }),
        routine({ id: 'b', action: 'command', run: 'true', lock: 'cache' }),
        routine({ id: 'c' }),
      ],
    });
    if (!ok.ok) throw new Error(JSON.stringify(ok.issues));
    expect(ok.value.locks).toEqual({ agents: { slots: 3 }, db: { slots: 1 } });
    expect(ok.value.routines.map((r) => [r.id, r.lock])).toEqual([
      ['a', 'agents'],
      ['b', 'cache'],
      ['c', 'exec'],
    ]);
    expect(problems({ locks: { exec: { slots: 2 } } })).toEqual([
      'locks.exec: "exec" is the project exec lock: it is not declared, and has one slot',
    ]);
    expect(problems({ locks: { agents: { slots: 65 } } }).join('\n')).toMatch(/^locks\.agents\.slots: /);
    expect(problems({ locks: { agents: { slots: 0 } } }).join('\n')).toMatch(/^locks\.agents\.slots: /);
    expect(problems({ passEnv: ['OK_1', 'lower case', 'A=B'] })).toEqual([
      'passEnv[1]: "lower case" is not an environment variable name (letters, digits and "_", not starting with a digit)',
      'passEnv[2]: "A=B" is not an environment variable name (letters, digits and "_", not starting with a digit)',
    ]);
    expect(problems({ locks: { Agents: {} } })).toEqual([
      'locks.Agents: "Agents" is not a lock name (lowercase letters, digits, "_" and "-"; starts with a letter or digit; at most 63 characters; "exec" is the project exec lock)',
    ]);
    expect(problems({ locks: { agents: { slot: 2 } } })).toEqual([
      expect.stringMatching(/^locks\.agents: unknown key "slot" \(did you mean "slots"\?/),
    ]);
    expect(
      problems({
        routines: [
          routine({ id: 'a', action: 'register', lock: 'db' }),
          routine({ id: 'b', action: 'command', run: 'true', exclusive: false, lock: 'db' }),
        ],
      }),
    ).toEqual([
      'routines[0].lock: is only allowed with action "command" (action "register" always runs under the exec lock)',
      'routines[1].lock: is only allowed for a routine that takes a lock ("exclusive": false takes none)',
    ]);
    expect(problems({ routines: [routine({ id: 'c', action: 'command', run: 'true', lock: 'Db' })] })).toEqual([
      'routines[0].lock: "Db" is not a lock name (lowercase letters, digits, "_" and "-"; starts with a letter or digit; at most 63 characters; "exec" is the project exec lock)',
    ]);
    // a command of blanks only runs nothing
    expect(
      problems({
        routines: [routine({ id: 'e', action: 'command', run: '  ' })],
        exec: { tasks: [{ id: 't', run: ' \t' }] },
      }),
    ).toEqual([
      'exec.tasks[0].run: is blank: give the shell command to run',
      'routines[0].run: is blank: give the shell command to run',
    ]);
    // the keys of the project's own locks are not names of named locks (`lock status` shows them
    // under those words: a named lock so called reads as the same lock and is another)
    expect(
      problems({
        locks: { scheduler: {}, none: { slots: 2 } },
        routines: [
          routine({ id: 'd', action: 'command', run: 'true', lock: 'exec-run' }),
          routine({ id: 'e', action: 'command', run: 'true', lock: 'none' }),
        ],
      }),
    ).toEqual([
      'routines[0].lock: "exec-run" is the key of the project exec lock: call it "exec" (or name no lock)',
      'routines[1].lock: "none" means no lock (`"exclusive": false`) in the views: choose another name',
      'locks.scheduler: "scheduler" is the scheduler\'s own lock: choose another name',
      'locks.none: "none" means no lock (`"exclusive": false`) in the views: choose another name',
    ]);
  });

  it('http.listen: [HOST:]PORT, checked with its path (SPEC §11)', () => {
    expect(validateConfig({ http: { listen: '127.0.0.1:9464' } })).toMatchObject({
      ok: true,
      value: { http: { listen: '127.0.0.1:9464' } },
    });
    expect(validateConfig({})).toMatchObject({ ok: true, value: { http: null } });
    expect(problems({ http: { listen: '127.0.0.1:99999' } })).toEqual([
      'http.listen: "127.0.0.1:99999" is not [HOST:]PORT: "99999" is not a port (0-65535)',
    ]);
    expect(problems({ http: { listen: '::1:9464' } })).toEqual([
      'http.listen: "::1:9464" is not [HOST:]PORT: an IPv6 address goes in brackets, e.g. [::1]:9464',
    ]);
    expect(problems({ http: { listen: '9464', port: 1 } })).toEqual([
      'http: unknown key "port" (allowed: listen, actions)',
    ]);
  });

  it('http.actions: a boolean, off by default; it needs no http.listen (--http may give the address)', () => {
    expect(validateConfig({ http: { listen: '9464' } })).toMatchObject({
      ok: true,
      value: { http: { listen: '9464', actions: false } },
    });
    expect(validateConfig({ http: { actions: true } })).toMatchObject({
      ok: true,
      value: { http: { listen: null, actions: true } },
    });
    expect(problems({ http: { actions: 'yes' } })).toEqual([expect.stringMatching(/^http\.actions: /)]);
  });

  it('checks routine rules: ids, action, run, time zone, duplicates', () => {
    expect(
      problems({
        routines: [
          routine({ id: 'x', action: 'command' }),
          routine({ id: 'y', run: 'echo' }),
          routine({ id: 'x', timezone: 'Mars/Olympus' }),
        ],
      }),
    ).toEqual([
      'routines[0].run: is required when action is "command"',
      'routines[1].run: is only allowed with action "command" (action is "exec-auto")',
      'routines[2].id: "x" is a duplicate (also routines[0])',
      'routines[2].timezone: "Mars/Olympus" is not a known IANA time zone (e.g. "Europe/Berlin", "UTC")',
    ]);
    expect(problems({ routines: [routine({ action: 'deploy' })] })).toEqual([
      'routines[0].action: "deploy" is not one of "exec-auto", "exec-resume", "register", "command"',
    ]);
    expect(problems({ routines: [routine({ id: 'has space' })] })[0]).toMatch(
      /^routines\[0\]\.id: "has space" is not a valid id/,
    );
    expect(problems({ routines: [routine({ enabled: 'yes' })] })).toEqual([
      'routines[0].enabled: "yes" is a string; expected boolean',
    ]);
    expect(problems({ routines: [{ id: 'a', action: 'register' }] })).toEqual([
      'routines[0].schedule: is required (string)',
    ]);
  });

  it('refuses timeouts past what a timer can hold', () => {
    expect(problems({ exec: { tasks: [task({ timeoutSeconds: 2_592_000 })] } })).toEqual([
      'exec.tasks[0].timeoutSeconds: 2592000 is too big (maximum 2000000)',
    ]);
    expect(problems({ routines: [routine({ jitterSeconds: 100_000 })] })).toEqual([
      'routines[0].jitterSeconds: 100000 is too big (maximum 86400)',
    ]);
  });

  it('checks the lock section', () => {
    expect(problems({ lock: { ttlSeconds: 0 } })).toEqual(['lock.ttlSeconds: 0 is too small (minimum 1)']);
    expect(problems({ lock: { ttlSeconds: 86401 } })).toEqual(['lock.ttlSeconds: 86401 is too big (maximum 86400)']);
    expect(problems({ lock: { ttlSeconds: 60, refreshSeconds: 30 } })).toEqual([
      'lock.refreshSeconds: 30 must be below ttlSeconds/2 (30)',
    ]);
  });

  it('checks tasks: duplicates, providers, dependencies, cycles, cwd', () => {
    expect(problems({ exec: { tasks: [task(), task()] } })).toEqual([
      'exec.tasks[1].id: "build" is a duplicate (also exec.tasks[0])',
    ]);
    expect(problems({ exec: { tasks: [task({ provider: 'gpu' })] } })).toEqual([
      'exec.tasks[0].provider: "gpu" is not a provider in exec.providers (known: default)',
    ]);
    // a name every object has is no provider unless exec.providers defines it
    expect(problems({ exec: { tasks: [task({ provider: 'toString' })] } })).toEqual([
      'exec.tasks[0].provider: "toString" is not a provider in exec.providers (known: default)',
    ]);
    expect(problems({ exec: { tasks: [task({ dependsOn: ['nope'] })] } })).toEqual([
      'exec.tasks[0].dependsOn[0]: "nope" is not a task id',
    ]);
    expect(
      problems({
        exec: {
          tasks: [
            task({ id: 'a', dependsOn: ['c'] }),
            task({ id: 'b', dependsOn: ['a'] }),
            task({ id: 'c', dependsOn: ['b'] }),
          ],
        },
      }),
    ).toEqual(['exec.tasks[0].dependsOn: dependency cycle: a -> c -> b -> a']);
    expect(problems({ exec: { tasks: [task({ cwd: '../outside' }), task({ id: 'abs', cwd: '/etc' })] } })).toEqual([
      'exec.tasks[0].cwd: "../outside" leaves the project root',
      'exec.tasks[1].cwd: "/etc" must be relative to the project root',
    ]);
    expect(problems({ exec: { providers: { agent: { maxConcurrency: 0 } } } })).toEqual([
      'exec.providers.agent.maxConcurrency: 0 is too small (minimum 1)',
    ]);
  });

  it('validates task files and names the file in every issue', () => {
    const r = validateTaskFile([task({ id: 'ok' }), { id: 'bad', run: 'x', depends: [] }], 'tasks/a.json');
    expect(r).toEqual({
      ok: false,
      issues: [
        {
          file: 'tasks/a.json',
          path: '[1]',
          message:
            'unknown key "depends" (did you mean "dependsOn"? allowed: id, run, provider, dependsOn, timeoutSeconds, env, cwd)',
        },
      ],
    });
    const set = validateTaskSet(
      [
        { task: task({ id: 'a' }), path: ['exec', 'tasks', 0] },
        { task: task({ id: 'a' }), path: [], file: 'tasks/b.json' },
      ],
      {},
    );
    expect(set).toEqual([{ file: 'tasks/b.json', path: 'id', message: '"a" is a duplicate (also exec.tasks[0])' }]);
    // the first of two in files of one task each: named by its file alone (it ended ": )")
    expect(
      validateTaskSet(
        [
          { task: task({ id: 'a' }), path: [], file: 'tasks/a.json' },
          { task: task({ id: 'a' }), path: [], file: 'tasks/b.json' },
        ],
        {},
      ),
    ).toEqual([{ file: 'tasks/b.json', path: 'id', message: '"a" is a duplicate (also tasks/a.json)' }]);
  });
});

describe('shipped JSON Schema', () => {
  it('is up to date with the zod schema (run `npm run gen:schema` when this fails)', () => {
    const root = join(import.meta.dirname, '../../config');
    expect(JSON.parse(readFileSync(join(root, 'routinely.schema.json'), 'utf8'))).toEqual(configJsonSchema());
    expect(JSON.parse(readFileSync(join(root, 'task.schema.json'), 'utf8'))).toEqual(taskFileJsonSchema());
  });

  it('rejects unknown keys in editors too', () => {
    expect(configJsonSchema()).toMatchObject({ additionalProperties: false });
  });
});

describe('unknown keys', () => {
  it('suggest the allowed key a misspelt one most likely meant', () => {
    const problems = (raw: unknown): string[] => {
      const v = validateConfig(raw);
      return v.ok ? [] : v.issues.map((i) => `${i.path}: ${i.message}`);
    };
    expect(
      problems({ routines: [{ id: 'a', shedule: '@daily', action: 'command', run: 'true' }] }).find((p) =>
        p.includes('unknown'),
      ),
    ).toMatch(/^routines\[0\]: unknown key "shedule" \(did you mean "schedule"\? allowed: id, schedule,/);
    expect(
      problems({ routines: [{ id: 'a', schedule: '@daily', action: 'command', run: 'true', timeZone: 'UTC' }] })[0],
    ).toMatch(/unknown key "timeZone" \(did you mean "timezone"\?/);
    expect(problems({ retention: { histroyLines: 5 } })[0]).toMatch(
      /unknown key "histroyLines" \(did you mean "historyLines"\?/,
    );
    // nothing close: no guess
    expect(
      problems({ routines: [{ id: 'a', schedule: '@daily', action: 'command', run: 'true', colour: 'red' }] })[0],
    ).toMatch(/unknown key "colour" \(allowed: /);
  });
});
