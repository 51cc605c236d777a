// `routinely import-crontab` end to end: a crontab on stdin or in a file becomes a routinely.json
// that validates, and its routines run as cron would have run them (env, \%, a flock's file a named
// lock, its wrapper kept).

import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  renameSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, childEnv, eventually, runCli, startCli, startCliWithFault } from '../helpers/cli.js';
import { stripJsonComments } from '../../src/config/load.js';
import { overlapping, spansOf } from '../helpers/spans.js';
import { testdir } from '../helpers/testdir.js';

const haveStrace = spawnSync('strace', ['-V']).status === 0;

const importing = (args: string[], input: string | null, cwd: string) =>
  spawnSync(process.execPath, [CLI, 'import-crontab', ...args], {
    cwd,
    env: childEnv(),
    input: input ?? undefined,
    stdio: [input === null ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    encoding: 'utf8',
    timeout: 30_000,
  });

describe('routinely import-crontab', () => {
  it('crontab -l | routinely import-crontab > routinely.json: it validates, and a routine runs with the env and % as cron ran it', async () => {
    const project = testdir('routinely-import-');
    const crontab = [
      'MAILTO=me@example.com',
      'GREETING="hello from cron"',
      `*/10 * * * * flock -n ${join(project, 'stamp.lock')} sh -c 'echo "$GREETING" $(date +\\%Y) > stamp.txt'`,
      '@reboot ./start.sh',
      '',
    ].join('\n');
    const r = importing([], crontab, project);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toBe(
      [
        'routinely: import-crontab: stdin:1: MAILTO=me@example.com: routinely sends no mail. For a message when a routine fails (with the last lines of its output, as cron mails them), set "notify": { "command": "./scripts/mail-failure.sh" } or { "webhook": "https://…" } (docs/routines.md, Notifications).',
        'routinely: import-crontab: stdin:4: not carried: @reboot runs at boot, which routinely does not see: give the routine a real schedule with "catchUp": "latest" (it fires once at scheduler start when a time was missed), or keep it in cron, or use a systemd oneshot unit (WantedBy=multi-user.target)',
        '',
      ].join('\n'),
    );
    writeFileSync(join(project, 'routinely.json'), r.stdout);
    const validate = await runCli(['validate'], { cwd: project });
    expect(validate.code, validate.stderr).toBe(0);
    expect(validate.stdout).toMatch(/^routinely\.json: valid \(1 routine, 0 inline tasks\)/);
    const run = await runCli(['routine', 'run', 'echo'], { cwd: project });
    expect(run.code, run.stderr).toBe(0);
    expect(readFileSync(join(project, 'stamp.txt'), 'utf8')).toBe(`hello from cron ${new Date().getFullYear()}\n`);
  });

  it('reads a file; a system crontab (/etc/crontab form) with --system; a missing file or a folder is exit 2', async () => {
    const dir = testdir('routinely-import-');
    const file = importing([join(FIXTURES, 'crontab', 'user.crontab')], null, dir);
    expect(file.status).toBe(0);
    expect(file.stdout).toMatch(
      /^\{\n {2}"\$schema": "[^"]+",\n {2}\/\/ Imported from .*user\.crontab by routinely import-crontab/,
    );
    expect((file.stdout.match(/"action": "command"/g) ?? []).length).toBe(7);
    writeFileSync(
      join(dir, 'crontab'),
      'SHELL=/bin/sh\n25 6 * * * root test -x /usr/sbin/anacron || run-parts --report /etc/cron.daily\n',
    );
    const system = importing(['--system', 'crontab'], null, dir);
    expect(system.status, system.stderr).toBe(0);
    expect(system.stdout).toContain('"run": "test -x /usr/sbin/anacron || run-parts --report /etc/cron.daily"');
    expect(system.stderr).toBe('');
    // a user this machine does not know: Debian's cron ignores the whole file ("bad username")
    writeFileSync(join(dir, 'crontab'), '25 6 * * * rt-no-such-user-4711 echo ghost\n');
    const ghost = importing(['--system', 'crontab'], null, dir);
    expect(ghost.status, ghost.stderr).toBe(0);
    expect(ghost.stderr).toMatch(
      /^routinely: import-crontab: crontab:1: not carried: the user "rt-no-such-user-4711" does not exist on this machine: cron ignores the whole file for it/,
    );
    expect(ghost.stdout).not.toMatch(/"action"/);
    const missing = importing(['no-such-crontab'], null, dir);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toBe('routinely: cannot read no-such-crontab: no such file\n');
    const empty = importing([''], null, dir);
    expect([empty.status, empty.stderr]).toEqual([
      2,
      'routinely: import-crontab: FILE is empty: name a crontab file, or - to read standard input\n',
    ]);
    const folder = importing(['.'], null, dir);
    expect(folder.status).toBe(2);
    const notRegular = "is not a regular file (a pipe's crontab goes on stdin: crontab -l | routinely import-crontab)";
    expect(folder.stderr).toBe(`routinely: . ${notRegular}\n`);
    // a FIFO nobody writes to: refused at once, never a hang (it was opened blocking)
    expect(spawnSync('mkfifo', [join(dir, 'fifo')]).status).toBe(0);
    const fifo = importing(['fifo'], null, dir);
    expect([fifo.status, fifo.stderr]).toEqual([2, `routinely: fifo ${notRegular}\n`]);
  });
});

describe('a crontab with flock, imported and run (SPEC §10, §4.16)', () => {
  it('a crontab with bytes that are not UTF-8 (Latin-1) is refused naming the line (exit 2), never carried with U+FFFD in a command', () => {
    const project = testdir('routinely-import-');
    const file = join(project, 'latin1.crontab');
    writeFileSync(
      file,
      Buffer.concat([Buffer.from('# ok\n* * * * * echo caf'), Buffer.from([0xe9]), Buffer.from(' > x\n')]),
    );
    const r = importing([file], null, project);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/latin1\.crontab:2 holds bytes that are not UTF-8/);
  });

  it.runIf(spawnSync('flock', ['--version']).status === 0)(
    "a process outside routinely that holds the lock file (a script's own flock) still keeps the job out, as under cron: the flock stays in the command",
    async () => {
      const project = testdir('routinely-import-');
      const file = join(project, 'app.lock');
      const r = importing([], `* * * * * flock -n ${file} sh -c 'date >> ran'\n`, project);
      expect(r.status, r.stderr).toBe(0);
      writeFileSync(join(project, 'routinely.json'), r.stdout);
      // (the holder: flock(1) on the same file, as a deploy script takes it)
      const holder = spawn('flock', ['-n', file, 'sleep', '30'], { detached: true, stdio: 'ignore' });
      const pid = holder.pid!;
      try {
        await eventually(() => spawnSync('flock', ['-n', file, 'true']).status === 1, 10_000, 'the file held');
        const run = await runCli(['routine', 'run', 'date'], { cwd: project });
        // (before: the wrapper was dropped and the job ran beside the holder)
        expect(existsSync(join(project, 'ran'))).toBe(false);
        expect(run.code).toBe(1);
      } finally {
        // (its group: flock and the sleep it forked, which holds the file too)
        process.kill(-pid, 'SIGKILL');
        await new Promise((r) => holder.once('exit', r));
      }
      await eventually(() => spawnSync('flock', ['-n', file, 'true']).status === 0, 10_000, 'the file free');
      const free = await runCli(['routine', 'run', 'date'], { cwd: project });
      expect(free.code, free.stderr).toBe(0);
      expect(readFileSync(join(project, 'ran'), 'utf8')).toMatch(/\d/);
    },
  );

  it(
    "jobs keep cron's sharing: the two on one lock file take turns, the blocking one waits instead of skipping, the jobs without flock run beside them",
    { timeout: 120_000 },
    async () => {
      const project = testdir('routinely-import-');
      const locks = join(project, 'cron-locks');
      // (flock's lock files are opened in it: the folder is there, as it was under cron)
      mkdirSync(locks);
      // each job writes its span (a cron line's % escaped as cron wants it)
      const job = (id: string, secs: number): string =>
        `sh -c 'echo "${id} start $(date +\\%s\\%3N)" >> marks; sleep ${secs}; echo "${id} end $(date +\\%s\\%3N)" >> marks'`;
      const crontab = [
        `*/5 * * * * flock -n ${locks}/app.lock ${job('app1', 0.8)}`,
        `*/5 * * * * flock -n ${locks}/app.lock ${job('app2', 0.8)}`,
        `*/5 * * * * flock ${locks}/db.lock ${job('db', 0.5)}`,
        `*/5 * * * * ${job('bare1', 0.8)}`,
        `*/5 * * * * ${job('bare2', 0.8)}`,
        '',
      ].join('\n');
      const r = importing([], crontab, project);
      expect(r.status, r.stderr).toBe(0);
      // every second instead of every five minutes: what runs beside what is the point here
      const config = JSON.parse(stripJsonComments(r.stdout)) as { routines: { schedule: string }[] };
      for (const routine of config.routines) routine.schedule = '*/2 * * * * *';
      writeFileSync(join(project, 'routinely.json'), JSON.stringify(config));
      expect((await runCli(['validate'], { cwd: project })).code).toBe(0);
      const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 110_000 });
      await s.waitFor(/\[scheduler\] started \(5 routines\)/);
      // a manual holder of the db lock meanwhile: the db job waits for it, never skips (the
      // holder waits its turn too: the db job may hold the lock as it comes, every 2 s for 0.5 s)
      const holder = await runCli(['lock', 'run', '--lock', 'db', '--if-busy', 'wait', '--', 'sleep', '1'], {
        cwd: project,
      });
      expect(holder.code).toBe(0);
      await eventually(
        () =>
          Math.min(
            ...['app1', 'app2', 'db', 'bare1', 'bare2'].map(
              (id) => (spansOf(join(project, 'marks')).get(id) ?? []).filter((x) => x.e < Infinity).length,
            ),
          ) >= 3,
        60_000,
        'three runs of every job',
        () => s.stdout(),
      );
      s.child.kill('SIGTERM');
      expect((await s.exited).code).toBe(0);
      const sp = spansOf(join(project, 'marks'));
      expect(overlapping(sp.get('app1')!, sp.get('app2')!), 'the two jobs of app.lock never at once').toBe(0);
      expect(overlapping(sp.get('bare1')!, sp.get('bare2')!), 'the jobs without flock side by side').toBeGreaterThan(0);
      expect(
        overlapping(sp.get('bare1')!, sp.get('app1')!) + overlapping(sp.get('bare1')!, sp.get('app2')!),
        'a job without flock beside a locked one',
      ).toBeGreaterThan(0);
      expect(
        overlapping(sp.get('db')!, sp.get('app1')!) + overlapping(sp.get('db')!, sp.get('app2')!),
        'db.lock and app.lock side by side',
      ).toBeGreaterThan(0);
      expect(s.stdout()).not.toMatch(/skipped db: db busy/);
      expect(s.stdout()).not.toMatch(/\[routine\] failed/);
    },
  );

  it("--merge into a project on PostgreSQL (which schedules a routine without timezone in UTC) gives each routine without CRON_TZ this machine's zone, where cron ran it (it was left to UTC; fault pass)", () => {
    const project = testdir('routinely-import-');
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ project: 'app', backend: { type: 'postgres' } }));
    const r = spawnSync(process.execPath, [CLI, 'import-crontab', '--merge', '-'], {
      cwd: project,
      env: { ...childEnv(), TZ: 'Europe/Berlin' },
      input: '0 3 * * * ./backup.sh\nCRON_TZ=UTC\n0 4 * * * ./report.sh\n',
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/PostgreSQL backend schedules a routine without "timezone" in UTC: .*"Europe\/Berlin"/);
    const config = JSON.parse(stripJsonComments(readFileSync(join(project, 'routinely.json'), 'utf8'))) as {
      routines: { id: string; timezone?: string }[];
    };
    expect(config.routines.map((x) => [x.id, x.timezone])).toEqual([
      ['backup', 'Europe/Berlin'],
      ['report', 'UTC'],
    ]);
    // with files (the machine's zone already), nothing is added
    const files = testdir('routinely-import-');
    writeFileSync(join(files, 'routinely.json'), '{}');
    const plain = importing(['--merge'], '0 3 * * * ./backup.sh\n', files);
    expect(plain.status, plain.stderr).toBe(0);
    expect(readFileSync(join(files, 'routinely.json'), 'utf8')).not.toMatch(/timezone/);
  });

  it("--merge adds the routines and locks to the project's routinely.json (comments kept); an id it has is refused by name and nothing is written", async () => {
    const project = testdir('routinely-import-');
    expect((await runCli(['init'], { cwd: project })).code).toBe(0);
    const before = readFileSync(join(project, 'routinely.json'), 'utf8');
    const crontab = `*/5 * * * * flock -n /tmp/app.lock ./index.sh\n0 3 * * * ./cleanup.sh\n`;
    const r = importing(['--merge'], crontab, project);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe('routinely.json: added 2 routines and 1 lock (app); check it with routinely validate\n');
    const after = readFileSync(join(project, 'routinely.json'), 'utf8');
    for (const line of before.split('\n').filter((l) => l.trim().startsWith('//'))) expect(after).toContain(line);
    const validate = await runCli(['validate'], { cwd: project });
    expect(validate.code, validate.stderr).toBe(0);
    const again = importing(['--merge'], crontab, project);
    expect(again.status).toBe(2);
    expect(again.stderr).toMatch(
      /^routinely: import-crontab --merge: routine "index" is in routinely\.json already \(routines\[\d+\]\): rename or remove it there/,
    );
    expect(readFileSync(join(project, 'routinely.json'), 'utf8')).toBe(after);
    // a config nobody may write is left as it is (root included)
    chmodSync(join(project, 'routinely.json'), 0o444);
    const readOnly = importing(['--merge'], '0 4 * * * ./other.sh\n', project);
    expect([readOnly.status, readOnly.stderr]).toEqual([
      2,
      'routinely: import-crontab --merge: routinely.json is read-only (mode 444): make it writable (chmod u+w) to merge into it; nothing was written\n',
    ]);
    expect(readFileSync(join(project, 'routinely.json'), 'utf8')).toBe(after);
  });

  it('--merge into a routinely.json that is a symbolic link writes the file it points to, and keeps the link', async () => {
    const project = testdir('routinely-import-');
    expect((await runCli(['init'], { cwd: project })).code).toBe(0);
    renameSync(join(project, 'routinely.json'), join(project, 'shared.json'));
    symlinkSync('shared.json', join(project, 'routinely.json'));
    const r = importing(['--merge'], '0 3 * * * ./cleanup.sh\n', project);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^routinely\.json \(a link to \S+shared\.json\): added 1 routine;/);
    expect(lstatSync(join(project, 'routinely.json')).isSymbolicLink()).toBe(true);
    expect(readlinkSync(join(project, 'routinely.json'))).toBe('shared.json');
    expect(readFileSync(join(project, 'shared.json'), 'utf8')).toContain('./cleanup.sh');
    const validate = await runCli(['validate'], { cwd: project });
    expect(validate.code, validate.stderr).toBe(0);
  });

  it('--merge into an empty "routines" or "locks" keeps what they hold (a commented-out entry), and the file its BOM and CRLF line ends', async () => {
    const project = testdir('routinely-import-');
    const path = join(project, 'routinely.json');
    const crontab = '*/5 * * * * flock -n /tmp/app.lock /usr/bin/backup.sh\n';
    for (const [locks, routines] of [
      [
        '{\n    // "deploy": { "slots": 1 }  (disabled)\n  }',
        '[\n    // { "id": "old", "schedule": "0 * * * *" }\n  ]',
      ],
      ['{ /* none yet */ }', '[ // my routines\n  ]'],
    ]) {
      writeFileSync(path, `{\n  "locks": ${locks},\n  "routines": ${routines}\n}\n`);
      const r = importing(['--merge'], crontab, project);
      expect(r.status, r.stderr).toBe(0);
      const after = readFileSync(path, 'utf8');
      for (const comment of [...`${locks}${routines}`.matchAll(/\/\/[^\n]*|\/\*.*?\*\//g)])
        expect(after).toContain(comment[0]);
      expect(after).toContain('/usr/bin/backup.sh');
      const validate = await runCli(['validate'], { cwd: project });
      expect(validate.code, validate.stderr).toBe(0);
    }
    // a file an editor on Windows wrote: the mark and the line ends stay as they were
    writeFileSync(
      path,
      '\uFEFF{\r\n  // mine\r\n  "routines": [\r\n    { "id": "a", "schedule": "0 * * * *", "action": "command", "run": "true" } // a\r\n  ]\r\n}\r\n',
    );
    const r = importing(['--merge'], crontab, project);
    expect(r.status, r.stderr).toBe(0);
    const bytes = readFileSync(path);
    expect([...bytes.subarray(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
    const text = bytes.toString('utf8');
    expect(text.split('\r\n').length).toBeGreaterThan(6);
    expect(text.replaceAll('\r\n', '')).not.toContain('\n');
    expect(text).toContain('"run": "true" }, // a\r\n');
    expect((await runCli(['validate'], { cwd: project })).code).toBe(0);
  });

  it('--merge reads the file as validate does: a key given twice or a syntax error is named with its line and column (exit 2), nothing written', () => {
    const project = testdir('routinely-import-');
    const path = join(project, 'routinely.json');
    const crontab = '0 3 * * * ./cleanup.sh\n';
    for (const [text, why] of [
      [
        '{\n  "routines": [],\n  "routines": [{ "id": "a", "schedule": "0 * * * *", "action": "command", "run": "true" }]\n}\n',
        /^routinely: routinely\.json \(nothing was written\): line 3, column \d+: .*"routines"/m,
      ],
      [
        '{\n  "routines": [\n    { "id": "a", "schedule": "0 * * * *", "action": "command", "run": "true" },\n  ]\n}\n',
        /^routinely: routinely\.json \(nothing was written\): line 3, column \d+: .*trailing comma/m,
      ],
    ] as const) {
      writeFileSync(path, text);
      const r = importing(['--merge'], crontab, project);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(why);
      expect(readFileSync(path, 'utf8')).toBe(text);
    }
  });

  // (strace holds the merge at one step; CI has it: the case runs there)
  it.skipIf(!haveStrace && process.env.CI !== 'true')(
    '--merge never writes over an edit saved while it merged: the file is read again before its new one takes the name (exit 75)',
    async () => {
      expect(haveStrace, 'strace is required (CI installs it)').toBe(true);
      const project = testdir('routinely-import-');
      const path = join(project, 'routinely.json');
      writeFileSync(path, '{ "routines": [] }\n');
      // the merge's new file is held at its fsync (the first of the process) for a second, and
      // the config is saved meanwhile, as an editor or a second import would
      const child = startCliWithFault(
        { cwd: project, trace: 'fsync', inject: 'fsync:delay_enter=1500000:when=1' },
        ['import-crontab', '--merge', '-'],
        ['pipe', 'pipe', 'pipe'],
      );
      child.stdin!.end('0 3 * * * ./cleanup.sh\n');
      let stderr = '';
      child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
      const exited = new Promise<number | null>((r) => child.once('close', (code) => r(code)));
      await eventually(() => readdirSync(project).some((n) => n.includes('.tmp')), 20_000, 'the merge at its fsync');
      const edited = '{ "routines": [] } // saved meanwhile\n';
      writeFileSync(path, edited);
      expect(await exited, stderr).toBe(75);
      expect(stderr).toBe(
        'routinely: import-crontab --merge: routinely.json changed while the crontab was merged into it (another edit or import): nothing was written; import again\n',
      );
      expect(readFileSync(path, 'utf8')).toBe(edited);
      expect(readdirSync(project)).toEqual(['routinely.json']);
    },
  );
});
