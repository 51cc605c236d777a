// `routinely lock run | status | break` (SPEC §4).

import { displayPath, loadProject } from '../config/load.js';
import { ExitCode, UsageError } from '../errors.js';
import { EXEC_LOCK_NAME, LOCK_NAME_PATTERN } from '../config/types.js';
import { acquireLock, lockStatusAll, namedLockStatus, slotKeys, slotsOf } from '../lock/named.js';
import type { BreakResult } from '../lock/status.js';
import { commandEnv } from '../exec/process.js';
import { disposable, openBackend, withBackend } from '../backend.js';
import { hostId } from '../process/identity.js';
import { busyPolicy, reportBusy, waitNotice, type BusyFlags } from './busy.js';
import { ensureListCache } from '../scheduler/upcoming.js';
import { err, out } from './io.js';
import { describeAll, describeNamed, describeStatus, runUnderLease } from './lock-run.js';
import type { GlobalOptions } from './globals.js';
import { StopSignals } from './signals.js';
import { loadForView } from './view-project.js';

/** `--lock NAME` as given: the exec lock by default; a name that cannot be a lock is refused. */
function lockNameOf(flag: string | undefined): string {
  const name = flag ?? EXEC_LOCK_NAME;
  if (!LOCK_NAME_PATTERN.test(name)) {
    throw new UsageError(
      `--lock ${JSON.stringify(name)} is not a lock name (lowercase letters, digits, "_" and "-", starting with a letter or digit, at most 63 characters; "exec" is the project exec lock)`,
    );
  }
  return name;
}

export async function lockRun(
  cmd: string[],
  flags: BusyFlags & { routine?: string; lock?: string },
  g: GlobalOptions,
): Promise<number> {
  const policy = busyPolicy(flags, 'fail');
  const name = lockNameOf(flags.lock);
  const project = loadProject({ configPath: g.config });
  ensureListCache(project); // the next lock run starts fast (fast-lock.ts)
  using stop = new StopSignals();
  const owner = { command: 'lock run', routine: flags.routine ?? null, run_id: process.env.ROUTINELY_RUN_ID ?? null };
  await using backend = disposable(await openBackend(project));
  const slots = slotsOf(project.config.locks, name);
  const got = await acquireLock(
    backend.lock,
    name,
    slots,
    owner,
    { ...policy, signal: stop.signal },
    waitNotice(policy, name),
  );
  if (!got.ok) {
    if (got.reason === 'ABORTED') return stop.exitCode;
    return reportBusy(got, policy, name);
  }
  await using lease = got.lease;
  // A routine's command (the scheduler runs command routines through here) does not get what
  // routinely withholds; a person's `lock run` keeps their environment as it is.
  const env = flags.routine ? commandEnv(process.env, project.config.passEnv) : process.env;
  return await runUnderLease(cmd, lease, stop, env, name);
}

export async function lockStatus(
  flags: { json?: boolean; key: string; lock?: string },
  g: GlobalOptions,
): Promise<number> {
  if (flags.lock !== undefined && flags.key !== 'exec-run')
    throw new UsageError('--lock and --key name a lock each: give one of them');
  const name = flags.lock === undefined ? null : lockNameOf(flags.lock);
  const { project, invalid } = loadForView(g);
  if (!invalid) ensureListCache(project);
  const slots = (n: string): number => slotsOf(project.config.locks ?? {}, n);
  if (name !== null) {
    const status = await withBackend(project, (b) => namedLockStatus(b.lock, name, slots(name)));
    if (flags.json) out(JSON.stringify(status, null, 2));
    else for (const line of describeNamed(status)) out(line);
    return ExitCode.OK;
  }
  if (flags.key === 'scheduler') {
    const status = await withBackend(project, (b) => b.lock.status(b.schedulerKey(hostId())));
    if (flags.json) out(JSON.stringify(status, null, 2));
    else for (const line of describeStatus(status)) out(line);
    return ExitCode.OK;
  }
  const all = await withBackend(project, (b) => lockStatusAll(b.lock, slots));
  if (flags.json) out(JSON.stringify(all, null, 2));
  else for (const line of describeAll(all)) out(line);
  return ExitCode.OK;
}

export async function lockBreak(flags: { key: string; lock?: string }, g: GlobalOptions): Promise<number> {
  if (flags.lock !== undefined && flags.key !== 'exec-run')
    throw new UsageError('--lock and --key name a lock each: give one of them');
  const project = loadProject({ configPath: g.config });
  const watching = (holder: string, forMs: number): void =>
    err(
      `routinely: ${holder} is alive on this host: watching its heartbeat for up to ${Math.round(forMs / 1000)}s (a live holder here is judged by its heartbeat on this host's clock, never by the times in its record)`,
    );
  const name = flags.lock === undefined ? null : lockNameOf(flags.lock);
  if (name === null || name === EXEC_LOCK_NAME) {
    const key = name === EXEC_LOCK_NAME ? 'exec-run' : flags.key;
    const result = await withBackend(project, (b) =>
      b.lock.breakStale(key === 'scheduler' ? b.schedulerKey(hostId()) : key, watching),
    );
    return reportBreak(result, key);
  }
  // a named lock: each of its slots, as the exec lock is broken (only a stale one)
  const keys = slotKeys(name, slotsOf(project.config.locks, name));
  const results = await withBackend(project, async (b) => {
    const all: BreakResult[] = [];
    for (const key of keys) all.push(await b.lock.breakStale(key, watching));
    return all;
  });
  let code: number = ExitCode.OK;
  for (const [i, result] of results.entries()) {
    const c = reportBreak(result, keys.length === 1 ? name : `${name} (slot ${i + 1})`);
    if (c !== ExitCode.OK) code = c;
  }
  return code;
}

/** Says what breaking one lock (or slot) did; its exit code. */
function reportBreak(result: BreakResult, what: string): number {
  if (result.broken) {
    out(`broke the stale ${what} lock: ${result.why}`);
    out(
      result.staleFile
        ? `  kept as ${displayPath(result.staleFile)}`
        : '  its record could not be read, so no copy was kept',
    );
    if (result.orphans.ended.length > 0) {
      const killed = result.orphans.killed.length ? ` (${result.orphans.killed.length} needed SIGKILL)` : '';
      out(
        `  ended ${result.orphans.ended.length} orphaned process group(s): ${result.orphans.ended.join(', ')}${killed}`,
      );
    }
    return ExitCode.OK;
  }
  switch (result.reason) {
    case 'FREE':
      out(`${what} lock: free; nothing to break`);
      return ExitCode.OK;
    case 'NOT_STALE':
      err(`not breaking the ${what} lock: it is held by ${result.why}`);
      return ExitCode.BUSY;
    default:
      err(`not breaking the ${what} lock: ${result.why}`);
      return ExitCode.BUSY;
  }
}
