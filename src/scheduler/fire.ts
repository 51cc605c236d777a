// Firing one routine: its action runs as a child process of the same CLI (SPEC §6), so a crash
// in a routine never takes the scheduler down. The child takes the exec lock itself
// (`--if-busy skip` from the scheduler) and reports its outcome over an IPC channel, because a
// busy skip and a success both exit 0. Its stdout and stderr go to `<stateDir>/logs/<id>.log`.

import { spawn } from 'node:child_process';
import { closeSync, constants, openSync, renameSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Clock } from '../clock.js';
import type { Project } from '../config/load.js';
import type { RoutineDef } from '../config/schema.js';
import { killGroup } from '../exec/process.js';
import { newRunId } from '../exec/run-state.js';
import { randomHex } from '../lock/files.js';
import type { IfBusy } from '../lock/lease.js';
import { openAppend } from '../state/durable.js';
import { ensureStateDir } from '../state/json-file.js';
import type { Fire, RoutineResult } from '../state/routine-state.js';

export interface CliCommand {
  /** The node binary and the CLI script that the child runs. */
  node: string;
  script: string;
}

export interface FireOptions {
  project: Project;
  routine: RoutineDef;
  cli: CliCommand;
  clock: Clock;
  scheduledAt: Date;
  ifBusy: IfBusy;
  waitTimeoutMs?: number;
  /** Aborting it stops the child (SIGTERM to its group, SIGKILL after `killGraceMs`); a string
   * abort reason becomes the recorded reason. */
  signal?: AbortSignal;
  killGraceMs?: number;
  env?: NodeJS.ProcessEnv;
  /** The child holds the exec lock and has begun. */
  onStarted?: () => void;
}

export interface FireResult extends Fire {
  /** The child's own exit code (75 for a busy `--if-busy fail`). */
  child_exit: number;
}

const LOG_ROTATE_BYTES = 4 * 1024 * 1024;

/** The child's argv for a routine's action. */
export function actionArgs(routine: RoutineDef, configPath: string, ifBusy: IfBusy, waitTimeoutMs?: number): string[] {
  const common = ['--if-busy', ifBusy, '--routine', routine.id];
  if (ifBusy === 'wait' && waitTimeoutMs !== undefined) common.push('--wait-timeout', String(waitTimeoutMs / 1000));
  const timeout = routine.timeoutSeconds !== undefined ? ['--timeout', String(routine.timeoutSeconds)] : [];
  switch (routine.action) {
    case 'exec-auto':
      return ['--config', configPath, 'exec', 'run', ...common, ...timeout];
    case 'exec-resume':
      return ['--config', configPath, 'exec', 'resume', ...common, ...timeout];
    case 'register':
      return ['--config', configPath, 'register', ...common];
    case 'command':
      return ['--config', configPath, 'lock', 'run', ...common, '--', '/bin/sh', '-c', routine.run!];
  }
}

function openRoutineLog(project: Project, id: string): number {
  const dir = join(project.stateDir, 'logs');
  ensureStateDir(dir);
  const path = join(dir, `${id}.log`);
  try {
    if (statSync(path).size > LOG_ROTATE_BYTES) renameSync(path, `${path}.1`);
  } catch {
    // no log yet
  }
  return openAppend(path);
}

export function fireRoutine(o: FireOptions): Promise<FireResult> {
  const { routine, clock } = o;
  const startedMs = clock.now();
  const started = performance.now();
  // A command routine's fire gets its own run id (SPEC §6: ROUTINELY_RUN_ID); exec actions
  // report the id of the exec run they create.
  const runId = routine.action === 'command' ? newRunId(startedMs, randomHex(2)) : null;
  const logFd = openRoutineLog(o.project, routine.id);
  return new Promise((resolve) => {
    let outcome: { outcome: RoutineResult; reason: string | null; run_id: string | null } | null = null;
    let stopped: string | null = null;
    let killTimer: NodeJS.Timeout | undefined;
    let timeoutTimer: NodeJS.Timeout | undefined;
    const child = spawn(o.cli.node, [o.cli.script, ...actionArgs(routine, o.project.configPath, o.ifBusy, o.waitTimeoutMs)], {
      cwd: o.project.root,
      env: {
        ...(o.env ?? process.env),
        ROUTINELY_ROUTINE_ID: routine.id,
        ...(runId ? { ROUTINELY_RUN_ID: runId } : {}),
      },
      stdio: ['ignore', logFd, logFd, 'ipc'],
      detached: true,
    });
    const stop = (why: string): void => {
      if (stopped || child.pid === undefined) return;
      stopped = why;
      killGroup(child.pid, 'SIGTERM');
      killTimer = setTimeout(() => child.pid !== undefined && killGroup(child.pid, 'SIGKILL'), o.killGraceMs ?? 10_000);
    };
    const onAbort = (): void => stop(typeof o.signal?.reason === 'string' ? o.signal.reason : 'stopped at scheduler shutdown');
    if (o.signal?.aborted) onAbort();
    else o.signal?.addEventListener('abort', onAbort, { once: true });
    if (routine.timeoutSeconds !== undefined) {
      // exec actions get --timeout and stop themselves; this is the backstop (and the only
      // timeout for command routines).
      const grace = routine.action === 'command' ? 0 : 5_000;
      timeoutTimer = setTimeout(() => stop(`timed out after ${routine.timeoutSeconds}s`), routine.timeoutSeconds * 1000 + grace);
    }
    child.on('message', (m: unknown) => {
      const msg = m as { type?: string; outcome?: RoutineResult; reason?: string | null; run_id?: string | null };
      if (msg.type === 'routinely:started') o.onStarted?.();
      if (msg.type === 'routinely:outcome' && msg.outcome) {
        outcome = { outcome: msg.outcome, reason: msg.reason ?? null, run_id: msg.run_id ?? null };
      }
    });
    let finished = false;
    const finish = (code: number | null, signal: NodeJS.Signals | null, spawnError?: string): void => {
      if (finished) return;
      finished = true;
      clearTimeout(killTimer);
      clearTimeout(timeoutTimer);
      o.signal?.removeEventListener('abort', onAbort);
      closeSync(logFd);
      const finishedMs = clock.now();
      const exit = code ?? 128;
      let result: RoutineResult;
      let reason: string | null;
      if (spawnError) {
        result = 'failure';
        reason = `could not start: ${spawnError}`;
      } else if (stopped && (outcome === null || outcome.outcome !== 'skipped')) {
        result = 'failure';
        reason = stopped;
      } else if (outcome) {
        result = outcome.outcome;
        reason = outcome.reason;
      } else {
        // The child died before reporting (a crash, a kill): its exit status is all we know.
        result = code === 0 ? 'success' : 'failure';
        reason = signal ? `the routine process was killed by ${signal}` : code === 0 ? null : `the routine process exited with code ${code}`;
      }
      resolve({
        result,
        reason,
        scheduled_at: o.scheduledAt.toISOString(),
        started_at: new Date(startedMs).toISOString(),
        finished_at: new Date(finishedMs).toISOString(),
        duration_ms: Math.round(performance.now() - started),
        exit_code: code,
        // a skip did no work: it has no run
        run_id: result === 'skipped' ? null : (outcome?.run_id ?? runId),
        child_exit: exit,
      });
    };
    child.once('error', (err) => finish(null, null, err.message));
    // Messages still in the channel arrive before 'disconnect'; the timer covers a channel kept
    // open by a stray grandchild.
    child.once('exit', (code, signal) => {
      if (!child.connected) return finish(code, signal);
      const done = (): void => {
        clearTimeout(timer);
        finish(code, signal);
      };
      const timer = setTimeout(done, 1000);
      child.once('disconnect', done);
    });
  });
}
