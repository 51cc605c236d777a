// `lock run -- CMD` and `lock status` started like bare node (SPEC §3): a crontab line
// `routinely lock run -- job` pays its start-up before the job. With the validated config's
// cache for this very config file (fast-config.ts), they take their settings from it and load
// neither the command-line parser nor the config validator; they then do exactly what the full
// commands do (lock-run.ts is shared with them). Without the cache, null: the full path runs.

import { writeOut } from '../fs/terminal.js';
import { projectFileLock } from '../backend.js';
import type { Project } from '../config/load.js';
import { ExitCode, RoutinelyError, asStorageError, isStorageError } from '../errors.js';
import { SCHEDULER_LOCK_KEY } from '../lock/lock-backend.js';
import { ensureStateRoot } from '../state/json-file.js';
import { acquireLock } from '../lock/named.js';
import { EXEC_LOCK_NAME } from '../config/types.js';
import type { FastLockArgs } from './fast-args.js';
import { cachedConfig } from './fast-config.js';
import type { CachedProject } from '../scheduler/list-cache.js';
import { busyPolicy, reportBusy, waitNotice } from './busy.js';
import { err } from './io.js';
import { terminalText } from '../printable.js';
import { describeAll, describeStatus, runUnderLease } from './lock-run.js';
import { lockStatusAll } from '../lock/named.js';
import { StopSignals } from './signals.js';

/** The exit code, or null to leave the command to the full path (nothing printed yet). */
export async function fastLock(a: FastLockArgs, env: NodeJS.ProcessEnv = process.env): Promise<number | null> {
  let project: Project;
  let cached: CachedProject;
  try {
    const found = cachedConfig(a.config, env);
    if (!found) return null;
    const p = found.project;
    cached = p;
    project = {
      root: found.root,
      configPath: found.configPath,
      stateDir: p.stateDir,
      lockDir: p.lockDir,
      lockTtlMs: p.lockTtlMs,
      lockRefreshMs: p.lockRefreshMs,
      backend: { type: 'file' },
      // what the lock commands read of the config
      config: { passEnv: p.passEnv } as Project['config'],
    };
  } catch {
    return null; // whatever it is, the full path reports it properly
  }
  if (env.ROUTINELY_DEBUG) err(`routinely: debug: lock ${a.kind} from the cache of a config that validated`);
  // the lock alone, as fileBackend builds it: no state stores to load
  const lock = projectFileLock(project, (m) => err(`routinely: ${m}`));
  if (a.kind === 'status') {
    let text: string;
    try {
      if (a.key === 'scheduler') {
        const status = await lock.status(SCHEDULER_LOCK_KEY);
        text = a.json ? JSON.stringify(status, null, 2) : describeStatus(status).join('\n');
      } else {
        // the exec lock and every named lock in use, as the full command shows them
        const all = await lockStatusAll(lock, (name) => cached.locks[name] ?? 1);
        text = a.json ? JSON.stringify(all, null, 2) : describeAll(all).join('\n');
      }
    } catch (e) {
      // a failing disk is reported as it is (exit 74), not looked at again by the full path
      // (which, a moment later, might read past a fault that hid a holder)
      if (isStorageError(e)) return storageFault(e);
      return null; // a lock folder it refuses (a symlink, a FIFO): the full path says why
    }
    // written at once, without creating Node's stdout stream (a few ms of a short start)
    writeOut(1, `${terminalText(text)}\n`);
    return ExitCode.OK;
  }
  const policy = busyPolicy({ ifBusy: a.ifBusy, waitTimeout: a.waitTimeout }, 'fail');
  using stop = new StopSignals();
  const owner = { command: 'lock run', routine: null, run_id: env.ROUTINELY_RUN_ID ?? null };
  let got;
  try {
    ensureStateRoot(project.stateDir);
    got = await acquireLock(lock, EXEC_LOCK_NAME, 1, owner, { ...policy, signal: stop.signal }, waitNotice(policy));
  } catch (e) {
    if (isStorageError(e)) return storageFault(e); // nothing ran; the disk fails: exit 74
    return null; // nothing ran: the full path tries again, and reports what stops it
  }
  if (!got.ok) return got.reason === 'ABORTED' ? stop.exitCode : reportBusy(got, policy);
  try {
    await using lease = got.lease;
    return await runUnderLease(a.cmd, lease, stop, process.env);
  } catch (error) {
    // as the full path reports it (program.ts)
    if (error instanceof RoutinelyError) {
      err(`routinely: ${error.message}`);
      return error.exitCode;
    }
    err(`routinely: unexpected error: ${error instanceof Error ? error.message : String(error)}`);
    return ExitCode.FAILED;
  }
}

/** A storage fault as program.ts reports it: the path and the error, exit 74 (SPEC §7). */
function storageFault(e: unknown): number {
  const error = asStorageError(e);
  err(`routinely: ${error instanceof Error ? error.message : String(error)}`);
  return error instanceof RoutinelyError ? error.exitCode : ExitCode.IO;
}
