// The state disk under real faults while a scheduler runs (SPEC §3, §4.15): a full disk,
// exhausted inodes and a read-only remount of an 8 MiB tmpfs state folder. The scheduler stays
// up for twice its lock's TTL, says why on /healthz and once in its log, holds its fires, and
// carries on by itself once the fault is gone; every recorded fire is counted exactly.
// Needs root (mount); skipped otherwise, except under CI=true where it must run.
// Then an EIO on the lock or history folder (strace's fault injection; needs strace): every
// command exits 74 naming the folder, never "unexpected error", never exit 1, never a made-up
// answer (a lock read as free, a routine read as never run).

import { spawnSync } from 'node:child_process';
import {
  appendFileSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { HistoryEntry } from '../../src/state/history.js';
import { CLI, cliWithFault, eventually, runCli, sleep, startCli } from '../helpers/cli.js';
import { httpGet } from '../helpers/http.js';
import { routineStateOf } from '../helpers/state.js';
import { testProject } from '../helpers/testdir.js';

const isRoot = process.getuid?.() === 0;
const canMount = isRoot && spawnSync('mount', ['--version']).status === 0;
const TTL_S = 4;

type Fault = 'full' | 'inodes' | 'read-only';

/** Brings the fault about; returns what undoes it. */
function breakDisk(fault: Fault, mnt: string): () => void {
  if (fault === 'read-only') {
    expect(spawnSync('mount', ['-o', 'remount,ro', mnt]).status).toBe(0);
    return () => expect(spawnSync('mount', ['-o', 'remount,rw', mnt]).status).toBe(0);
  }
  if (fault === 'full') {
    const filler = join(mnt, 'filler');
    const fd = openSync(filler, 'w');
    const block = Buffer.alloc(64 * 1024, 1);
    try {
      for (;;) writeSync(fd, block);
    } catch {
      // ENOSPC: full
    } finally {
      closeSync(fd);
    }
    return () => rmSync(filler);
  }
  const dir = join(mnt, 'fillers');
  mkdirSync(dir);
  try {
    for (let i = 0; ; i++) closeSync(openSync(join(dir, String(i)), 'w'));
  } catch {
    // ENOSPC: no inode left
  }
  return () => rmSync(dir, { recursive: true });
}

const firesIn = (state: string, id: string): HistoryEntry[] => {
  const lines: HistoryEntry[] = [];
  for (const f of [`${id}.jsonl.1`, `${id}.jsonl`]) {
    let text = '';
    try {
      text = readFileSync(join(state, 'history', f), 'utf8');
    } catch {
      continue;
    }
    for (const l of text.split('\n')) {
      if (!l.trim()) continue; // blank: an append cut short by the full disk, repaired
      const e = JSON.parse(l) as HistoryEntry & { kind?: string };
      if (typeof e.result === 'string' && e.kind !== 'summary') lines.push(e);
    }
  }
  return lines;
};

describe.skipIf(!canMount && process.env.CI !== 'true')('a scheduler on a broken state disk stays up (SPEC §3)', () => {
  it.each<Fault>(['full', 'inodes', 'read-only'])(
    '%s: up for 2 × TTL with /healthz 503 saying why, then fires again by itself; counts equal history',
    async (fault) => {
      expect(canMount, 'this test needs root and mount (CI runs as root)').toBe(true);
      const project = testProject({
        lock: { ttlSeconds: TTL_S },
        routines: [{ id: 'tick', schedule: '* * * * * *', action: 'command', run: 'echo tick' }],
      });
      const mnt = join(project, 'mnt');
      mkdirSync(mnt);
      const opts = fault === 'inodes' ? 'size=8m,nr_inodes=400,mode=0700' : 'size=8m,mode=0700';
      expect(spawnSync('mount', ['-t', 'tmpfs', '-o', opts, 'tmpfs', mnt]).status).toBe(0);
      onTestFinished(() => {
        spawnSync('umount', ['-l', mnt]);
      });
      const state = join(mnt, 'state');
      const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], {
        cwd: project,
        env: { ROUTINELY_STATE_DIR: state },
        timeoutMs: 120_000,
      });
      const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
      await s.waitFor(/\[routine\] succeeded tick/);
      expect((await httpGet(`${url}healthz`)).status).toBe(200);

      const undo = breakDisk(fault, mnt);
      const broken = s.stdout().length;
      await eventually(
        () =>
          /\[scheduler\] state folder not writable: .+; fires are held until it is writable/.test(
            s.stdout().slice(broken),
          ),
        20_000,
        'the not-writable line',
      );
      const said = s.stdout().slice(broken);
      const reason = fault === 'read-only' ? /read-only file system/ : /no space left on device/;
      expect(said).toMatch(reason);
      const health = await httpGet(`${url}healthz`);
      expect(health.status).toBe(503);
      expect(health.body).toMatch(reason);
      await sleep(2 * TTL_S * 1000);
      expect(s.child.exitCode, `scheduler exited:\n${s.stdout()}\n${s.stderr()}`).toBeNull();
      expect((await httpGet(`${url}healthz`)).status).toBe(503);
      const held = s.stdout().slice(broken);
      // said once per change, not at every tick; nothing claimed to have run
      expect(held.match(/state folder not writable/g)).toHaveLength(1);
      expect(held).not.toMatch(/\[routine\] (succeeded|failed) tick/);
      expect(held).not.toMatch(/scheduler lock lost/);

      undo();
      const fixed = s.stdout().length;
      await eventually(
        () => /\[routine\] succeeded tick/.test(s.stdout().slice(fixed)),
        15_000,
        'a fire after the fault is gone',
      );
      expect(s.stdout().slice(fixed)).toMatch(/\[scheduler\] state folder writable again; fires go on/);
      expect(await httpGet(`${url}healthz`)).toMatchObject({ status: 200, body: 'ok\n' });
      s.child.kill('SIGTERM');
      expect((await s.exited).code).toBe(0);

      const fires = firesIn(state, 'tick');
      const counts = routineStateOf(project, state).routines.tick?.counts;
      expect(counts).toEqual({
        success: fires.filter((f) => f.result === 'success').length,
        failure: fires.filter((f) => f.result === 'failure').length,
        skipped: fires.filter((f) => f.result === 'skipped').length,
      });
      // every fire recorded once
      const ids = fires.map((f) => f.closes ?? f.key ?? f.id);
      expect(new Set(ids).size).toBe(ids.length);
    },
  );

  it("the disk fills between a fire's open line and its close line: 503 and one line, no false record, the torn line repaired, recorded once there is space", async () => {
    expect(canMount, 'this test needs root and mount (CI runs as root)').toBe(true);
    const project = testProject({
      routines: [
        { id: 'long', schedule: '*/5 * * * * *', action: 'command', run: 'sleep 2.5', exclusive: false },
        { id: 'tick', schedule: '* * * * * *', action: 'command', run: 'true', exclusive: false },
      ],
    });
    const mnt = join(project, 'mnt');
    mkdirSync(mnt);
    expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=8m,mode=0700', 'tmpfs', mnt]).status).toBe(0);
    onTestFinished(() => {
      spawnSync('umount', ['-l', mnt]);
    });
    const state = join(mnt, 'state');
    const env = { ROUTINELY_STATE_DIR: state };
    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, env, timeoutMs: 120_000 });
    const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    await s.waitFor(/\[routine\] succeeded tick/);
    // long's fire has started: its open line is in its history, its command runs 2.5 s
    const begun = s.stdout().length;
    await eventually(() => /\[routine\] started long/.test(s.stdout().slice(begun)), 20_000, 'long started');
    // Its history made to end 16 bytes short of a page with a valid line (a resume of a routine
    // that is not paused), then the disk filled: its close line gets 16 bytes in, then ENOSPC.
    const file = join(state, 'history', 'long.jsonl');
    const size = statSync(file).size;
    const bare = JSON.stringify({ event: 'resumed', at: new Date().toISOString(), id: '' }).length + 1;
    let pad = (4096 - 16 - ((size + bare) % 4096) + 4096) % 4096;
    if (pad === 0) pad = 4096;
    appendFileSync(
      file,
      `${JSON.stringify({ event: 'resumed', at: new Date().toISOString(), id: 'p'.repeat(pad) })}\n`,
    );
    const recordedBefore = firesIn(state, 'long').length;
    const undo = breakDisk('full', mnt);
    const broken = s.stdout().length;
    await eventually(() => /\[routine\] succeeded long/.test(s.stdout().slice(broken)), 20_000, 'long ended');
    await eventually(() => /state folder not writable/.test(s.stdout().slice(broken)), 20_000, 'the not-writable line');
    const health = await httpGet(`${url}healthz`);
    expect(health.status).toBe(503);
    expect(health.body).toMatch(/no space left on device/);
    await sleep(3000);
    // the part of the close line that reached the file is blank now, not torn
    const tail = readFileSync(file).subarray(-16).toString('latin1');
    expect(tail).toMatch(/^ {16}$|^\n {15}$/);
    const during = s.stdout().slice(broken);
    expect(during.match(/state folder not writable/g), during).toHaveLength(1);
    expect(during).not.toMatch(/skipped long: previous run still running/);
    expect(during).not.toMatch(/could not be read \(torn/);
    // a command reading the state meanwhile warns of nothing torn either
    const list = await runCli(['routine', 'list'], { cwd: project, env });
    expect(list.stderr).not.toMatch(/torn/);

    undo();
    // long's record goes in once the disk has room again: once, with its real result (within a
    // second of the scheduler's clock: test/scheduler/scheduler.test.ts, on an injected clock)
    await eventually(() => firesIn(state, 'long').length === recordedBefore + 1, 15_000, 'long recorded');
    await eventually(() => /state folder writable again/.test(s.stdout().slice(broken)), 15_000, 'writable again');
    expect(await httpGet(`${url}healthz`)).toMatchObject({ status: 200, body: 'ok\n' });
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    const long = firesIn(state, 'long');
    expect(long.length).toBeGreaterThan(recordedBefore);
    expect(
      long.every((f) => f.result === 'success' && f.reason === null),
      JSON.stringify(long),
    ).toBe(true);
    for (const id of ['long', 'tick']) {
      expect(
        firesIn(state, id).filter((f) => /interrupted|previous run/.test(f.reason ?? '')),
        id,
      ).toEqual([]);
      const counts = routineStateOf(project, state).routines[id]?.counts;
      const f = firesIn(state, id);
      expect(counts, id).toEqual({
        success: f.filter((x) => x.result === 'success').length,
        failure: f.filter((x) => x.result === 'failure').length,
        skipped: f.filter((x) => x.result === 'skipped').length,
      });
    }
    const after = await runCli(['routine', 'list'], { cwd: project, env });
    expect(after.stderr).not.toMatch(/torn|could not be read/);
  });

  it('a lock folder of its own (ROUTINELY_LOCK_DIR) made read-only under a running scheduler: fires held and /healthz 503 for as long, never "writable again" each second on a probe of the history alone; going on once it is writable', async () => {
    expect(canMount, 'this test needs root and mount (CI runs as root)').toBe(true);
    const project = testProject({
      // (under the exec lock: each fire takes a slot in the lock folder)
      routines: [{ id: 'tick', schedule: '* * * * * *', action: 'command', run: 'true' }],
    });
    const mnt = join(project, 'mnt');
    mkdirSync(mnt);
    expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m,mode=0700', 'tmpfs', mnt]).status).toBe(0);
    onTestFinished(() => {
      spawnSync('umount', ['-l', mnt]);
    });
    const env = { ROUTINELY_LOCK_DIR: join(mnt, 'locks') };
    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, env, timeoutMs: 60_000 });
    const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    await s.waitFor(/\[routine\] succeeded tick/);
    const undo = breakDisk('read-only', mnt);
    const broken = s.stdout().length;
    await eventually(() => /state folder not writable/.test(s.stdout().slice(broken)), 20_000, 'the not-writable line');
    // a few ticks held (each second; before, each probe of the history alone said it writable)
    for (let i = 0; i < 4; i++) {
      expect((await httpGet(`${url}healthz`)).status).toBe(503);
      await sleep(800);
    }
    expect(s.stdout().slice(broken)).not.toMatch(/writable again/);
    undo();
    await eventually(() => /state folder writable again/.test(s.stdout().slice(broken)), 20_000, 'writable again');
    const again = s.stdout().length;
    await eventually(() => /\[routine\] succeeded tick/.test(s.stdout().slice(again)), 20_000, 'a tick after');
    expect((await httpGet(`${url}healthz`)).status).toBe(200);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });

  it('routine run with its lock folder read-only: 74 naming it and nothing recorded, for an exec action as for a command (before: the exec action a recorded failure, exit 1)', async () => {
    expect(canMount, 'this test needs root and mount (CI runs as root)').toBe(true);
    const project = testProject({
      exec: { tasks: [{ id: 't', run: 'true' }] },
      routines: [
        { id: 'cmd', schedule: '0 0 1 1 *', action: 'command', run: 'true' },
        { id: 'auto', schedule: '0 0 1 1 *', action: 'exec-auto' },
      ],
    });
    const mnt = join(project, 'mnt');
    mkdirSync(mnt);
    expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0700,ro', 'tmpfs', mnt]).status).toBe(0);
    onTestFinished(() => {
      spawnSync('umount', ['-l', mnt]);
    });
    const env = { ROUTINELY_LOCK_DIR: join(mnt, 'locks') };
    for (const id of ['cmd', 'auto']) {
      const r = await runCli(['routine', 'run', id], { cwd: project, env });
      expect(r.code, `${id}: ${r.stdout}${r.stderr}`).toBe(74);
      expect(r.stderr).toMatch(/read-only file system creating the lock in .*mnt\/locks/);
      expect(firesIn(join(project, '.routinely'), id)).toEqual([]);
    }
  });
});

const haveStrace = spawnSync('strace', ['-V']).status === 0;

describe.skipIf(!haveStrace && process.env.CI !== 'true')('EIO on a state folder: exit 74 naming it (SPEC §7)', () => {
  it.each([
    ['lock run', 'locks', ['lock', 'run', '--', 'sh', '-c', 'echo RAN']],
    ['exec run', 'locks', ['exec', 'run', 't']],
    ['lock status', 'locks', ['lock', 'status']],
    ['routine list', 'locks', ['routine', 'list']],
    ['routine list', 'history', ['routine', 'list']],
  ] as const)('%s with the %s folder failing', async (_name, folder, args) => {
    expect(haveStrace, 'strace is required (CI installs it)').toBe(true);
    const project = testProject({
      routines: [{ id: 'r', schedule: '0 0 1 1 *', action: 'command', run: 'true' }],
      exec: { tasks: [{ id: 't', run: 'echo RAN' }] },
    });
    // state there, and the fast paths' caches written, first
    expect((await runCli(['routine', 'run', 'r'], { cwd: project })).code).toBe(0);
    expect((await runCli(['routine', 'list'], { cwd: project })).code).toBe(0);
    expect((await runCli(['lock', 'status'], { cwd: project })).code).toBe(0);
    const dir = join(project, '.routinely', folder);
    for (const when of ['1', '2']) {
      // the history folder changed since routine-state.json was written (its stamp no longer
      // holds): the list reads the folder (with the stamp, it opens nothing there: design.md)
      if (folder === 'history') utimesSync(dir, new Date(), new Date());
      const r = cliWithFault({ cwd: project, paths: [dir], inject: `openat:error=EIO:when=${when}` }, [...args]);
      // the fault hits the first (or second) open of the folder; either 74 naming the folder, or
      // (the fault missed what mattered) a true answer — never a wrong one
      if (r.status === 74) {
        expect(r.stderr).toMatch(
          new RegExp(`input/output error [a-z ]+ ${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`),
        );
        expect(r.stdout).not.toContain('RAN');
      } else {
        expect(r.status, `when=${when}: ${r.stdout}${r.stderr}`).toBe(0);
        expect(when).toBe('2');
      }
      expect(r.stderr).not.toMatch(/unexpected error|exec busy/);
      if (when === '1') expect(r.status, `${r.stdout}${r.stderr}`).toBe(74);
    }
  });

  it('an interrupted run that cannot be read (EIO) stops exec run and exec resume with 74; never dropped, its done task never run again', async () => {
    expect(haveStrace, 'strace is required (CI installs it)').toBe(true);
    const project = testProject({
      exec: {
        tasks: [
          { id: 'a', run: 'echo a >> ran-a.txt' },
          { id: 'slow', run: 'sleep 30' },
          { id: 'after', run: 'true', dependsOn: ['slow'] },
        ],
      },
    });
    const s = startCli(['exec', 'run', '--parallel', '2'], { cwd: project });
    await s.waitFor(/succeeded a/);
    s.child.kill('SIGKILL');
    await s.exited;
    const [runId] = readdirSync(join(project, '.routinely', 'exec', 'runs'));
    const dir = join(project, '.routinely', 'exec', 'runs', runId!);
    const failing = (...args: string[]) =>
      cliWithFault(
        { cwd: project, paths: [join(dir, 'run.json'), join(dir, 'journal.jsonl')], inject: 'openat:error=EIO' },
        [...args],
      );
    for (const args of [
      ['exec', 'resume'],
      ['exec', 'run'],
      ['exec', 'status'],
    ]) {
      const r = failing(...args);
      expect(r.status, `${args.join(' ')}: ${r.stdout}${r.stderr}`).toBe(74);
      expect(r.stderr).toMatch(/input\/output error reading \S+run\.json/);
    }
    // with tasks.json lost too: the rebuild stops the same way, it does not pass the run over
    rmSync(join(project, '.routinely', 'exec', 'tasks.json'));
    expect(failing('exec', 'run').status).toBe(74);
    expect(readFileSync(join(project, 'ran-a.txt'), 'utf8')).toBe('a\n');
    // readable again: the run is folded in as interrupted, and a stays done
    const after = await runCli(['exec', 'run'], { cwd: project });
    expect(after.stdout).toMatch(/nothing to run: 1 succeeded, 2 interrupted/);
    expect(readFileSync(join(project, 'ran-a.txt'), 'utf8')).toBe('a\n');
  });

  it("the program's own entry file cannot be read (EIO): exit 74 naming it, no stack trace", async () => {
    expect(haveStrace, 'strace is required (CI installs it)').toBe(true);
    const entry = join(dirname(CLI), 'cli-main.cjs');
    const r = cliWithFault({ paths: [entry], inject: 'openat:error=EIO' }, ['--version']);
    expect(r.status, r.stderr).toBe(74);
    expect(r.stderr).toBe(`routinely: cannot read its own program ${entry} (EIO); reinstall routinely\n`);
  });

  it.each([
    ['EIO', 'reinstall routinely'],
    ['EMFILE', 'no file descriptor was left: raise the limit (ulimit -n) or close some'],
  ])(
    "the full path's program file cannot be read (%s): exit 74 naming it and what to do, no stack trace",
    (errno, remedy) => {
      expect(haveStrace, 'strace is required (CI installs it)').toBe(true);
      const program = join(dirname(CLI), 'cli-program.cjs');
      const project = testProject({ exec: { tasks: [{ id: 't', run: 'true' }] } });
      const r = cliWithFault({ paths: [program], inject: `openat:error=${errno}`, cwd: project }, ['exec', 'status']);
      expect(r.status, r.stderr).toBe(74);
      expect(r.stderr).toBe(`routinely: cannot read its own program ${program} (${errno}); ${remedy}\n`);
    },
  );

  it("exec run whose first run.json cannot be written: 74, nothing ran, the run recorded ABORTED (not a dead owner's), and exec resume runs it", async () => {
    expect(haveStrace, 'strace is required (CI installs it)').toBe(true);
    const project = testProject({ exec: { tasks: [{ id: 't', run: 'echo RAN >> ran.txt' }] } });
    // the K-th rename of the command fails: the one that puts run.json in place is among the first
    let failed: ReturnType<typeof spawnSync> | null = null;
    for (let when = 1; when <= 8 && !failed; when++) {
      rmSync(join(project, '.routinely'), { recursive: true, force: true });
      rmSync(join(project, 'ran.txt'), { force: true });
      expect((await runCli(['register'], { cwd: project })).code).toBe(0);
      const r = cliWithFault({ cwd: project, trace: 'rename', inject: `rename:error=EIO:when=${when}` }, [
        'exec',
        'run',
      ]);
      if (/run\.json/.test(r.stderr)) failed = r;
    }
    expect(failed, 'no rename of run.json was met').not.toBeNull();
    expect(failed!.status, String(failed!.stderr)).toBe(74);
    expect(failed!.stderr).toMatch(
      /^routinely: input\/output error writing \S+run\.json: nothing ran; run (r-\S+) is recorded ABORTED, and `routinely exec resume \1` runs it once the state folder takes writes again\n$/,
    );
    expect(existsSync(join(project, 'ran.txt'))).toBe(false);
    const runs = await runCli(['exec', 'runs'], { cwd: project });
    expect(runs.stdout).toMatch(/ABORTED\s+0\/1 succeeded\s+STATE_WRITE_FAILED/);
    expect(runs.stdout).not.toMatch(/OWNER_DEAD/);
    const resumed = await runCli(['exec', 'resume'], { cwd: project });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(readFileSync(join(project, 'ran.txt'), 'utf8')).toBe('RAN\n');
  });
});

// `exec run` fsyncs its run's files; `routine run` fsyncs nothing (its facts are history appends,
// routine-state.json a view of them written atomically, docs/state.md): its writes that can
// fail in place are renames (the view into place, the lock's view aside on release).
describe.skipIf(!haveStrace && process.env.CI !== 'true')(
  'EIO at every fsync or rename of a run: 74 only when the work did not run, and every fault said (SPEC §7)',
  () => {
    it.each([
      ['exec run, each fsync', ['exec', 'run', 't'], 'fsync'],
      ['routine run, each rename', ['routine', 'run', 'r'], 'rename'],
    ] as const)('%s', async (_name, args, call) => {
      expect(haveStrace, 'strace is required (CI installs it)').toBe(true);
      const project = testProject({
        routines: [{ id: 'r', schedule: '0 0 1 1 *', action: 'command', run: 'echo RAN >> ran.txt' }],
        exec: { tasks: [{ id: 't', run: 'echo RAN >> ran.txt' }] },
      });
      const ran = join(project, 'ran.txt');
      const outcomes: string[] = [];
      // the K-th such call of the command fails with EIO, for every K the command reaches
      for (let when = 1; when <= 16; when++) {
        rmSync(join(project, '.routinely'), { recursive: true, force: true });
        rmSync(ran, { force: true });
        const trace = join(project, 'trace');
        const r = cliWithFault(
          { cwd: project, output: trace, trace: `${call}`, inject: `${call}:error=EIO:when=${when}` },
          [...args],
        );
        // past the command's last such call nothing is injected: done
        if (!readFileSync(trace, 'utf8').includes('(INJECTED)')) break;
        const didRun = existsSync(ran);
        outcomes.push(`${when}: exit ${r.status}, ${didRun ? 'ran' : 'did not run'}`);
        expect(r.stderr, `when=${when}`).not.toMatch(/unexpected error/);
        if (!didRun) {
          expect(r.status, `when=${when}: ${r.stderr}`).toBe(74);
        } else {
          // the work ran and succeeded: its own exit code, never "the work did not run"
          expect(r.status, `when=${when}: ${r.stderr}`).toBe(0);
          expect(readFileSync(ran, 'utf8')).toBe('RAN\n');
        }
        // the fault is said, with the file or folder: never swallowed without a word
        expect(r.stderr, `when=${when}: ${r.stdout}`).toMatch(
          /input\/output error (writing|syncing the folder|appending to|moving aside the (lock view|heartbeat file)|renaming the (spare heartbeat file|history mark)) \//,
        );
      }
      expect(
        outcomes.some((o) => o.endsWith('ran')),
        outcomes.join('\n'),
      ).toBe(true);
    });
  },
);

describe.skipIf(!haveStrace && process.env.CI !== 'true')(
  "EIO on what a run survives: said once with the path, the work's own exit code (SPEC §7)",
  () => {
    it('lock run: the K-th link (the slot, the view, the release mark) fails with EIO', async () => {
      expect(haveStrace, 'strace is required (CI installs it)').toBe(true);
      const project = testProject({});
      const ran = join(project, 'ran.txt');
      const seen: string[] = [];
      for (let when = 1; when <= 8; when++) {
        rmSync(join(project, '.routinely'), { recursive: true, force: true });
        rmSync(ran, { force: true });
        const trace = join(project, 'trace');
        const r = cliWithFault(
          { cwd: project, output: trace, trace: 'link,linkat', inject: `link,linkat:error=EIO:when=${when}` },
          ['lock', 'run', '--', 'sh', '-c', 'echo RAN >> ran.txt'],
        );
        if (!readFileSync(trace, 'utf8').includes('(INJECTED)')) break;
        const didRun = existsSync(ran);
        expect(r.status, `when=${when}: ${r.stderr}`).toBe(didRun ? 0 : 74);
        expect(r.stderr, `when=${when}`).toMatch(/input\/output error [a-z ]+ \//);
        expect(r.stderr.match(/input\/output error/g), `when=${when}: said once`).toHaveLength(1);
        seen.push(r.stderr.match(/input\/output error ([a-z ]+) \//)![1]!);
      }
      // the slot (nothing ran), the view and the release mark (it ran) were each hit
      expect(seen).toEqual(
        expect.arrayContaining(['creating the lock in', 'linking the lock view', 'linking the release mark']),
      );
    });

    it("routine run: a frame of the routine's log cannot be written", async () => {
      expect(haveStrace, 'strace is required (CI installs it)').toBe(true);
      const project = testProject({
        routines: [{ id: 'r', schedule: '0 0 1 1 *', action: 'command', run: 'echo RAN' }],
      });
      expect((await runCli(['routine', 'run', 'r'], { cwd: project })).code).toBe(0);
      const log = join(project, '.routinely', 'logs', 'r.log');
      // its first write through the log: the start frame
      const r = cliWithFault(
        { cwd: project, paths: [log], trace: 'write,writev', inject: 'write,writev:error=EIO:when=1' },
        ['routine', 'run', 'r'],
      );
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/succeeded r/);
      expect(r.stderr).toMatch(/input\/output error appending to \S+r\.log; a line of routinely's own/);
    });
  },
);
