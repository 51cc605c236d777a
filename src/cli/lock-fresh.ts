// The lock commands' validating side (lock-commands.ts is the commands): the lock source of a
// config validated now (with a database, its lease table), and `lock break`, which always
// validates (it may end processes).

import { displayPath, loadProject } from '../config/load.js';
import { ExitCode, UsageError } from '../errors.js';
import { EXEC_LOCK_NAME } from '../config/types.js';
import { slotKeys, slotsInUse, slotsOf } from '../lock/named.js';
import type { BreakResult } from '../lock/status.js';
import { disposable, openBackend, withBackend } from '../backend.js';
import { hostId } from '../process/identity.js';
import { ensureListCache } from '../scheduler/upcoming.js';
import { err, out } from './io.js';
import type { GlobalOptions } from './globals.js';
import { lockNameOf, type LockSource } from './lock-commands.js';
import { loadForView } from './view-project.js';

/** The lock commands' source from the config, validated now: `run` refuses an invalid config,
 * `view` (lock status) shows the locks of a project whose config is invalid. A valid config
 * leaves the cache behind, so the next lock command starts from it. */
export async function freshLockSource(g: GlobalOptions, use: 'run' | 'view'): Promise<LockSource> {
  const { project, invalid } =
    use === 'run' ? { project: loadProject({ configPath: g.config }), invalid: null } : loadForView(g);
  if (!invalid) ensureListCache(project);
  const backend = disposable(await openBackend(project));
  const locks = project.config.locks ?? {};
  return {
    cached: false,
    lock: backend.lock,
    slots: (name) => slotsOf(locks, name),
    configPath: project.configPath,
    passEnv: project.config.passEnv ?? [],
    schedulerKey: backend.schedulerKey(hostId()),
    stateDir: project.stateDir,
    [Symbol.asyncDispose]: () => backend[Symbol.asyncDispose](),
  };
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
  let keys: string[] = [];
  const results = await withBackend(project, async (b) => {
    keys = slotKeys(name, await slotsInUse(b.lock, name, slotsOf(project.config.locks, name)));
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
