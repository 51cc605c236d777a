// `routinely lock run | status` (SPEC §4), one implementation each: they take the lock's settings
// from the validated config's cache when it is for this very config file and environment
// (cached-config.ts; then neither commander nor the config validator is loaded, and a crontab line
// `routinely lock run -- job` pays little more than node's start before its job), else from a
// validating source the command line's full path hands in (lock-fresh.ts, also `lock break`).
// Built on its own into dist/cli-lock.cjs for the entry (main.ts): it spawns, and loading
// node:child_process would cost every other command 3.5 ms.

import { projectFileLock } from '../backend.js';
import type { Project } from '../config/load.js';
import { EXEC_LOCK_NAME, LOCK_NAME_PATTERN, reservedLockName } from '../config/types.js';
import { ExitCode, UsageError, isStorageError } from '../errors.js';
import { commandEnv } from '../exec/process.js';
import { writeOut } from '../fs/terminal.js';
import { SCHEDULER_LOCK_KEY, type LockBackend } from '../lock/lock-backend.js';
import { acquireLock, lockStatusAll, namedLockStatus, slotsInUse, slotsOf } from '../lock/named.js';
import { liveSlots } from '../lock/live-slots.js';
import { terminalText } from '../printable.js';
import { ensureStateRoot } from '../state/json-file.js';
import { busyPolicy, reportBusy, waitNotice, type BusyFlags } from './busy.js';
import { cachedConfig } from './cached-config.js';
import type { GlobalOptions } from './globals.js';
import { err } from './io.js';
import { describeAll, describeNamed, describeStatus, runUnderLease } from './lock-run.js';
import { StopSignals } from './signals.js';

/** For the entry: what a lock command that threw says, by this bundle's own error classes. */
export { reportError } from './report-error.js';

/** What the lock commands work with, from the cache or from validating the config. */
export interface LockSource extends AsyncDisposable {
  /** From the cache: the lock folder as the cache names it, nothing validated now. */
  cached: boolean;
  lock: LockBackend;
  /** The slots of a lock (an undeclared name has one, the exec lock one). */
  slots(name: string): number;
  /** The config file: a wait asks it for the lock's slots again when it changes (live-slots.ts). */
  configPath: string;
  /** What a routine's command is given of what routinely withholds (SPEC §2 passEnv). */
  passEnv: readonly string[];
  /** This host's scheduler lock (with a database there is one per host). */
  schedulerKey: string;
  stateDir: string;
}

/** A lock's slots in the config as it is now (throws when it does not validate). */
export type SlotsNow = (configPath: string, name: string) => Promise<number>;

/** How `use` gets its source when the cache cannot answer: `run` validates the config; `view`
 * (lock status) also shows the lock of a project whose config is invalid. */
export type FreshLockSource = (g: GlobalOptions, use: 'run' | 'view') => Promise<LockSource>;

/** `--lock NAME` as given: the exec lock by default; a name that cannot be a lock is refused. */
export function lockNameOf(flag: string | undefined): string {
  const name = flag ?? EXEC_LOCK_NAME;
  if (!LOCK_NAME_PATTERN.test(name)) {
    throw new UsageError(
      `--lock ${JSON.stringify(name)} is not a lock name (lowercase letters, digits, "_" and "-", starting with a letter or digit, at most 63 characters; "exec" is the project exec lock)`,
    );
  }
  const reserved = reservedLockName(name);
  if (reserved) throw new UsageError(`--lock ${name}: ${reserved}`);
  return name;
}

/** The source from the cache, or null when it cannot answer (whatever the reason: the full path
 * says why). */
function cachedSource(configArg: string | undefined, env: NodeJS.ProcessEnv): LockSource | null {
  try {
    const found = cachedConfig(configArg, env);
    if (!found) return null;
    const p = found.project;
    const project = {
      root: found.root,
      configPath: found.configPath,
      stateDir: p.stateDir,
      lockDir: p.lockDir,
      lockTtlMs: p.lockTtlMs,
      lockRefreshMs: p.lockRefreshMs,
      backend: { type: 'file' },
      config: { passEnv: p.passEnv },
    } as Project;
    // the lock alone, as the file backend builds it: no state stores to load
    const lock = projectFileLock(project, (m) => err(`routinely: ${m}`));
    const locks = Object.fromEntries(Object.entries(p.locks).map(([name, slots]) => [name, { slots }]));
    return {
      cached: true,
      lock,
      slots: (name) => slotsOf(locks, name),
      configPath: found.configPath,
      passEnv: p.passEnv,
      schedulerKey: SCHEDULER_LOCK_KEY,
      stateDir: p.stateDir,
      [Symbol.asyncDispose]: async () => {},
    };
  } catch {
    return null;
  }
}

/** The source, or null when only the cache may answer (`fresh` null: the entry's start-up path)
 * and it cannot. */
async function sourceFor(
  g: GlobalOptions,
  use: 'run' | 'view',
  fresh: FreshLockSource | null,
  env: NodeJS.ProcessEnv,
): Promise<LockSource | null> {
  const cached = cachedSource(g.config, env);
  if (cached && env.ROUTINELY_DEBUG)
    err(`routinely: debug: lock ${use === 'run' ? 'run' : 'status'} from the cache of a config that validated`);
  return cached ?? (fresh ? await fresh(g, use) : null);
}

/** `lock run -- CMD`: CMD in its own process group while the lock is held; exits with CMD's code.
 * Without `fresh`, null when the cache cannot answer or taking the lock failed for a reason the
 * full path should tell (nothing ran). */
export async function lockRun(
  cmd: string[],
  flags: BusyFlags & { routine?: string; lock?: string },
  g: GlobalOptions,
  fresh: FreshLockSource | null = null,
  env: NodeJS.ProcessEnv = process.env,
  slotsNow: SlotsNow | null = null,
): Promise<number | null> {
  // an empty program name (`lock run -- ""`): bad input, said before the lock is taken
  if (cmd[0] === '') throw new UsageError('lock run: the command after -- is empty: name a program to run');
  const policy = busyPolicy(flags, 'fail');
  const name = lockNameOf(flags.lock);
  await using source = await sourceFor(g, 'run', fresh, env);
  if (!source) return null;
  using stop = new StopSignals();
  const owner = { command: 'lock run', routine: flags.routine ?? null, run_id: env.ROUTINELY_RUN_ID ?? null };
  let got;
  try {
    if (source.cached) ensureStateRoot(source.stateDir);
    const configPath = source.configPath;
    got = await acquireLock(
      source.lock,
      name,
      // the config asked again while it waits (the full path hands the reader in: the cache's
      // path has no config loader, and waits only on the exec lock, which has one slot)
      slotsNow ? liveSlots(configPath, source.slots(name), () => slotsNow(configPath, name)) : source.slots(name),
      owner,
      { ...policy, signal: stop.signal },
      waitNotice(policy, name),
    );
  } catch (e) {
    // nothing ran: the full path tries again and reports what stops it (a failing disk is
    // reported as it is, exit 74, not tried again)
    if (!fresh && !isStorageError(e)) return null;
    throw e;
  }
  if (!got.ok) {
    if (got.reason === 'ABORTED') return stop.exitCode;
    return reportBusy(got, policy, name);
  }
  await using lease = got.lease;
  // A routine's command (the scheduler runs command routines through here) does not get what
  // routinely withholds; a person's `lock run` keeps their environment as it is.
  const runEnv = flags.routine ? commandEnv(env, source.passEnv) : env;
  return await runUnderLease(cmd, lease, stop, runEnv, name);
}

/** `lock status`: the exec lock and every named lock in use, one named lock (`--lock`), or this
 * host's scheduler lock (`--key scheduler`). */
export async function lockStatus(
  flags: { json?: boolean; key: string; lock?: string },
  g: GlobalOptions,
  fresh: FreshLockSource | null = null,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number | null> {
  if (flags.lock !== undefined && flags.key !== 'exec-run')
    throw new UsageError('--lock and --key name a lock each: give one of them');
  const name = flags.lock === undefined ? null : lockNameOf(flags.lock);
  await using source = await sourceFor(g, 'view', fresh, env);
  if (!source) return null;
  let text: string;
  try {
    if (name !== null) {
      const configured = source.slots(name);
      const status = await namedLockStatus(
        source.lock,
        name,
        await slotsInUse(source.lock, name, configured),
        configured,
      );
      text = flags.json ? JSON.stringify(status, null, 2) : describeNamed(status).join('\n');
    } else if (flags.key === 'scheduler') {
      const status = await source.lock.status(source.schedulerKey);
      text = flags.json ? JSON.stringify(status, null, 2) : describeStatus(status).join('\n');
    } else {
      const all = await lockStatusAll(source.lock, (n) => source.slots(n));
      text = flags.json ? JSON.stringify(all, null, 2) : describeAll(all).join('\n');
    }
  } catch (e) {
    // a lock folder it refuses (a symlink, a FIFO): the full path says why; a failing disk is
    // reported as it is (exit 74), not looked at again (which, a moment later, might read past a
    // fault that hid a holder)
    if (!fresh && !isStorageError(e)) return null;
    throw e;
  }
  // written at once, without creating Node's stdout stream (a few ms of a short start)
  writeOut(1, `${terminalText(text)}\n`);
  return ExitCode.OK;
}
