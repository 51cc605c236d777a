// `scheduler status` and `scheduler stop` with real schedulers (SPEC §10), on both backends:
// exit 0 running / 3 not running, a stop that waits for the scheduler to exit, a stop that
// times out, a scheduler on another host (named, never signalled), a stale lock left by a
// SIGKILLed scheduler, and a forged lock that names a process that is not the scheduler.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { systemProbe } from '../../src/process/identity.js';
import { serializeLockRecord, type LockRecord } from '../../src/lock/record.js';
import { CLI, childEnv, eventually, processRuns, runCli, startCli, type Spawned } from '../helpers/cli.js';
import { freshDatabase, pgCluster, psqlScript } from '../helpers/pg-test.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const backends = cluster ? (['file', 'postgres'] as const) : (['file'] as const);

const HERE = { ROUTINELY_HOST_ID: 'host-a' };
const THERE = { ROUTINELY_HOST_ID: 'host-b' };

async function project(kind: 'file' | 'postgres', config: object = {}) {
  const url = kind === 'postgres' ? await freshDatabase(cluster!) : null;
  const extra = url ? { project: 'app', backend: { type: 'postgres', url } } : {};
  const dir = testProject({
    ...extra,
    routines: [{ id: 'tick', schedule: '* * * * * *', action: 'command', run: 'true' }],
    ...config,
  });
  return { dir, url };
}

async function scheduler(dir: string, env: Record<string, string>, args: string[] = []): Promise<Spawned> {
  const s = startCli(['scheduler', 'start', ...args], { cwd: dir, env, timeoutMs: 120_000 });
  await s.waitFor(/\[scheduler\] started/);
  return s;
}

const cli = (dir: string, args: string[], env: Record<string, string> = HERE) => runCli(args, { cwd: dir, env });

/** A process of ours that is not a scheduler, and its start time. */
function bystander(): { pid: number; startTime: string } {
  const child = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
  onTestFinished(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  });
  const info = systemProbe().inspect(child.pid!);
  if (info.state !== 'alive' || !info.startTime) throw new Error('not running');
  return { pid: child.pid!, startTime: info.startTime };
}

describe.each(backends)('scheduler status and stop (%s backend)', (kind) => {
  it('status exits 3 while none runs and 0 while one does; stop sends SIGTERM and waits until it has exited', async () => {
    const { dir } = await project(kind);
    expect(await cli(dir, ['scheduler', 'status'])).toMatchObject({ code: 3, stdout: 'scheduler: not running\n' });
    expect(JSON.parse((await cli(dir, ['scheduler', 'status', '--json'])).stdout)).toEqual({
      running: false,
      backend: kind,
      schedulers: [],
      stale: [],
    });
    const t0 = Date.now();
    const s = await scheduler(dir, HERE);
    const status = await cli(dir, ['scheduler', 'status']);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(
      new RegExp(
        `^scheduler: running, pid ${s.pid} on host-a since \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d \\S+ \\(heartbeat \\d+s ago\\)\\n`,
      ),
    );
    const json = JSON.parse((await cli(dir, ['scheduler', 'status', '--json'])).stdout);
    expect(json).toMatchObject({
      running: true,
      backend: kind,
      schedulers: [{ pid: s.pid, host: 'host-a', here: true, key: kind === 'file' ? 'scheduler' : 'scheduler@host-a' }],
      stale: [],
    });
    // since it was started here (1 s for a time kept to the second)
    expect(Date.parse(json.schedulers[0].since)).toBeGreaterThanOrEqual(t0 - 1000);
    expect(Date.parse(json.schedulers[0].since)).toBeLessThanOrEqual(Date.now() + 1000);
    const stop = await cli(dir, ['scheduler', 'stop']);
    expect(stop.stdout).toMatch(
      new RegExp(
        `^stopping the scheduler \\(pid ${s.pid} on host-a\\): sent SIGTERM, waiting up to 60s for it to exit\\nscheduler stopped \\(pid ${s.pid}, after \\d+\\.\\ds\\)\\n$`,
      ),
    );
    expect(stop.code).toBe(0);
    // it had exited when stop returned: its last log line is written, its exit code is 0
    expect(processRuns(s.pid)).toBe(false);
    expect(await s.exited).toEqual({ code: 0, signal: null });
    expect(s.stdout()).toMatch(/\[scheduler\] stopped\n$/);
    expect((await cli(dir, ['scheduler', 'status'])).code).toBe(3);
    expect(await cli(dir, ['scheduler', 'stop'])).toMatchObject({
      code: 0, // nothing to do
      stdout: 'scheduler: not running; nothing to stop\n',
    });
  });

  it('stop gives up after --timeout while the scheduler waits for a running routine (exit 1), and leaves it running', async () => {
    const { dir } = await project(kind, {
      routines: [{ id: 'slow', schedule: '* * * * * *', action: 'command', run: 'touch started; sleep 60' }],
    });
    const s = await scheduler(dir, HERE, ['--shutdown-timeout', '60']);
    await s.waitFor(/\[routine\] started slow/);
    const stop = await cli(dir, ['scheduler', 'stop', '--timeout', '1']);
    expect(stop.code).toBe(1);
    expect(stop.stderr).toMatch(
      new RegExp(
        `^routinely: the scheduler \\(pid ${s.pid}\\) is still running after 1s: it lets running routines finish for up to its --shutdown-timeout\\. .*kill -KILL ${s.pid}`,
      ),
    );
    await s.waitFor(/\[scheduler\] stopping \(waiting for 1 running routine\)/);
    expect(processRuns(s.pid)).toBe(true);
    s.child.kill('SIGKILL');
    await s.exited;
  });

  it('a scheduler on another host is named and never signalled', async () => {
    const { dir } = await project(kind);
    const s = await scheduler(dir, THERE);
    const status = await cli(dir, ['scheduler', 'status']);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(new RegExp(`^scheduler: running, pid ${s.pid} on host-b since `));
    expect(JSON.parse((await cli(dir, ['scheduler', 'status', '--json'])).stdout).schedulers[0]).toMatchObject({
      host: 'host-b',
      here: false,
    });
    const stop = await cli(dir, ['scheduler', 'stop', '--timeout', '5']);
    if (kind === 'file') {
      // one scheduler per project: it is this project's, but not ours to signal
      expect(stop).toMatchObject({ code: 1, stdout: '' });
      expect(stop.stderr).toBe(
        `routinely: the scheduler runs on host-b (pid ${s.pid}), not on this host (host-a): not signalling it; stop it there with: routinely scheduler stop\n`,
      );
    } else {
      // one scheduler per host: none runs on this one
      expect(stop).toMatchObject({
        code: 0, // nothing to do here
        stdout: `scheduler: not running on this host (host-a); nothing to stop here. Running on: host-b (pid ${s.pid})\n`,
      });
    }
    expect(processRuns(s.pid)).toBe(true);
    expect(s.stdout()).not.toMatch(/\[scheduler\] stopping/);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });

  it('a scheduler killed with SIGKILL is not running; its stale lock is reported', async () => {
    const { dir } = await project(kind);
    const s = await scheduler(dir, HERE);
    s.child.kill('SIGKILL');
    await s.exited;
    const status = await cli(dir, ['scheduler', 'status']);
    expect(status.code).toBe(3);
    // (the database backend adds that it judged by the database clock)
    expect(status.stdout).toMatch(
      new RegExp(
        `^scheduler: not running \\(a stale lock is left by pid ${s.pid} on host-a: owner pid ${s.pid} is not running( \\(database clock\\))?\\)\n$`,
      ),
    );
    expect(JSON.parse((await cli(dir, ['scheduler', 'status', '--json'])).stdout)).toMatchObject({
      running: false,
      stale: [{ pid: s.pid, host: 'host-a', why: expect.stringMatching(`^owner pid ${s.pid} is not running`) }],
    });
    expect((await cli(dir, ['scheduler', 'stop'])).code).toBe(0); // nothing to stop
    // a view changes nothing: the next scheduler takes the stale lock over
    const next = await scheduler(dir, HERE);
    expect((await cli(dir, ['scheduler', 'stop'])).code).toBe(0);
    await next.exited;
  });

  it('a forged scheduler lock naming a process that is not a scheduler: nothing is signalled', async () => {
    const { dir, url } = await project(kind);
    const victim = bystander();
    await forgeSchedulerLock(dir, url, victim.pid, victim.startTime);
    expect((await cli(dir, ['scheduler', 'status'])).stdout).toMatch(
      new RegExp(`^scheduler: running, pid ${victim.pid} on host-a`),
    );
    const stop = await cli(dir, ['scheduler', 'stop', '--timeout', '2']);
    expect(stop.code).toBe(1);
    expect(stop.stderr).toBe(
      `routinely: not signalling pid ${victim.pid}: pid ${victim.pid} does not run "scheduler start"\n`,
    );
    expect(processRuns(victim.pid)).toBe(true);
  });

  it("a forged scheduler lock naming another project's live scheduler (its pid, start time, boot id): nothing is signalled (SPEC §12)", async () => {
    const { dir, url } = await project(kind);
    // another project's scheduler on this host, with the same user
    const other = testProject({ routines: [{ id: 'tick', schedule: '0 0 1 1 *', action: 'command', run: 'true' }] });
    const theirs = await scheduler(other, HERE);
    onTestFinished(() => {
      theirs.child.kill('SIGKILL');
    });
    const info = systemProbe().inspect(theirs.pid);
    if (info.state !== 'alive' || !info.startTime) throw new Error('not running');
    await forgeSchedulerLock(dir, url, theirs.pid, info.startTime);
    const stop = await cli(dir, ['scheduler', 'stop', '--timeout', '2']);
    expect(stop.code).toBe(1);
    expect(stop.stderr).toMatch(
      new RegExp(
        `^routinely: not signalling pid ${theirs.pid}: pid ${theirs.pid} runs a scheduler, but not this project's: it does not hold \\S+scheduler\\.running open`,
      ),
    );
    expect(processRuns(theirs.pid)).toBe(true);
    expect(theirs.stdout()).not.toMatch(/stopping/);
    // its own project's stop is proven, and works
    const own = await cli(other, ['scheduler', 'stop', '--timeout', '10']);
    expect(own.code, own.stderr).toBe(0);
  });

  it('a symbolic link at scheduler.running: the scheduler says so at its start, and stop says why it signals nothing', async () => {
    const { dir } = await project(kind);
    mkdirSync(join(dir, '.routinely'), { recursive: true, mode: 0o700 });
    symlinkSync(join(dir, 'elsewhere'), join(dir, '.routinely', 'scheduler.running'));
    const s = await scheduler(dir, HERE);
    onTestFinished(() => {
      s.child.kill('SIGKILL');
    });
    expect(s.stdout()).toMatch(
      /scheduler\.running.*cannot prove this is the project's scheduler, and will not signal it/,
    );
    const stop = await cli(dir, ['scheduler', 'stop', '--timeout', '2']);
    expect(stop.code).toBe(1);
    expect(stop.stderr).toMatch(
      /runs a scheduler, but it cannot be proven this project's: \S+scheduler\.running is a symbolic link, which no scheduler opens \(remove it and restart the scheduler, or stop it with SIGTERM\)/,
    );
    expect(processRuns(s.pid)).toBe(true);
  });

  it('works while the config is invalid (a warning, then the answer)', async () => {
    const { dir } = await project(kind);
    const s = await scheduler(dir, HERE);
    const good = (await import('node:fs')).readFileSync(join(dir, 'routinely.json'), 'utf8');
    writeFileSync(join(dir, 'routinely.json'), good.replace('"routines"', '"routinez"'));
    const status = await cli(dir, ['scheduler', 'status']);
    expect(status.code).toBe(0);
    expect(status.stderr).toMatch(/^routinely: warning: routinely\.json is invalid/);
    expect(status.stdout).toMatch(new RegExp(`^scheduler: running, pid ${s.pid} on host-a`));
    expect((await cli(dir, ['scheduler', 'stop'])).code).toBe(0);
    expect((await s.exited).code).toBe(0);
  });
});

/** A scheduler lock naming `pid` on host-a, written as an attacker would: with psql into the
 * database, or as a lock file of ours. */
async function forgeSchedulerLock(
  dir: string,
  url: string | null,
  pid: number,
  startTime: string | null,
): Promise<void> {
  const now = Date.now() / 1000;
  const owner = { pid, host: 'host-a', boot_id: systemProbe().bootId, start_time: startTime, command: 'scheduler' };
  if (url) {
    await cli(dir, ['scheduler', 'status']); // creates the schema
    // written as a database writer would, with psql
    psqlScript(
      url,
      `INSERT INTO routinely_leases (project, key, lock_id, epoch, owner, created_at, heartbeat_at, expires_at)
       VALUES ('app', 'scheduler@host-a', '${'f'.repeat(32)}', 1, '${JSON.stringify(owner)}', now(), now(), now() + interval '60 seconds');`,
    );
  } else {
    const locks = join(dir, '.routinely', 'locks');
    mkdirSync(locks, { recursive: true, mode: 0o700 });
    const rec: LockRecord = {
      version: 1,
      key: 'scheduler',
      lock_id: 'f'.repeat(32),
      generation: 1,
      owner,
      created_at: now,
      heartbeat_at: now,
      expires_at: now + 60,
    };
    writeFileSync(join(locks, 'scheduler.lock'), serializeLockRecord(rec), { mode: 0o600 });
  }
}

describe('a scheduler started through npm', () => {
  const npmEnv = { npm_command: 'exec', npm_execpath: '/usr/lib/node_modules/npm/bin/npm-cli.js' };

  it('says at start that signals sent to npm do not reach it, and stops by itself when that npm is gone', async () => {
    const project = testProject({ routines: [{ id: 'tick', schedule: '0 0 1 1 *', action: 'command', run: 'true' }] });
    // a stand-in for npx: a Node script named as npm's own (its cmdline says npx-cli.js) that
    // runs the CLI as its child and is then killed the way `kill -TERM <npx pid>` ends npx (its
    // child lives on)
    const fakeNpx = join(project, 'npx-cli.js');
    writeFileSync(
      fakeNpx,
      `require('node:child_process').spawn(process.execPath, [${JSON.stringify(CLI)}, 'scheduler', 'start'], { stdio: 'inherit' }); setInterval(() => {}, 1000);\n`,
    );
    const wrapper = spawn(process.execPath, [fakeNpx], {
      cwd: project,
      env: childEnv(npmEnv),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    wrapper.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    await eventually(
      () => /\[scheduler\] started/.test(out),
      20_000,
      'the scheduler to start',
      () => out,
    );
    expect(out).toMatch(
      /\[scheduler\] warning: started through npx \(npm exec\); signals sent to npm do not reach this process: in Docker use CMD \["node_modules\/\.bin\/routinely", "scheduler", "start"\]/,
    );
    const status = JSON.parse((await runCli(['scheduler', 'status', '--json'], { cwd: project })).stdout) as {
      schedulers: { pid: number }[];
    };
    const pid = status.schedulers[0]!.pid;
    expect(processRuns(pid)).toBe(true);
    wrapper.kill('SIGKILL');
    // reparented, it notices, stops and releases its lock
    await eventually(() => !processRuns(pid), 20_000, 'the orphaned scheduler to stop');
    expect((await runCli(['scheduler', 'status'], { cwd: project })).stdout).toMatch(/not running/);
  }, 60_000);

  // The real peer: npm itself running a package.json script through its script shell. On SIGTERM
  // npm signals the shell only; dash does not exec its last command, so it dies and the scheduler
  // would be reparented to PID 1 and go on firing. SIGKILL to npm leaves the shell waiting for us.
  for (const [shell, signal] of [
    ['/bin/dash', 'SIGTERM'],
    ['/bin/dash', 'SIGKILL'],
    ['/bin/bash', 'SIGTERM'],
  ] as const) {
    it(`npm run with ${shell} as its script shell: ${signal} to npm stops the scheduler and frees its lock`, async () => {
      const project = testProject({
        routines: [{ id: 'tick', schedule: '0 0 1 1 *', action: 'command', run: 'true' }],
      });
      writeFileSync(
        join(project, 'package.json'),
        JSON.stringify({
          name: 'p',
          private: true,
          scripts: { sched: `"${process.execPath}" "${CLI}" scheduler start` },
        }),
      );
      const env = childEnv({ npm_config_update_notifier: 'false' });
      for (const k of Object.keys(env))
        if (/^npm_(?!config_(cache|registry|userconfig|globalconfig|update_notifier))/i.test(k) || k === 'INIT_CWD')
          delete env[k];
      const npm = spawn('npm', ['run', '--script-shell', shell, 'sched'], {
        cwd: project,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      npm.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      npm.stderr!.on('data', (d: Buffer) => (out += d.toString()));
      onTestFinished(() => void npm.kill('SIGKILL'));
      await eventually(
        () => /\[scheduler\] started/.test(out),
        30_000,
        'the scheduler to start',
        () => out,
      );
      expect(out).toMatch(/started through npm run sched; signals sent to npm do not reach this process/);
      const pid = (
        JSON.parse((await runCli(['scheduler', 'status', '--json'], { cwd: project })).stdout) as {
          schedulers: { pid: number }[];
        }
      ).schedulers[0]!.pid;
      onTestFinished(() => {
        if (processRuns(pid)) process.kill(pid, 'SIGKILL');
      });
      expect(pid).not.toBe(npm.pid);
      npm.kill(signal);
      await eventually(() => !processRuns(pid), 20_000, 'the scheduler to stop with its npm');
      const status = await runCli(['scheduler', 'status'], { cwd: project });
      expect(status.code).toBe(3);
      expect(status.stdout).toMatch(/not running/);
    }, 60_000);
  }

  it('started in the background by a shell that npm ran (`routinely scheduler start &`), it keeps running when that shell exits', async () => {
    const project = testProject({ routines: [{ id: 'tick', schedule: '0 0 1 1 *', action: 'command', run: 'true' }] });
    const log = join(project, 'scheduler.log');
    const sh = spawnSync('/bin/sh', ['-c', `"${process.execPath}" "${CLI}" scheduler start > "${log}" 2>&1 &`], {
      cwd: project,
      env: childEnv(npmEnv),
    });
    expect(sh.status).toBe(0);
    await eventually(
      () => existsSync(log) && /\[scheduler\] started/.test(readFileSync(log, 'utf8')),
      20_000,
      'the scheduler to start',
    );
    const pid = (
      JSON.parse((await runCli(['scheduler', 'status', '--json'], { cwd: project })).stdout) as {
        schedulers: { pid: number }[];
      }
    ).schedulers[0]!.pid;
    onTestFinished(() => {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    });
    // its shell is long gone; the scheduler still runs after a few of its parent checks
    await eventually(() => /started through/.test(readFileSync(log, 'utf8')), 5_000, 'the warning');
    const runsAfter = async (): Promise<boolean> => {
      await new Promise((r) => setTimeout(r, 3000)); // three parent checks (one a second)
      return processRuns(pid);
    };
    expect(await runsAfter()).toBe(true);
    process.kill(pid, 'SIGTERM');
    await eventually(() => !processRuns(pid), 20_000, 'stopped by SIGTERM');
  }, 60_000);
});
