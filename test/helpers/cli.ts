import { spawn, spawnSync, type ChildProcess, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { onTestFinished } from 'vitest';

export const CLI = resolve(import.meta.dirname, '../../dist/cli.cjs');
export const FIXTURES = resolve(import.meta.dirname, '../fixtures');

export interface RunOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  timeoutMs?: number;
  /** Registers clean-up at the end of the test: concurrent tests must pass their own context's
   * `onTestFinished` (the global one may belong to another test running at the same time). */
  onFinished?: (fn: () => void) => void;
}

/** Child environment: ours minus the CA bundle that slows every node start (FACTS). */
export function childEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', ...extra };
  delete env.NODE_EXTRA_CA_CERTS;
  // `npm test` sets npm_* for vitest; the CLI under test is started by us, not by npm
  for (const k of Object.keys(env)) if (/^npm_/i.test(k) && !(k in extra)) delete env[k];
  for (const [k, v] of Object.entries(extra)) if (v === undefined) delete env[k];
  return env;
}

export interface Spawned {
  child: ChildProcess;
  pid: number;
  stdout(): string;
  stderr(): string;
  /** Resolves when stdout+stderr match `pattern`; rejects when the process exits first. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function start(file: string, args: string[], opts: RunOptions = {}): Spawned {
  const child = spawn(process.execPath, [file, ...args], {
    cwd: opts.cwd,
    env: childEnv(opts.env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let errText = '';
  const waiters = new Set<() => void>();
  const notify = (): void => {
    for (const w of waiters) w();
  };
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    notify();
  });
  child.stderr!.on('data', (d: Buffer) => {
    errText += d.toString();
    notify();
  });
  // 'exit', not 'close': an orphaned grandchild may keep our pipes open long after the
  // process itself ended. Its own output is drained until 'close' or a short moment.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    child.on('exit', (code, signal) => {
      const drained = new Promise<void>((d) => {
        child.on('close', () => d());
        setTimeout(d, 300);
      });
      void drained.then(() => {
        notify();
        res({ code, signal });
      });
    }),
  );
  let done = false;
  void exited.then(() => {
    done = true;
  });
  (opts.onFinished ?? onTestFinished)(() => {
    if (!done) child.kill('SIGKILL');
  });
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  void exited.then(() => clearTimeout(killer));
  return {
    child,
    pid: child.pid!,
    stdout: () => out,
    stderr: () => errText,
    exited,
    waitFor(pattern, waitMs = 20_000) {
      return new Promise((res, rej) => {
        const check = (): void => {
          const m = (out + errText).match(pattern);
          if (m) {
            cleanup();
            res(m);
          } else if (done) {
            cleanup();
            rej(new Error(`process exited before ${pattern}; stdout=${out} stderr=${errText}`));
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          rej(new Error(`timed out waiting for ${pattern}; stdout=${out} stderr=${errText}`));
        }, waitMs);
        const cleanup = (): void => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
  };
}

export function startCli(args: string[], opts: RunOptions = {}): Spawned {
  return start(CLI, args, opts);
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export async function runCli(args: string[], opts: RunOptions = {}): Promise<RunResult> {
  const p = startCli(args, opts);
  const { code, signal } = await p.exited;
  return { code, signal, stdout: p.stdout(), stderr: p.stderr() };
}

export async function runFixture(name: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  const p = start(resolve(FIXTURES, name), args, opts);
  const { code, signal } = await p.exited;
  return { code, signal, stdout: p.stdout(), stderr: p.stderr() };
}

/** Whether a process exists and is not a zombie (Linux). */
export function processRuns(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `fn` until it returns true (behaviour, not timing: the limit only prevents a hang). */
export async function eventually(
  fn: () => boolean | Promise<boolean>,
  limitMs = 15_000,
  what = 'condition',
  detail?: () => string,
): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}${detail ? `\n${detail()}` : ''}`);
    await sleep(20);
  }
}

/** Waits until `file` holds a whole line matching `pattern` and returns the match. A shell's
 * `echo … > file` creates the file before its write lands, so a test that waits for the file
 * alone can read it empty. */
export async function lineIn(
  file: string,
  pattern: RegExp,
  limitMs = 15_000,
  what = `a line in ${file}`,
): Promise<RegExpExecArray> {
  const whole = new RegExp(`${pattern.source}\\n`, pattern.flags.replace('g', ''));
  let found: RegExpExecArray | null = null;
  await eventually(
    () => {
      found = existsSync(file) ? whole.exec(readFileSync(file, 'utf8')) : null;
      return found !== null;
    },
    limitMs,
    what,
  );
  return found!;
}

/** Waits until the exec lock's holder has renewed its lease by a heartbeat of its timer: the
 * heartbeat moves past the first one this sees (a child started or a run named writes one at
 * once, so `heartbeat_at > created_at` alone proves nothing). What a test needs before it cuts
 * the holder off: a lease that was kept, not one just taken. */
export async function heartbeatWritten(cwd: string, env: Record<string, string>, limitMs = 15_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  let first: number | null = null;
  for (;;) {
    const r = await runCli(['lock', 'status', '--json'], { cwd, env });
    const rec = (JSON.parse(r.stdout || 'null') as { record?: { heartbeat_at: number } | null } | null)?.record;
    if (rec && first === null) first = rec.heartbeat_at;
    else if (rec && first !== null && rec.heartbeat_at > first) return;
    if (Date.now() > deadline)
      throw new Error(`gave up waiting for a heartbeat of the exec lock's holder:\n${r.stdout}${r.stderr}`);
    await sleep(50);
  }
}

/** A fault strace injects into the CLI (SPEC §4.15: stall and break every step). */
export interface StraceFault {
  /** `-e inject=…`: `statx:error=EIO:when=2`, `close:signal=KILL:when=1` */
  inject: string;
  /** `-e trace=…`, the calls the `when` of `inject` counts (default: every call) */
  trace?: string;
  /** Only calls on these paths (and descriptors of them) are traced and injected (`-P`). */
  paths?: string[];
  /** Where strace writes its trace (default: nowhere). */
  output?: string;
  cwd?: string;
}

/** strace's arguments that run `routinely ARGS` with `fault`. */
function straceArgv(fault: StraceFault, args: string[]): string[] {
  const argv = ['-f', '-qq', '-o', fault.output ?? '/dev/null'];
  for (const p of fault.paths ?? []) argv.push('-P', p);
  if (fault.trace) argv.push('-e', `trace=${fault.trace}`);
  argv.push('-e', `inject=${fault.inject}`, process.execPath, CLI, ...args);
  return argv;
}

/** `routinely ARGS` under strace with `fault`, to its end (at most a minute). */
export function cliWithFault(fault: StraceFault, args: string[]): SpawnSyncReturns<string> {
  return spawnSync('strace', straceArgv(fault, args), {
    ...(fault.cwd ? { cwd: fault.cwd } : {}),
    env: childEnv(),
    encoding: 'utf8',
    timeout: 60_000,
  });
}

/** `routinely ARGS` under strace with `fault`, started: for a test that acts while a call is
 * held (`rename:delay_enter=1500000:when=1`). stdin is ignored unless `stdio` says otherwise. */
export function startCliWithFault(
  fault: StraceFault,
  args: string[],
  stdio: ('ignore' | 'pipe')[] = ['ignore', 'pipe', 'pipe'],
): ChildProcess {
  return spawn('strace', straceArgv(fault, args), {
    ...(fault.cwd ? { cwd: fault.cwd } : {}),
    env: childEnv(),
    stdio: stdio as ['ignore' | 'pipe', 'ignore' | 'pipe', 'ignore' | 'pipe'],
  });
}
