import { execFileSync, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { stripJsonComments } from '../../src/config/load.js';
import { CLI, childEnv, cliWithFault, runCli, startCli } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';

const haveStrace = spawnSync('strace', ['-V']).status === 0;

const schemaOf = (dir: string): string =>
  (JSON.parse(stripJsonComments(readFileSync(join(dir, 'routinely.json'), 'utf8'))) as { $schema: string }).$schema;

/** A stand-in for `npm install routinely` in `dir`: the package's schema where Node would find it. */
function installedIn(dir: string): void {
  mkdirSync(join(dir, 'node_modules', 'routinely', 'config'), { recursive: true });
  writeFileSync(
    join(dir, 'node_modules', 'routinely', 'config', 'routinely.schema.json'),
    readFileSync(resolve(import.meta.dirname, '../../config/routinely.schema.json')),
  );
}

describe('init', () => {
  it('writes a commented starter with $schema that validates, and never overwrites without --force', async () => {
    const dir = testdir();
    const r = await runCli(['init'], { cwd: dir });
    expect(r.code).toBe(0);
    const text = readFileSync(join(dir, 'routinely.json'), 'utf8');
    expect(text).toMatch(/^\{\n {2}\/\/ /);
    // routinely is not installed in this folder: the schema of the routinely that ran init
    const schema = schemaOf(dir);
    expect(schema).toBe(`file://${resolve(import.meta.dirname, '../../config/routinely.schema.json')}`);
    expect(existsSync(fileURLToPath(schema))).toBe(true);
    expect(text).toContain('(npm install -D routinely), use "./node_modules/routinely/config/routinely.schema.json"');
    const v = await runCli(['validate'], { cwd: dir });
    expect(v.code).toBe(0);
    expect(v.stdout).toMatch(/^routinely\.json: valid \(3 routines, 2 inline tasks\)/);
    const again = await runCli(['init'], { cwd: dir });
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/routinely\.json already exists; pass --force/);
    writeFileSync(join(dir, 'routinely.json'), '{}');
    expect((await runCli(['init', '--force'], { cwd: dir })).code).toBe(0);
    expect(readFileSync(join(dir, 'routinely.json'), 'utf8')).toBe(text);
  });

  it('$schema is relative to the file when routinely is installed in the project or a parent folder', async () => {
    const dir = testdir();
    installedIn(dir);
    expect((await runCli(['init'], { cwd: dir })).code).toBe(0);
    expect(schemaOf(dir)).toBe('./node_modules/routinely/config/routinely.schema.json');
    const mono = testdir();
    installedIn(mono);
    mkdirSync(join(mono, 'packages', 'api'), { recursive: true });
    expect((await runCli(['init'], { cwd: join(mono, 'packages', 'api') })).code).toBe(0);
    expect(schemaOf(join(mono, 'packages', 'api'))).toBe('../../node_modules/routinely/config/routinely.schema.json');
    expect((await runCli(['validate'], { cwd: join(mono, 'packages', 'api') })).code).toBe(0);
  });

  it('refuses inside an existing project, naming its routinely.json; --force makes a nested project', async () => {
    const outer = testdir();
    expect((await runCli(['init'], { cwd: outer })).code).toBe(0);
    const sub = join(outer, 'services', 'api');
    mkdirSync(sub, { recursive: true });
    const r = await runCli(['init'], { cwd: sub });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      `routinely: ${sub} is already inside the project of ${join(outer, 'routinely.json')} (routinely commands run here use it); to start a separate project nested in it, pass --force\n`,
    );
    expect(existsSync(join(sub, 'routinely.json'))).toBe(false);
    const forced = await runCli(['init', '--force'], { cwd: sub });
    expect(forced.code).toBe(0);
    expect(forced.stdout).toContain(
      `note: a nested project; commands run in ${outer} outside this folder still use ${join(outer, 'routinely.json')}`,
    );
    expect((await runCli(['validate'], { cwd: sub })).stdout).toMatch(/^routinely\.json: valid/);
  });

  it('--config names the file to write; init --help says what --force does and where $schema points', async () => {
    const dir = testdir();
    const r = await runCli(['init', '--config', 'ci/routinely.json'], { cwd: dir });
    expect(r.code).toBe(2); // no such folder
    mkdirSync(join(dir, 'ci'));
    expect((await runCli(['init', '--config', 'ci/routinely.json'], { cwd: dir })).code).toBe(0);
    expect((await runCli(['validate', '--config', 'ci/routinely.json'], { cwd: dir })).code).toBe(0);
    const help = await runCli(['init', '--help']);
    expect(help.stdout).toMatch(
      /--force\s+write it even if a routinely\.json exists here\s+\(overwritten\)\s+or\s+in\s+a\s+parent\s+folder\s+\(a\s+nested\s+project\)/,
    );
    expect(help.stdout).toContain('file:// URL');
  });

  it('config comments keep error positions; a "//" inside a string is not a comment', async () => {
    const dir = testdir();
    writeFileSync(
      join(dir, 'routinely.json'),
      '{\n  // note\n  "routines": [ /* one */ { "id": "a", "schedule": "@daily", "action": "command", "run": "echo http://x" } ]\n}\n',
    );
    const ok = await runCli(['validate'], { cwd: dir });
    expect(ok.code).toBe(0);
    writeFileSync(join(dir, 'routinely.json'), '{\n  // note\n  "lock": { "ttlSeconds": 5, }\n}\n');
    const bad = await runCli(['validate'], { cwd: dir });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe(
      'routinely: routinely.json: line 3, column 28: invalid JSON: trailing comma before "}" (JSON allows none)\n',
    );
  });

  it('never writes through a symlink at ./routinely.json, even a dangling one', async () => {
    const dir = testdir();
    const target = join(testdir(), 'elsewhere.json');
    symlinkSync(target, join(dir, 'routinely.json'));
    for (const args of [['init'], ['init', '--force']]) {
      const r = await runCli(args, { cwd: dir });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/routinely\.json is a symbolic link; refusing to write through it/);
      expect(existsSync(target)).toBe(false);
    }
  });

  it('init --force over a FIFO or a folder at ./routinely.json refuses it (exit 2), never hangs writing to it', async () => {
    for (const make of ['fifo', 'folder'] as const) {
      const dir = testdir();
      const path = join(dir, 'routinely.json');
      if (make === 'fifo') execFileSync('mkfifo', [path]);
      else mkdirSync(path);
      const r = await runCli(['init', '--force'], { cwd: dir });
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/routinely\.json is not a regular file; refusing to write over it \(remove it first\)/);
    }
  });
  it('a write cut short (a file size limit) leaves the config that was there, or none, never a cut-off one (exit 74 naming it)', async () => {
    // `ulimit -f 1`: 512 bytes, less than the starter; writes past it fail with EFBIG
    const limited = (cwd: string, args: string[]): SpawnSyncReturns<string> =>
      spawnSync('sh', ['-c', 'ulimit -f 1; exec "$0" "$@"', process.execPath, CLI, ...args], {
        cwd,
        env: childEnv(),
        encoding: 'utf8',
      });
    const dir = testdir();
    const path = join(dir, 'routinely.json');
    const mine = `{\n  // my routines\n  "routines": []${' '.repeat(2000)}\n}\n`;
    writeFileSync(path, mine);
    const forced = limited(dir, ['init', '--force']);
    expect(forced.status, forced.stderr).toBe(74);
    expect(forced.stderr).toBe(`routinely: file too large writing ${path}\n`);
    expect(readFileSync(path, 'utf8')).toBe(mine);
    const fresh = testdir();
    const first = limited(fresh, ['init']);
    expect(first.status, first.stderr).toBe(74);
    expect(readdirSync(fresh)).toEqual([]);
    // and init then works (no stub left that it would refuse to overwrite)
    expect((await runCli(['init'], { cwd: fresh })).code).toBe(0);
  });
  // (strace stands for a file system without hard links; CI has it: the case runs there)
  it.skipIf(!haveStrace && process.env.CI !== 'true')(
    'on a file system without hard links (link fails EPERM, as on vfat) init still writes its files',
    () => {
      expect(haveStrace, 'strace is required (CI installs it)').toBe(true);
      const dir = testdir();
      const r = cliWithFault({ cwd: dir, trace: 'link,linkat', inject: 'link,linkat:error=EPERM' }, ['init']);
      expect(r.status, r.stderr).toBe(0);
      expect(readdirSync(dir).sort()).toEqual(['.gitignore', 'routinely.json']);
      expect(readFileSync(join(dir, 'routinely.json'), 'utf8')).toContain('"routines"');
    },
  );
});

describe('init and the habits a new user brings', () => {
  it('adds .routinely/ to .gitignore (creating it, or appending once) and names a next command that works here', async () => {
    const dir = testdir();
    // routinely is not on this PATH: only npx finds it
    const r = await runCli(['init'], { cwd: dir, env: { PATH: '/usr/bin:/bin' } });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('wrote .gitignore (.routinely/: the state folder is not committed)');
    expect(r.stdout).toContain('next: npx routinely validate, then npx routinely scheduler start');
    expect(readFileSync(join(dir, '.gitignore'), 'utf8')).toMatch(/^# routinely's state.*\n\.routinely\/\n$/);
    // on PATH: the bare name
    const bin = testdir();
    symlinkSync(resolve(import.meta.dirname, '../../dist/cli.cjs'), join(bin, 'routinely'));
    const other = testdir();
    writeFileSync(join(other, '.gitignore'), 'node_modules');
    const again = await runCli(['init'], { cwd: other, env: { PATH: `${bin}:/usr/bin:/bin` } });
    expect(again.stdout).toContain('added .routinely/ to .gitignore');
    expect(again.stdout).toContain('next: routinely validate, then routinely scheduler start');
    // on PATH only because npx put node_modules/.bin there: after npx, only npx finds it
    const viaNpx = testdir();
    const underNpx = await runCli(['init'], {
      cwd: viaNpx,
      env: { PATH: `${bin}:/usr/bin:/bin`, npm_command: 'exec', npm_lifecycle_event: 'npx' },
    });
    expect(underNpx.stdout).toContain('next: npx routinely validate, then npx routinely scheduler start');
    expect(readFileSync(join(viaNpx, '.gitignore'), 'utf8')).toBe(
      "# routinely's state: locks, history, logs (this machine's, never committed)\n.routinely/\n",
    );
    expect(readFileSync(join(other, '.gitignore'), 'utf8')).toBe('node_modules\n.routinely/\n');
    // already there (in any of git's spellings): left as it is
    const third = testdir();
    writeFileSync(join(third, '.gitignore'), '/.routinely\n');
    const quiet = await runCli(['init'], { cwd: third });
    expect(quiet.stdout).not.toContain('.gitignore');
    expect(readFileSync(join(third, '.gitignore'), 'utf8')).toBe('/.routinely\n');
    // a symbolic link is never written through
    const fourth = testdir();
    symlinkSync('/etc/hostname', join(fourth, '.gitignore'));
    const linked = await runCli(['init'], { cwd: fourth });
    expect(linked.code).toBe(0);
    expect(linked.stdout).toContain('note: .gitignore is not a regular file; add .routinely/ to it yourself');
  });
});

describe('validate and cron habits', () => {
  it('warns (exit 0) on a 6-field schedule that reads like a crontab line with a field too many, from the cache too', async () => {
    const dir = testdir();
    writeFileSync(
      join(dir, 'routinely.json'),
      JSON.stringify({
        routines: [
          { id: 'nightly', schedule: '0 3 * * * *', action: 'command', run: 'true' },
          { id: 'ok', schedule: '0 0 3 * * *', action: 'command', run: 'true' },
          // a jitter as long as the time between two fires: every other tick would be skipped
          { id: 'spread', schedule: '*/5 * * * *', action: 'command', run: 'true', jitterSeconds: 300 },
          { id: 'short', schedule: '*/5 * * * *', action: 'command', run: 'true', jitterSeconds: 299 },
        ],
      }),
    );
    const warning =
      'routinely: warning: routine nightly: "0 3 * * * *" has 6 fields, so it is seconds first: second 0 of minute 3, every hour. If "0 3 * * *" (5 fields: daily at 03:00) was meant, drop the last field\n' +
      'routinely: warning: routine spread: jitterSeconds 300 is not shorter than the 5 min between its fires: a tick that comes while a fire still waits out its jitter is skipped ("previous run still running"); keep the jitter under that time\n';
    const full = await runCli(['validate'], { cwd: dir });
    expect(full).toMatchObject({ code: 0, stderr: warning });
    const cached = await runCli(['validate'], { cwd: dir, env: { ROUTINELY_DEBUG: '1' } });
    expect(cached.stderr).toContain('validate from the cache');
    expect(cached.stderr).toContain(warning);
    expect(cached.stdout).toBe(full.stdout);
  });

  it('scheduler start gives the same 6-field and jitter warnings in its log', async () => {
    const dir = testdir();
    writeFileSync(
      join(dir, 'routinely.json'),
      JSON.stringify({
        routines: [
          { id: 'nightly', schedule: '0 3 * * * *', action: 'command', run: 'true' },
          { id: 'spread', schedule: '0 * * * *', action: 'command', run: 'true', jitterSeconds: 7200 },
          // as validate: a disabled routine has no next fires, so no warning
          { id: 'off', schedule: '0 * * * *', action: 'command', run: 'true', jitterSeconds: 7200, enabled: false },
        ],
      }),
    );
    const s = startCli(['scheduler', 'start'], { cwd: dir, timeoutMs: 30_000 });
    await s.waitFor(/\[scheduler\] started/);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    expect(s.stdout()).toContain(
      '[scheduler] warning: routine nightly: "0 3 * * * *" has 6 fields, so it is seconds first: second 0 of minute 3, every hour. If "0 3 * * *" (5 fields: daily at 03:00) was meant, drop the last field',
    );
    expect(s.stdout()).toContain(
      '[scheduler] warning: routine spread: jitterSeconds 7200 is not shorter than the 1 h between its fires',
    );
    expect(s.stdout()).not.toContain('routine off:');
  });

  it('names the field and the word croner would only call illegal, and guesses a misspelt key', async () => {
    const dir = testdir();
    writeFileSync(
      join(dir, 'routinely.json'),
      JSON.stringify({ routines: [{ id: 'weekdays', schedule: '0 9 * * mon-fry', action: 'command', run: 'true' }] }),
    );
    const r = await runCli(['validate'], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      'routines[0].schedule: "0 9 * * mon-fry" is not a valid cron expression (day-of-week "mon-fry": "fry" is not a day name (sun…sat, or 0-7))',
    );
    writeFileSync(
      join(dir, 'routinely.json'),
      JSON.stringify({ routines: [{ id: 'b', shedule: '@daily', action: 'command', run: 'true' }] }),
    );
    const key = await runCli(['validate'], { cwd: dir });
    expect(key.code).toBe(2);
    expect(key.stderr).toMatch(/routines\[0\]: unknown key "shedule" \(did you mean "schedule"\? allowed:/);
  });
});
