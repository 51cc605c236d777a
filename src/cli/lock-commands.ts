// `routinely lock run | status | break` (SPEC §4).

import { displayPath, loadProject } from '../config/load.js';
import { ExitCode } from '../errors.js';
import { commandEnv } from '../exec/process.js';
import { EXEC_LOCK_KEY } from '../lock/lock-backend.js';
import { acquireAnnounced } from '../announced-wait.js';
import { disposable, openBackend, withBackend } from '../backend.js';
import { hostId } from '../process/identity.js';
import { busyPolicy, reportBusy, waitNotice, type BusyFlags } from './busy.js';
import { ensureListCache } from '../scheduler/upcoming.js';
import { err, out } from './io.js';
import { describeStatus, runUnderLease } from './lock-run.js';
import type { GlobalOptions } from './globals.js';
import { StopSignals } from './signals.js';
import { loadForView } from './view-project.js';

export async function lockRun(cmd: string[], flags: BusyFlags & { routine?: string }, g: GlobalOptions): Promise<number> {
  const policy = busyPolicy(flags, 'fail');
  const project = loadProject({ configPath: g.config });
  ensureListCache(project); // the next lock run starts fast (fast-lock.ts)
  using stop = new StopSignals();
  const owner = { command: 'lock run', routine: flags.routine ?? null, run_id: process.env.ROUTINELY_RUN_ID ?? null };
  await using backend = disposable(await openBackend(project));
  const got = await acquireAnnounced(backend.lock, EXEC_LOCK_KEY, owner, { ...policy, signal: stop.signal }, waitNotice(policy));
  if (!got.ok) {
    if (got.reason === 'ABORTED') return stop.exitCode;
    const code = reportBusy(got, policy);
    return code;
  }
  await using lease = got.lease;
  // A routine's command (the scheduler runs command routines through here) does not get what
  // routinely withholds; a person's `lock run` keeps their environment as it is.
  const env = flags.routine ? commandEnv(process.env, project.config.passEnv) : process.env;
  return await runUnderLease(cmd, lease, stop, env);
}

export async function lockStatus(flags: { json?: boolean; key: string }, g: GlobalOptions): Promise<number> {
  const { project, invalid } = loadForView(g);
  if (!invalid) ensureListCache(project);
  const status = await withBackend(project, (b) => b.lock.status(flags.key === 'scheduler' ? b.schedulerKey(hostId()) : flags.key));
  if (flags.json) {
    out(JSON.stringify(status, null, 2));
    return ExitCode.OK;
  }
  for (const line of describeStatus(status)) out(line);
  return ExitCode.OK;
}

export async function lockBreak(flags: { key: string }, g: GlobalOptions): Promise<number> {
  const project = loadProject({ configPath: g.config });
  const watching = (holder: string, forMs: number): void =>
    err(`routinely: ${holder} is alive on this host: watching its heartbeat for up to ${Math.round(forMs / 1000)}s (a live holder here is judged by its heartbeat on this host's clock, never by the times in its record)`);
  const result = await withBackend(project, (b) => b.lock.breakStale(flags.key === 'scheduler' ? b.schedulerKey(hostId()) : flags.key, watching));
  if (result.broken) {
    out(`broke the stale ${flags.key} lock: ${result.why}`);
    out(result.staleFile ? `  kept as ${displayPath(result.staleFile)}` : '  its record could not be read, so no copy was kept');
    if (result.orphans.ended.length > 0) {
      const killed = result.orphans.killed.length ? ` (${result.orphans.killed.length} needed SIGKILL)` : '';
      out(`  ended ${result.orphans.ended.length} orphaned process group(s): ${result.orphans.ended.join(', ')}${killed}`);
    }
    return ExitCode.OK;
  }
  switch (result.reason) {
    case 'FREE':
      out(`${flags.key} lock: free; nothing to break`);
      return ExitCode.OK;
    case 'NOT_STALE':
      err(`not breaking the ${flags.key} lock: it is held by ${result.why}`);
      return ExitCode.BUSY;
    default:
      err(`not breaking the ${flags.key} lock: ${result.why}`);
      return ExitCode.BUSY;
  }
}
