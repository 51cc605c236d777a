// The security model (SPEC §12), attacked the way a second local user would: routinely runs as
// root (the victim), `nobody` (uid 65534) plants files. Every attack must fail: nothing of the
// victim's is signalled, run, written or deleted, and the command says what it refused (exit 2).
// Needs root (to be the victim and to act as nobody); skipped otherwise, except under CI=true.

import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { systemProbe } from '../../src/process/identity.js';
import { serializeLockRecord, type LockRecord } from '../../src/lock/record.js';
import { eventually, processRuns, runCli, sleep, startCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

const isRoot = process.getuid?.() === 0;
const NOBODY = 65534;

/** A process group of the victim (root) that must survive. */
function victim(): { pid: number; startTime: string } {
  const child = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
  onTestFinished(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  });
  const info = systemProbe().inspect(child.pid!);
  if (info.state !== 'alive' || !info.startTime) throw new Error('victim not running');
  return { pid: child.pid!, startTime: info.startTime };
}

/** A pid that existed and has exited. */
function deadPid(): number {
  return Number(spawnSync('sh', ['-c', 'echo $$']).stdout.toString().trim());
}

/** A stale lock record (dead owner on this host) naming `children`. */
function forged(children: { pid: number; start_time: string | null }[]): string {
  const probe = systemProbe();
  const now = Date.now() / 1000;
  const rec = {
    version: 1,
    key: 'exec-run',
    lock_id: 'f'.repeat(32),
    generation: 3,
    owner: { pid: deadPid(), host: probe.host, boot_id: probe.bootId, start_time: '1', command: 'exec run', children },
    created_at: now - 10,
    heartbeat_at: now - 5,
    expires_at: now + 55,
  } as LockRecord;
  return serializeLockRecord(rec);
}

/** A folder `nobody` can write into, as on a shared machine. */
function attackerWritable(dir: string): void {
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o777);
}

describe.skipIf(!isRoot && process.env.CI !== 'true')('attacks from another local user (SPEC §12)', () => {
  it('a forged lock record in an attacker-writable lock folder kills nothing: the folder is refused', async () => {
    expect(isRoot, 'these tests run as root (CI does)').toBe(true);
    const project = testProject();
    const v = victim();
    const locks = join(project, '.routinely', 'locks');
    mkdirSync(join(project, '.routinely'), { mode: 0o700 });
    attackerWritable(locks);
    writeFileSync(join(locks, 'exec-run.lock'), forged([{ pid: v.pid, start_time: v.startTime }]));
    chownSync(join(locks, 'exec-run.lock'), NOBODY, NOBODY);
    const r = await runCli(['lock', 'run', '--', 'true'], { cwd: project });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/\.routinely\/locks is writable by .*other users \(mode 0777\); fix it with: chmod 700 /);
    await sleep(200);
    expect(processRuns(v.pid)).toBe(true);
  });

  it('a lock record owned by another user is never acted on, even in a folder of ours', async () => {
    const project = testProject();
    const v = victim();
    const locks = join(project, '.routinely', 'locks');
    mkdirSync(locks, { recursive: true, mode: 0o700 });
    writeFileSync(join(locks, 'exec-run.lock'), forged([{ pid: v.pid, start_time: v.startTime }]));
    chownSync(join(locks, 'exec-run.lock'), NOBODY, NOBODY);
    for (const args of [
      ['lock', 'run', '--', 'true'],
      ['lock', 'status'],
    ]) {
      const r = await runCli(args, { cwd: project });
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/exec-run\.lock is owned by uid 65534, not by this user/);
    }
    expect(processRuns(v.pid)).toBe(true);
  });

  it.each([
    ['pid 0 (our own process group)', 0],
    ['pid 1 (kill(-1): every process)', 1],
  ])('a record naming %s is invalid and signals nothing', async (_name, pid) => {
    const project = testProject();
    const locks = join(project, '.routinely', 'locks');
    mkdirSync(locks, { recursive: true, mode: 0o700 });
    writeFileSync(join(locks, 'exec-run.lock'), forged([{ pid, start_time: '1' }]));
    // run inside a process group of its own that must survive too
    const wrapper = spawn(
      'sh',
      [
        '-c',
        `${process.execPath} ${join(import.meta.dirname, '../../dist/cli.cjs')} lock run -- true; echo "exit $?"; sleep 1; echo alive`,
      ],
      {
        cwd: project,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, NODE_EXTRA_CA_CERTS: '' },
      },
    );
    let out = '';
    wrapper.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((res) => wrapper.on('exit', (c) => res(c)));
    expect(out).toMatch(/exit 0\nalive/);
    expect(code).toBe(0);
  });

  it('a symlink farm in an attacker-writable state folder overwrites nothing', async () => {
    const project = testProject({ routines: [{ id: 'r', schedule: '0 0 1 1 *', action: 'command', run: 'true' }] });
    const precious = join(mkdtempSync(join(tmpdir(), 'routinely-victim-')), 'precious');
    writeFileSync(precious, 'root data');
    onTestFinished(() => rmSync(join(precious, '..'), { recursive: true, force: true }));
    const state = join(project, '.routinely');
    attackerWritable(state);
    for (let i = 0; i < 300; i++) symlinkSync(precious, join(state, `routine-state.json.${1000 + i}`));
    symlinkSync(precious, join(state, 'routine-state.json'));
    const r = await runCli(['routine', 'run', 'r'], { cwd: project });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/\.routinely is writable by (every user|.*other users)/);
    expect(readFileSync(precious, 'utf8')).toBe('root data');
    // even in a folder of ours, a symlink where state goes is never followed: it is reported as
    // a damaged state file and moved aside (the link itself, not its target)
    chmodSync(state, 0o700);
    const again = await runCli(['routine', 'run', 'r'], { cwd: project });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toMatch(/routine-state\.json is corrupt \(.*routine-state\.json is a symbolic link/);
    expect(readFileSync(precious, 'utf8')).toBe('root data');
    // set aside by the writer (it was left in place, and every later command warned again)
    await eventually(
      () => existsSync(join(state, 'routine-state.json')) && lstatSync(join(state, 'routine-state.json')).isFile(),
      15_000,
      'routine-state.json rewritten as a file of its own',
    );
    expect(readdirSync(state).filter((n) => n.startsWith('routine-state.json.corrupt.'))).toHaveLength(1);
    const quiet = await runCli(['routine', 'run', 'r'], { cwd: project });
    expect([quiet.code, quiet.stderr]).toEqual([0, '']);
    expect(readFileSync(precious, 'utf8')).toBe('root data');
  });

  it('a pre-created world-readable log collects nothing: refused, named', async () => {
    const project = testProject({
      routines: [{ id: 'secret', schedule: '0 0 1 1 *', action: 'command', run: 'echo TOPSECRET' }],
    });
    const logs = join(project, '.routinely', 'logs');
    mkdirSync(logs, { recursive: true, mode: 0o700 });
    writeFileSync(join(logs, 'secret.log'), '');
    chmodSync(join(logs, 'secret.log'), 0o666);
    const r = await runCli(['routine', 'run', 'secret'], { cwd: project });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/secret\.log can be read or written by other users \(mode 0666\).*chmod 600/);
    expect(readFileSync(join(logs, 'secret.log'), 'utf8')).not.toContain('TOPSECRET');
    chownSync(join(logs, 'secret.log'), NOBODY, NOBODY);
    chmodSync(join(logs, 'secret.log'), 0o600);
    const r2 = await runCli(['routine', 'run', 'secret'], { cwd: project });
    expect(r2.code).toBe(2);
    expect(r2.stderr).toMatch(/secret\.log is owned by uid 65534/);
  });

  it('a FIFO or a 3 GB file at the lock path: refused at once, named, no hang', async () => {
    const project = testProject();
    const locks = join(project, '.routinely', 'locks');
    mkdirSync(locks, { recursive: true, mode: 0o700 });
    expect(spawnSync('mkfifo', [join(locks, 'exec-run.lock')]).status).toBe(0);
    for (const args of [
      ['lock', 'status'],
      ['lock', 'run', '--', 'true'],
    ]) {
      const r = await runCli(args, { cwd: project, timeoutMs: 10_000 });
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/exec-run\.lock is a FIFO, not a regular file/);
    }
    rmSync(join(locks, 'exec-run.lock'));
    writeFileSync(join(locks, 'exec-run.lock'), '');
    truncateSync(join(locks, 'exec-run.lock'), 3 * 1024 ** 3);
    const big = await runCli(['lock', 'status'], { cwd: project, timeoutMs: 10_000 });
    expect(big.code).toBe(2);
    expect(big.stderr).toMatch(/exec-run\.lock is 3221225472 bytes, larger than any file routinely writes there/);
  });

  it('no config snapshot is handed to a child: a file planted where one used to be is never read', async () => {
    const marker = join(mkdtempSync(join(tmpdir(), 'routinely-pwned-')), 'pwned');
    onTestFinished(() => rmSync(join(marker, '..'), { recursive: true, force: true }));
    const project = testProject({
      routines: [{ id: 'tick', schedule: '* * * * * *', action: 'exec-auto' }],
      exec: { tasks: [] },
    });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[routine\] (succeeded|failed) tick/, 15_000);
    // routines fire in the scheduler's own process with the config it validated
    const snapshot = join(project, '.routinely', 'scheduler-config.json');
    expect(existsSync(snapshot)).toBe(false);
    const evil = {
      config_path: join(project, 'routinely.json'),
      text: JSON.stringify({ exec: { tasks: [{ id: 'evil', run: `touch ${marker}` }] } }),
    };
    writeFileSync(snapshot, JSON.stringify(evil));
    await s.waitFor(
      /\[routine\] (succeeded|failed) tick[\s\S]*\[routine\] (succeeded|failed) tick[\s\S]*\[routine\] (succeeded|failed) tick/,
      15_000,
    );
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    expect(existsSync(marker)).toBe(false);
  });

  it('a config planted by another user above the working folder is refused; the search never enters their folders', async () => {
    const marker = join(mkdtempSync(join(tmpdir(), 'routinely-pwned-')), 'pwned');
    onTestFinished(() => rmSync(join(marker, '..'), { recursive: true, force: true }));
    const shared = mkdtempSync(join(tmpdir(), 'routinely-shared-'));
    onTestFinished(() => rmSync(shared, { recursive: true, force: true }));
    chmodSync(shared, 0o755);
    writeFileSync(
      join(shared, 'routinely.json'),
      JSON.stringify({ stateDir: '/tmp', exec: { tasks: [{ id: 'evil', run: `touch ${marker}` }] } }),
    );
    chownSync(join(shared, 'routinely.json'), NOBODY, NOBODY);
    const work = join(shared, 'victimwork', 'sub');
    mkdirSync(work, { recursive: true });
    const r = await runCli(['exec', 'run'], { cwd: work });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/refusing .*routinely\.json: it belongs to uid 65534, not to this user/);
    expect(existsSync(marker)).toBe(false);
    // a folder of the attacker's between us and the file: the search stops there
    chownSync(join(shared, 'victimwork'), NOBODY, NOBODY);
    const r2 = await runCli(['exec', 'run'], { cwd: work });
    expect(r2.code).toBe(2);
    expect(r2.stderr).toMatch(/the search stopped at .*victimwork, which belongs to uid 65534/);
    // --config gets the same owner check
    const r3 = await runCli(['exec', 'run', '--config', join(shared, 'routinely.json')], { cwd: work });
    expect(r3.code).toBe(2);
    expect(existsSync(marker)).toBe(false);
    // and a config of ours that others may write
    const mine = testProject({});
    chmodSync(join(mine, 'routinely.json'), 0o666);
    const r4 = await runCli(['validate'], { cwd: mine });
    expect(r4.code).toBe(2);
    expect(r4.stderr).toMatch(/other users may write it \(mode 0666\); fix it with: chmod 644/);
  });

  it('the database URL and the HTTP token never reach task and routine commands unless passEnv says so', async () => {
    const project = testProject({
      exec: {
        tasks: [
          { id: 'env', run: 'echo "url=${ROUTINELY_DATABASE_URL:-none} token=${ROUTINELY_HTTP_TOKEN:-none}" >> seen' },
        ],
      },
    });
    const env = { ROUTINELY_DATABASE_URL: 'postgres://u:S3cret@h/db', ROUTINELY_HTTP_TOKEN: 't0ken' };
    expect((await runCli(['exec', 'run'], { cwd: project, env })).code).toBe(0);
    expect(readFileSync(join(project, 'seen'), 'utf8')).toBe('url=none token=none\n');
    const cfg = JSON.parse(readFileSync(join(project, 'routinely.json'), 'utf8'));
    cfg.passEnv = ['ROUTINELY_DATABASE_URL'];
    cfg.exec.tasks[0].run += ' #2';
    writeFileSync(join(project, 'routinely.json'), JSON.stringify(cfg));
    expect((await runCli(['exec', 'run'], { cwd: project, env })).code).toBe(0);
    expect(readFileSync(join(project, 'seen'), 'utf8')).toBe(
      'url=none token=none\nurl=postgres://u:S3cret@h/db token=none\n',
    );
  });

  it("a record's host and command are printed with control characters escaped", async () => {
    const project = testProject();
    const locks = join(project, '.routinely', 'locks');
    mkdirSync(locks, { recursive: true, mode: 0o700 });
    const now = Date.now() / 1000;
    const rec: LockRecord = {
      version: 1,
      key: 'exec-run',
      lock_id: 'e'.repeat(32),
      generation: 2,
      owner: {
        pid: 4242,
        host: 'elsewhere\u001b]0;pwned\u0007',
        boot_id: null,
        start_time: null,
        command: 'exec run\u001b[2J',
      },
      created_at: now,
      heartbeat_at: now,
      expires_at: now + 60,
    };
    writeFileSync(join(locks, 'exec-run.lock'), serializeLockRecord(rec));
    const r = await runCli(['lock', 'run', '--', 'true'], { cwd: project });
    expect(r.code).toBe(75);
    expect(r.stderr).not.toMatch(/\u001b/);
    expect(r.stderr).toMatch(/elsewhere\\x1b\]0;pwned\\x07/);
    const s = await runCli(['lock', 'status'], { cwd: project });
    expect(s.code, s.stderr).toBe(0);
    expect(s.stdout).not.toMatch(/\u001b/);
    expect(s.stdout).toMatch(/holder: +pid 4242 on elsewhere\\x1b\]0;pwned\\x07 \(exec run\\x1b\[2J\)/);
    expect(s.stdout).toMatch(/command: +exec run\\x1b\[2J$/m);
  });

  it('ordinary use in a 0700 project is unaffected', async () => {
    const project = testProject({
      exec: { tasks: [{ id: 'a', run: 'true' }] },
      routines: [{ id: 'r', schedule: '0 0 1 1 *', action: 'command', run: 'true' }],
    });
    expect(statSync(project).mode & 0o777).toBe(0o700);
    for (const args of [
      ['exec', 'run'],
      ['routine', 'run', 'r'],
      ['routine', 'list'],
      ['lock', 'status'],
      ['exec', 'status'],
      ['validate'],
    ]) {
      const r = await runCli(args, { cwd: project });
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
    }
    expect(statSync(join(project, '.routinely')).mode & 0o777).toBe(0o700);
    expect(readFileSync(join(project, '.routinely', '.gitignore'), 'utf8')).toMatch(/^\*$/m);
  });
});

// The views take the folders under the state folder as the writers do (SPEC §12 Folders): a
// symlinked folder is refused, never read through (found by a fault pass: `routine history`,
// `exec show` and `exec runs` read another folder's files and showed them as the project's).
describe('views never read through a symlinked folder under the state folder', () => {
  it('routine history: a symlinked history folder is refused (exit 2), as routine list refuses it', async () => {
    const project = testProject({ routines: [{ id: 'r', schedule: '0 0 1 1 *', action: 'command', run: 'true' }] });
    expect((await runCli(['routine', 'run', 'r'], { cwd: project })).code).toBe(0);
    const elsewhere = mkdtempSync(join(tmpdir(), 'routinely-elsewhere-'));
    onTestFinished(() => rmSync(elsewhere, { recursive: true, force: true }));
    const history = join(project, '.routinely', 'history');
    renameSync(history, join(elsewhere, 'h'));
    symlinkSync(join(elsewhere, 'h'), history);
    for (const args of [
      ['routine', 'history', 'r'],
      ['routine', 'history'],
      ['routine', 'list'],
    ]) {
      const r = await runCli(args, { cwd: project });
      expect([r.code, r.stdout], args.join(' ')).toEqual([2, '']);
      expect(r.stderr).toMatch(/history is a symbolic link inside routinely's state; refusing to follow it/);
    }
  });

  it('the default lock folder as a symlink is refused by every command (exit 2); a ROUTINELY_LOCK_DIR elsewhere may be one', async () => {
    const project = testProject();
    expect((await runCli(['lock', 'run', '--', 'true'], { cwd: project })).code).toBe(0);
    const elsewhere = mkdtempSync(join(tmpdir(), 'routinely-elsewhere-'));
    onTestFinished(() => rmSync(elsewhere, { recursive: true, force: true }));
    const locks = join(project, '.routinely', 'locks');
    rmSync(locks, { recursive: true });
    mkdirSync(join(elsewhere, 'locks'), { mode: 0o700 });
    symlinkSync(join(elsewhere, 'locks'), locks);
    for (const args of [
      ['lock', 'run', '--', 'true'],
      ['lock', 'status'],
      ['exec', 'run'],
    ]) {
      const r = await runCli(args, { cwd: project });
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/locks is a symbolic link inside routinely's state; refusing to follow it/);
    }
    expect(readdirSync(join(elsewhere, 'locks'))).toEqual([]);
    // a lock folder given outside the state folder: a root of its own, which may be a link
    symlinkSync(join(elsewhere, 'locks'), join(elsewhere, 'via'));
    const outside = await runCli(['lock', 'run', '--', 'true'], {
      cwd: project,
      env: { ROUTINELY_LOCK_DIR: join(elsewhere, 'via') },
    });
    expect(outside.code, outside.stderr).toBe(0);
    expect(readdirSync(join(elsewhere, 'locks')).some((n) => n.startsWith('exec-run.'))).toBe(true);
  });

  it('a ROUTINELY_LOCK_DIR in a folder every user may write is refused by every command, validate too (exit 2, named)', async () => {
    const project = testProject();
    const open = mkdtempSync(join(tmpdir(), 'routinely-open-'));
    onTestFinished(() => rmSync(open, { recursive: true, force: true }));
    chmodSync(open, 0o777); // (no sticky bit: anyone may swap the lock folder for a link of theirs)
    for (const args of [
      ['validate'],
      ['lock', 'run', '--', 'true'],
      ['lock', 'status'],
      ['routine', 'list'],
      ['exec', 'status'],
    ]) {
      const r = await runCli(args, { cwd: project, env: { ROUTINELY_LOCK_DIR: join(open, 'locks') } });
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(
        /refusing the lock folder \(ROUTINELY_LOCK_DIR\): \S+ is writable by every user \(mode 0777\)/,
      );
    }
    expect(readdirSync(open)).toEqual([]);
    // one not there yet right under /tmp (world-writable with the sticky bit: a parent it may have)
    const fresh = join(tmpdir(), `routinely-locks-${process.pid}-${Date.now()}`);
    onTestFinished(() => rmSync(fresh, { recursive: true, force: true }));
    const made = await runCli(['lock', 'run', '--', 'true'], { cwd: project, env: { ROUTINELY_LOCK_DIR: fresh } });
    expect(made.code, made.stderr).toBe(0);
    expect((statSync(fresh).mode & 0o777).toString(8)).toBe('700');
  });

  it('a symlink, FIFO or folder at exec/tasks.json is set aside by the next exec run, the link never followed', async () => {
    const project = testProject({ exec: { tasks: [{ id: 'a', run: 'true' }] } });
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(0);
    const elsewhere = mkdtempSync(join(tmpdir(), 'routinely-elsewhere-'));
    onTestFinished(() => rmSync(elsewhere, { recursive: true, force: true }));
    writeFileSync(join(elsewhere, 'precious'), 'data');
    const exec = join(project, '.routinely', 'exec');
    const tasks = join(exec, 'tasks.json');
    for (const plant of [
      () => symlinkSync(join(elsewhere, 'precious'), tasks),
      () => spawnSync('mkfifo', [tasks]),
      () => mkdirSync(tasks),
    ]) {
      rmSync(tasks, { recursive: true, force: true });
      plant();
      const r = await runCli(['exec', 'run'], { cwd: project });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/tasks\.json is corrupt \(.*\); moved aside to tasks\.json\.corrupt\.\d+; rebuilt from/);
      expect(lstatSync(tasks).isFile()).toBe(true);
      const again = await runCli(['exec', 'run'], { cwd: project });
      expect([again.code, again.stderr]).toEqual([0, '']);
    }
    expect(readFileSync(join(elsewhere, 'precious'), 'utf8')).toBe('data');
  });

  it('a folder where a log or history file goes is something in the way (exit 2, named), not a disk error (74)', async () => {
    const project = testProject({ routines: [{ id: 'r', schedule: '0 0 1 1 *', action: 'command', run: 'true' }] });
    expect((await runCli(['routine', 'run', 'r'], { cwd: project })).code).toBe(0);
    for (const file of [
      join(project, '.routinely', 'logs', 'r.log'),
      join(project, '.routinely', 'history', 'r.jsonl'),
    ]) {
      rmSync(file);
      mkdirSync(file);
      const r = await runCli(['routine', 'run', 'r'], { cwd: project });
      // (for the history, the views' warning comes first: the record is taken from its index)
      const said = r.stderr.split('\n').filter((l) => l !== '' && !l.startsWith('routinely: warning: '));
      expect([r.code, said]).toEqual([
        2,
        [`routinely: ${file} is not a regular file; refusing to write to it (remove it)`],
      ]);
      rmSync(file, { recursive: true });
    }
  });

  it("a symlink planted at a task's log before exec resume: that task fails (LOG_WRITE_FAILED) without running, the run goes on, the target is untouched", async () => {
    const project = testProject({
      exec: {
        tasks: [
          { id: 'a', run: 'test -e ok && echo ran-a' },
          { id: 'b', run: 'echo b', dependsOn: ['a'] },
          { id: 'c', run: 'test -e ok && echo c' },
        ],
      },
    });
    const first = await runCli(['exec', 'run'], { cwd: project });
    expect(first.code).toBe(1);
    const runId = /^run (r-[^\s:]+)/.exec(first.stdout)![1]!;
    writeFileSync(join(project, 'ok'), '');
    const elsewhere = mkdtempSync(join(tmpdir(), 'routinely-elsewhere-'));
    onTestFinished(() => rmSync(elsewhere, { recursive: true, force: true }));
    writeFileSync(join(elsewhere, 'precious'), 'data');
    const log = join(project, '.routinely', 'exec', 'runs', runId, 'a.log');
    rmSync(log);
    symlinkSync(join(elsewhere, 'precious'), log);
    const resumed = await runCli(['exec', 'resume', runId, '--json'], { cwd: project });
    expect(resumed.code, resumed.stderr).toBe(1);
    const tasks = (JSON.parse(resumed.stdout) as { tasks: Record<string, { status: string; why_code?: string }> })
      .tasks;
    expect(tasks.a).toMatchObject({ status: 'failed', why_code: 'LOG_WRITE_FAILED' });
    expect(tasks.b).toMatchObject({ status: 'skipped_dependency' });
    expect(tasks.c).toMatchObject({ status: 'succeeded' });
    expect(readFileSync(join(elsewhere, 'precious'), 'utf8')).toBe('data');
    // on record as failed, never left started: the next view says the same
    const show = await runCli(['exec', 'show', runId], { cwd: project });
    expect(show.stdout).toMatch(/^ {2}a +failed +— its log could not be opened \(.*a\.log is a symbolic link/m);
    expect(show.stdout).not.toMatch(/OWNER_DEAD|interrupted/);
  });

  it('exec show and exec runs: a symlinked run folder is refused, never shown as the project run', async () => {
    const project = testProject({ exec: { tasks: [{ id: 'a', run: 'true' }] } });
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(0);
    const runs = join(project, '.routinely', 'exec', 'runs');
    const [id] = readdirSync(runs);
    const elsewhere = mkdtempSync(join(tmpdir(), 'routinely-elsewhere-'));
    onTestFinished(() => rmSync(elsewhere, { recursive: true, force: true }));
    renameSync(join(runs, id!), join(elsewhere, 'run'));
    symlinkSync(join(elsewhere, 'run'), join(runs, id!));
    const show = await runCli(['exec', 'show', id!], { cwd: project });
    expect([show.code, show.stdout]).toEqual([2, '']);
    expect(show.stderr).toMatch(new RegExp(`${id} is a symbolic link inside routinely's state; refusing to follow it`));
    const list = await runCli(['exec', 'runs', '--json'], { cwd: project });
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toEqual([
      expect.objectContaining({ run_id: id, status: 'UNREADABLE', why: expect.stringMatching(/symbolic link/) }),
    ]);
  });
});
