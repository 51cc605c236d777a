// Running one command (as execa does it): one result type for every outcome, the
// reason a process ended recorded before it is killed, each child in its own process group
// (a new session) so a timeout or a stop reaches its grandchildren too.
// (Over 300 lines: spawn, output capture, time-outs and the kill of the group share one child's
// state.)

import type { StdioOptions } from 'node:child_process';
import { createRequire } from 'node:module';
import { constants } from 'node:os';
import { errnoCode } from '../errors.js';
import { quietly, startedSessionLeader, systemProbe } from '../process/identity.js';
import { CappedOutput } from './capped-output.js';
import { monotonicMs } from '../clock.js';

export interface ProcessSpec {
  /** argv[0] and arguments; with `shell: true`, `file` is a shell string run by `sh -c`. */
  file: string;
  args?: readonly string[];
  shell?: boolean;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  stdio?: StdioOptions;
  timeoutMs?: number;
  /** Stops the process (its whole group): SIGTERM, then SIGKILL after `killGraceMs` (read when
   * the stop begins: a lease running out leaves less time than a user's Ctrl-C). */
  signal?: AbortSignal;
  killGraceMs?: number | (() => number);
  /** Called synchronously right after spawn, before anything else can happen. */
  onSpawn?: (pid: number) => void;
  /** With stdio 'pipe' for stdout/stderr: every chunk of output, in order. */
  onOutput?: (chunk: Buffer) => void;
  /** Write stdout and stderr to this descriptor, at most `capBytes` of them (capped-output.ts).
   * They share one pipe, in the order they were written, as cron and systemd give a job one
   * stream: a shell command starts with `exec 2>&1;` (on its first line, so the line numbers of
   * its messages do not change), and stdio is set accordingly. The result comes at the command's
   * exit, not when the pipe closes (a background job may hold it): `endOutput` then waits. */
  output?: {
    fd: number;
    capBytes: number;
    /** runLogBytes as configured, when this attempt has less of it */ runLogBytes?: number;
  };
}

export type EndReason = 'exited' | 'timeout' | 'canceled' | 'spawn-error';

export interface ProcessResult {
  /** Exit status; for a signal death the shell convention 128 + signal number. */
  exitCode: number;
  /** The signal that ended the process, if any. */
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  canceled: boolean;
  /** Why we stopped it, when we did (the abort reason's text, or the timeout). */
  reason: EndReason;
  durationMs: number;
  /** Spawn failure (ENOENT, EACCES). */
  error?: string;
  /** Its errno code (`EMFILE`: out of a resource, a start that may work a moment later). */
  errorCode?: string;
  pid: number | null;
  /** With `output`: call once what is left of the group is ended (stopGroup); waits up to
   * `waitMs` for the pipe to close (a process that left the group may still hold it: it is
   * closed then), writes the kept tail, and resolves to how many bytes were left out. */
  endOutput?: (waitMs?: number) => Promise<number>;
  /** With `output`, once it ended: what could not be written to the log (a full disk), or null. */
  outputLost?: () => { bytes: number; code: string } | null;
}

/** Variables routinely holds that tasks and routine commands do not get unless the config lists
 * them in `passEnv` (SPEC §12): the database URL with its password and the HTTP token. */
export const WITHHELD_ENV = ['ROUTINELY_DATABASE_URL', 'ROUTINELY_HTTP_TOKEN'];

export function commandEnv(base: NodeJS.ProcessEnv, passEnv: readonly string[]): NodeJS.ProcessEnv {
  const env = { ...base };
  for (const name of WITHHELD_ENV) if (!passEnv.includes(name)) delete env[name];
  // a notification command's own marks (notify/ sets them again for those): a routine or
  // task started from one (a `routine run` in a failure hook) is no notification, and is found
  // and stopped as its run's (fire/stop-request.ts, file-lock/orphans.ts)
  delete env[NOTIFY_MARK];
  delete env.ROUTINELY_NOTIFY_ID;
  return env;
}

/** The variable only a notification command has (its event). */
export const NOTIFY_MARK = 'ROUTINELY_EVENT';

/** The commands' environment per config, copied from `base` once for each (a reload may change
 * passEnv). */
export function commandEnvOf(
  base: NodeJS.ProcessEnv,
): (p: { config: { passEnv: readonly string[] } }) => NodeJS.ProcessEnv {
  const envFor = new WeakMap<object, NodeJS.ProcessEnv>();
  return (p) => {
    let env = envFor.get(p);
    if (!env) envFor.set(p, (env = commandEnv(base, p.config.passEnv)));
    return env;
  };
}

export function signalExitCode(signal: NodeJS.Signals | null): number {
  const n = signal ? (constants.signals as Record<string, number>)[signal] : undefined;
  return 128 + (n ?? 0);
}

/** Signals a whole process group, ignoring a group that is already gone. */
export function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    quietly(() => process.kill(-pid, signal));
  } catch (err) {
    if (errnoCode(err) !== 'ESRCH') throw err;
  }
}

/** Whether the group has any member at all (zombies included): kill(-pgid, 0). */
function anyInGroup(pid: number): boolean {
  try {
    quietly(() => process.kill(-pid, 0));
    return true;
  } catch (err) {
    return errnoCode(err) !== 'ESRCH';
  }
}

/** Whether any live process of the group remains. kill(-pgid, 0) answers in a microsecond but
 * counts zombies (a child whose parent died stays one until init reaps it, which can take a
 * while); on Linux a positive answer is confirmed from /proc, where zombies do not count. */
export function groupExists(pid: number): boolean {
  try {
    quietly(() => process.kill(-pid, 0));
  } catch (err) {
    return errnoCode(err) !== 'ESRCH';
  }
  return process.platform === 'linux' ? systemProbe().groupMembers(pid).length > 0 : true;
}

/** Live members of group `pid` (Linux, from /proc); on other systems 1 when the group answers
 * a signal, else 0. */
export function groupSize(pid: number): number {
  if (process.platform === 'linux') return systemProbe().groupMembers(pid).length;
  return groupExists(pid) ? 1 : 0;
}

/** Ends what is left of a command we started in its own session (`detached`) and reaped: its
 * process group, and every other group of its session — job-control children (`set -m; cmd &`)
 * that moved to groups of their own (SPEC §4.11). SIGTERM, then SIGKILL after `graceMs`, all
 * groups at once. Returns how many processes were left. `ranMs`: how long the command ran, when
 * known (a short run's session is looked for cheaply). */
export async function stopGroup(pid: number, graceMs: number, ranMs?: number): Promise<number> {
  const escaped = process.platform === 'linux' ? (systemProbe().sessionGroups?.(pid, ranMs) ?? []) : [];
  if (escaped.length === 0) return stopOneGroup(pid, graceMs);
  const left = await Promise.all([pid, ...escaped].map((g) => stopOneGroup(g, graceMs)));
  return left.reduce((a, b) => a + b, 0);
}

/** Ends what is left of one process group. Call it only for a group of a command we started:
 * while members remain, the kernel gives no other process that group id. */
async function stopOneGroup(pid: number, graceMs: number): Promise<number> {
  // kill(-pgid, 0) answers in a microsecond: the usual case, an empty group, never scans /proc
  if (!anyInGroup(pid)) return 0;
  const left = groupSize(pid);
  if (left === 0) return 0;
  if (graceMs <= 0) {
    killGroup(pid, 'SIGKILL');
    return left;
  }
  killGroup(pid, 'SIGTERM');
  const deadline = monotonicMs() + graceMs;
  while (groupExists(pid) && monotonicMs() < deadline) await new Promise((r) => setTimeout(r, 20));
  if (groupExists(pid)) killGroup(pid, 'SIGKILL');
  return left;
}

/** `ended 2 leftover processes of the command's group` */
export function leftoverMessage(n: number, what = "the command's group"): string {
  return `ended ${n} leftover process${n === 1 ? '' : 'es'} of ${what}`;
}

// node:child_process (with node:net and the stream machinery) only once something is spawned:
// `lock status` and the other short commands that share this module never pay for it.
const lazyRequire = createRequire(import.meta.url);

/** What `ChildProcess#spawn` takes: `child_process.spawn`'s options once it has normalized them. */
interface SpawnCall {
  file: string;
  args: string[];
  cwd: string | undefined;
  envPairs: string[];
  stdio: StdioOptions | { type?: string; handle?: { close(): void } }[];
  detached: true;
  windowsHide: false;
  windowsVerbatimArguments: false;
}

/** `child_process.spawn(file, args, { cwd, env, stdio, detached: true })`, less one descriptor leak:
 * out of descriptors (EMFILE, ENFILE) after libuv made a task's output pipe, Node returns without
 * closing the pipe's end it keeps (its `ChildProcess#spawn` gives up before it sets up the stdio
 * "because we won't be able to", libuv having set it up all the same), so each start that failed
 * for want of descriptors kept one more, and a run under a low `ulimit -n` ran fewer tasks at a
 * time after each until none could start (a scheduler the same over days). So the call is the one
 * `spawn` makes, on options kept here, whose pipes are closed when it fails that way. */
export function spawnDetached(
  file: string,
  args: readonly string[],
  options: { cwd?: string | undefined; env?: NodeJS.ProcessEnv | undefined; stdio: StdioOptions },
): import('node:child_process').ChildProcess {
  const env = options.env ?? process.env;
  const envPairs: string[] = [];
  for (const key in env) {
    const value = env[key];
    if (value !== undefined) envPairs.push(`${key}=${value}`);
  }
  const call: SpawnCall = {
    file,
    args: [file, ...args],
    cwd: options.cwd,
    envPairs,
    stdio: options.stdio,
    detached: true,
    windowsHide: false,
    windowsVerbatimArguments: false,
  };
  // (as spawn refuses them: no C string holds a NUL; the configuration refuses them first)
  for (const text of [file, ...args, ...envPairs, options.cwd ?? '']) {
    if (text.includes('\0'))
      throw Object.assign(new TypeError(`an argument, the working folder or the environment holds a NUL byte`), {
        code: 'ERR_INVALID_ARG_VALUE',
      });
  }
  const { ChildProcess } = lazyRequire('node:child_process') as typeof import('node:child_process');
  const child = new ChildProcess() as import('node:child_process').ChildProcess & { spawn(o: SpawnCall): number };
  const err = child.spawn(call);
  if (err !== 0 && child.pid === undefined && child.stdout == null && child.stderr == null && child.stdin == null) {
    // (the stdio as ChildProcess#spawn left it: one entry a descriptor, with a handle for a pipe)
    for (const entry of call.stdio as { type?: string; handle?: { close(): void } }[])
      if (entry?.type === 'pipe') entry.handle?.close();
  }
  return child;
}

export function runProcess(spec: ProcessSpec): Promise<ProcessResult> {
  const started = monotonicMs();
  const grace = (): number =>
    typeof spec.killGraceMs === 'function' ? spec.killGraceMs() : (spec.killGraceMs ?? 5000);
  return new Promise((resolve) => {
    let reason: EndReason = 'exited';
    let done = false;
    let killTimer: NodeJS.Timeout | undefined;
    let timeoutTimer: NodeJS.Timeout | undefined;
    const out = spec.output;
    const capped = out ? new CappedOutput(out.fd, out.capBytes, out.runLogBytes) : null;
    // With `output`, stderr joins stdout in the shell; what the shell says before that (a syntax
    // error on the first line) goes to the log directly, or through its own pipe to be echoed.
    const stdio: StdioOptions = out
      ? ['ignore', 'pipe', spec.shell && !spec.onOutput ? out.fd : 'pipe']
      : (spec.stdio ?? 'inherit');
    const file = out && spec.shell ? `exec 2>&1; ${spec.file}` : spec.file;
    const program = spec.shell ? '/bin/sh' : spec.file;
    // Out of descriptors or processes (EMFILE, ENFILE, EAGAIN, ENOMEM), spawn throws, or returns
    // a child without its pipes that emits 'error' later: either is this command's failure to
    // start, never an exception that takes its caller (a scheduler) down.
    let child: import('node:child_process').ChildProcess;
    try {
      child = spec.shell
        ? spawnDetached('/bin/sh', ['-c', file], { cwd: spec.cwd, env: spec.env, stdio })
        : spawnDetached(file, spec.args ?? [], { cwd: spec.cwd, env: spec.env, stdio });
    } catch (err) {
      resolve({
        exitCode: 127,
        signal: null,
        error: `${program}: ${systemMessage(err as Error)}`,
        ...errorCodeOf(err),
        reason: 'spawn-error',
        timedOut: false,
        canceled: false,
        durationMs: monotonicMs() - started,
        pid: null,
        ...(capped ? { endOutput: async () => capped.end(), outputLost: () => capped.lost() } : {}),
      });
      return;
    }
    const pid = child.pid ?? null;
    // (not started for another cause, EAGAIN: its pipes were set up, and are closed here)
    if (pid === null) for (const s of [child.stdin, child.stdout, child.stderr]) s?.destroy();
    let spawnError: Error | null = null;
    child.once('error', (err) => {
      if (pid === null) spawnError = err;
    });
    const streams = (pid === null ? [] : [child.stdout, child.stderr]).filter(
      (s): s is NonNullable<typeof s> => s != null,
    );
    const onChunk = (chunk: Buffer): void => {
      capped?.write(chunk);
      spec.onOutput?.(chunk);
    };
    for (const s of streams) s.on('data', onChunk);
    const closed = Promise.all(
      streams.map((s) => new Promise<void>((r) => (s.closed ? r() : s.once('close', () => r())))),
    );
    const endOutput = capped
      ? async (waitMs = 1000): Promise<number> => {
          let timer: NodeJS.Timeout | undefined;
          const late = new Promise<void>((r) => (timer = setTimeout(r, pid === null ? 0 : waitMs)));
          await Promise.race([closed, late]);
          clearTimeout(timer);
          for (const s of streams) s.destroy();
          return capped.end();
        }
      : undefined;
    if (pid !== null) {
      startedSessionLeader(pid); // spawned `detached`: the leader of a session of its own
      spec.onSpawn?.(pid);
    }

    const stop = (why: EndReason): void => {
      if (reason !== 'exited' || pid === null) return;
      // it ended on its own a moment before (its exit not seen yet: this process was stopped, or
      // busy): the result is its own — a success stays one; what its group left is ended after
      if (systemProbe().inspect(pid).state === 'dead') return;
      reason = why; // recorded before the kill, so the result says why
      const wait = grace();
      if (wait <= 0) {
        killGroup(pid, 'SIGKILL');
        return;
      }
      killGroup(pid, 'SIGTERM');
      killTimer = setTimeout(() => killGroup(pid, 'SIGKILL'), wait);
    };
    const onAbort = (): void => stop('canceled');
    if (spec.signal?.aborted) onAbort();
    else spec.signal?.addEventListener('abort', onAbort, { once: true });
    if (spec.timeoutMs !== undefined) timeoutTimer = setTimeout(() => stop('timeout'), spec.timeoutMs);

    const finish = (result: Omit<ProcessResult, 'durationMs' | 'pid' | 'timedOut' | 'canceled' | 'reason'>): void => {
      if (done) return;
      done = true;
      clearTimeout(killTimer);
      clearTimeout(timeoutTimer);
      spec.signal?.removeEventListener('abort', onAbort);
      if (pid !== null && reason !== 'exited') killGroup(pid, 'SIGKILL'); // leftovers of a stopped group
      resolve({
        ...result,
        ...(endOutput ? { endOutput, outputLost: () => capped!.lost() } : {}),
        reason,
        timedOut: reason === 'timeout',
        canceled: reason === 'canceled',
        durationMs: monotonicMs() - started,
        pid,
      });
    };
    const failedToStart = (err: Error): void => {
      reason = 'spawn-error';
      finish({ exitCode: 127, signal: null, error: `${program}: ${systemMessage(err)}`, ...errorCodeOf(err) });
    };
    if (pid === null) {
      // errors after a successful spawn are reported by 'close'
      if (spawnError) failedToStart(spawnError);
      else child.once('error', failedToStart);
      return;
    }
    // Through a pipe the result comes at exit: a background job that holds the pipe would
    // otherwise keep 'close' (and the group's clean-up) waiting for it.
    child.once(capped ? 'exit' : 'close', (code: number | null, signal: NodeJS.Signals | null) => {
      finish({ exitCode: signal ? signalExitCode(signal) : (code ?? 0), signal });
    });
  });
}

const errorCodeOf = (err: unknown): { errorCode?: string } => {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return typeof code === 'string' ? { errorCode: code } : {};
};

/** Out of descriptors, processes or memory: a start that may work once another process ends. */
export const OUT_OF_RESOURCE = new Set(['EMFILE', 'ENFILE', 'EAGAIN', 'ENOMEM']);

/** The C library's words for why a program could not be started (what flock and a shell say:
 * "No such file or directory"), not Node's `spawn x ENOENT`. */
export function systemMessage(err: Error): string {
  const WORDS: Record<string, string> = {
    ENOENT: 'No such file or directory',
    EACCES: 'Permission denied',
    EPERM: 'Operation not permitted',
    ENOEXEC: 'Exec format error',
    ENOTDIR: 'Not a directory',
    E2BIG: 'Argument list too long',
    ELOOP: 'Too many levels of symbolic links',
    EISDIR: 'Is a directory',
    // out of a resource: the code too, so a scheduler can say it once per cause
    EMFILE: 'Too many open files (EMFILE)',
    ENFILE: 'Too many open files in system (ENFILE)',
    EAGAIN: 'Resource temporarily unavailable (EAGAIN)',
    ENOMEM: 'Cannot allocate memory (ENOMEM)',
  };
  const code = (err as NodeJS.ErrnoException).code;
  return (code && WORDS[code]) ?? err.message;
}
