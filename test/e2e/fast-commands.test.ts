// `validate`, `lock run` and `lock status` from the validated config's cache (cached-config.ts):
// after one full run they start without the config validator or the command-line parser, and
// print and exit exactly as the full path does; a changed config is validated again.

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, startCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

const FROM_CACHE = /^routinely: debug: (validate|lock run|lock status) from the cache of a config that validated\n/;
const routines = [
  { id: 'new-year', schedule: '0 0 1 1 *', action: 'command', run: 'true' },
  { id: 'berlin', schedule: '30 6 * * 1', timezone: 'Europe/Berlin', action: 'command', run: 'true' },
  { id: 'off', schedule: '0 0 1 1 *', action: 'register', enabled: false },
  { id: 'often', schedule: '*/10 * * * * *', action: 'command', run: 'true' },
];
const fast = (project: string, args: string[]) => runCli(args, { cwd: project, env: { ROUTINELY_DEBUG: '1' } });
const full = (project: string, args: string[]) => runCli(args, { cwd: project, env: { ROUTINELY_LIST_CACHE: '0' } });

describe('short commands from the validated config', () => {
  it('the cache is found where the state folder is: the default, one the config names, one the environment names', async () => {
    const cases: { config: object; env: Record<string, string>; folder: string }[] = [
      { config: { routines }, env: {}, folder: '.routinely' },
      { config: { routines, stateDir: 'state' }, env: {}, folder: 'state' },
      { config: { routines, stateDir: 'state' }, env: { ROUTINELY_STATE_DIR: 'elsewhere' }, folder: 'elsewhere' },
    ];
    for (const c of cases) {
      const project = testProject(c.config);
      const env = { ROUTINELY_DEBUG: '1', ...c.env };
      await runCli(['validate'], { cwd: project, env }); // validates, leaves the cache
      expect(readFileSync(join(project, c.folder, 'config-cache.json'), 'utf8')).toContain(join(project, c.folder));
      const again = await runCli(['lock', 'status'], { cwd: project, env });
      expect(again.stderr, JSON.stringify(c)).toMatch(FROM_CACHE);
      const reference = await runCli(['lock', 'status'], {
        cwd: project,
        env: { ...c.env, ROUTINELY_LIST_CACHE: '0' },
      });
      expect(again.stdout).toBe(reference.stdout);
      expect(again.code).toBe(reference.code);
    }
  });

  it('validate: the same bytes as the full path once the config validated; a changed config is validated again', async () => {
    const project = testProject({ exec: { tasks: [{ id: 't', run: 'true' }] }, routines });
    const first = await fast(project, ['validate']);
    expect(first.stderr).not.toMatch(FROM_CACHE); // nothing cached yet: validated
    // a per-10-seconds routine: its next times move when a 10 s boundary passes between the two
    // commands (a loaded machine), so the pair is taken again then, at most twice more
    let again = await fast(project, ['validate']);
    let reference = await full(project, ['validate']);
    for (let i = 0; i < 2 && again.stdout !== reference.stdout; i++) {
      again = await fast(project, ['validate']);
      reference = await full(project, ['validate']);
    }
    expect(again.stderr).toMatch(FROM_CACHE);
    expect(again.stdout).toBe(reference.stdout);
    expect(again.code).toBe(0);
    // what it says: valid, then each routine (the disabled one too) with its next times below it
    // (a routine without a timezone is in the machine's zone)
    const lines = again.stdout.split('\n');
    expect(lines[0]).toBe('routinely.json: valid (4 routines, 1 inline task)');
    expect(lines.slice(1).filter((l) => /^\S/.test(l))).toEqual([
      expect.stringMatching(/^new-year {2}0 0 1 1 \* {2}\(\S+; command\)$/),
      'berlin  30 6 * * 1  (Europe/Berlin; command)',
      expect.stringMatching(/^off {2}0 0 1 1 \* {2}\(\S+; register, disabled\)$/),
      expect.stringMatching(/^often {2}\*\/10 \* \* \* \* \* {2}\(\S+; command\)$/),
    ]);
    // --json is the same command: from the cache (through the command-line parser), the same
    // document as validating
    let json = await fast(project, ['validate', '--json']);
    let jsonReference = await full(project, ['validate', '--json']);
    for (let i = 0; i < 2 && json.stdout !== jsonReference.stdout; i++) {
      json = await fast(project, ['validate', '--json']);
      jsonReference = await full(project, ['validate', '--json']);
    }
    expect(json.stderr).toMatch(FROM_CACHE);
    expect(json.stdout).toBe(jsonReference.stdout);
    expect(JSON.parse(json.stdout)).toMatchObject({ valid: true, tasks: 1, errors: [], warnings: [] });
    // edited into an invalid config: the full path refuses it
    const config = join(project, 'routinely.json');
    writeFileSync(config, readFileSync(config, 'utf8').replace('*/10 * * * * *', '*/61 * * * *'));
    const bad = await fast(project, ['validate']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).not.toMatch(FROM_CACHE);
    expect(bad.stderr).toMatch(/routines\[3\]\.schedule: "\*\/61 \* \* \* \*" is not a valid cron expression/);
    const badJson = await fast(project, ['validate', '--json']);
    expect(badJson.code).toBe(2);
    expect(JSON.parse(badJson.stdout)).toMatchObject({ valid: false, errors: [{ path: 'routines[3].schedule' }] });
  });

  it('lock status and lock run: the same output and exit codes as the full path, busy or not', async () => {
    const project = testProject({ routines });
    expect((await full(project, ['validate'])).code).toBe(0);
    await fast(project, ['lock', 'status']); // leaves the cache
    for (const args of [
      ['lock', 'status'],
      ['lock', 'status', '--json'],
      ['lock', 'status', '--key', 'scheduler'],
    ]) {
      const f = await fast(project, args);
      expect(f.stderr, args.join(' ')).toMatch(FROM_CACHE);
      const s = await full(project, args);
      expect(f.stdout, args.join(' ')).toBe(s.stdout);
    }
    const ran = await fast(project, ['lock', 'run', '--', 'sh', '-c', 'echo "gen $ROUTINELY_LOCK_GENERATION"; exit 7']);
    expect(ran.stderr).toMatch(FROM_CACHE);
    expect(ran.code).toBe(7);
    expect(ran.stdout).toMatch(/^gen \d+\n$/);
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; sleep 30'], { cwd: project });
    await holder.waitFor(/holding/);
    for (const [args, code, out] of [
      [['lock', 'run', '--', 'true'], 75, ''],
      [['lock', 'run', '--if-busy', 'skip', '--', 'true'], 0, 'skipped: exec busy\n'],
      [['lock', 'run', '--if-busy', 'wait', '--wait-timeout', '0.3', '--', 'true'], 75, ''],
    ] as const) {
      const f = await fast(project, [...args]);
      const s = await full(project, [...args]);
      expect([f.code, f.stdout], args.join(' ')).toEqual([code, out]);
      expect([s.code, s.stdout], args.join(' ')).toEqual([code, out]);
      expect(f.stderr.replace(FROM_CACHE, '').replace(/heartbeat \d+s ago/g, 'heartbeat Ns ago'), args.join(' ')).toBe(
        s.stderr.replace(/heartbeat \d+s ago/g, 'heartbeat Ns ago'),
      );
    }
    const status = JSON.parse((await fast(project, ['lock', 'status', '--json'])).stdout) as {
      state: string;
      record: { owner: { pid: number } };
    };
    expect(status).toMatchObject({ state: 'held', record: { owner: { pid: holder.pid } } });
    holder.child.kill('SIGTERM');
    await holder.exited;
    // --wait-timeout without --if-busy wait is the full path's to refuse
    const refused = await fast(project, ['lock', 'run', '--wait-timeout', '5', '--', 'true']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).not.toMatch(FROM_CACHE);
  });
});
