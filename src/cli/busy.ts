// How a command reports a lock it could not take (SPEC §4 --if-busy, §7 exit 75).

import { ExitCode, UsageError } from '../errors.js';
import type { AcquireResult, IfBusy } from '../lock/lease.js';
import { err, out } from './io.js';

export interface BusyFlags {
  ifBusy?: IfBusy;
  waitTimeout?: number;
}

export interface Policy {
  ifBusy: IfBusy;
  waitTimeoutMs?: number;
}

/** `--wait-timeout` only means something while waiting: without `--if-busy wait` it is refused
 * rather than silently ignored (or silently turned into a wait), so a typo never changes what a
 * script does when the lock is busy. */
export function busyPolicy(flags: BusyFlags, fallback: IfBusy): Policy {
  const ifBusy = flags.ifBusy ?? fallback;
  if (flags.waitTimeout === undefined) return { ifBusy };
  if (ifBusy !== 'wait') {
    const given = flags.ifBusy !== undefined ? `got --if-busy ${flags.ifBusy}` : `--if-busy is ${fallback} by default`;
    throw new UsageError(
      `--wait-timeout only applies with --if-busy wait (${given}); to wait up to ${flags.waitTimeout}s, add --if-busy wait`,
    );
  }
  return { ifBusy, waitTimeoutMs: flags.waitTimeout * 1000 };
}

const NOUN: Record<string, string> = { 'exec-run': 'exec', scheduler: 'scheduler' };

/** How a lock is called in messages: `exec` for the exec lock, a named lock by its name. */
const nounOf = (key: string): string => NOUN[key] ?? key;

/** Prints the busy outcome and returns the exit code: 0 for a skip, 75 otherwise. `key`: the
 * lock's key, or a named lock's name. */
export function reportBusy(result: Exclude<AcquireResult, { ok: true }>, policy: Policy, key = 'exec-run'): number {
  const noun = nounOf(key);
  if (policy.ifBusy === 'skip' && result.reason === 'LOCK_HELD') {
    out(`skipped: ${noun} busy`);
    return ExitCode.OK;
  }
  if (key === 'scheduler' && result.reason === 'LOCK_HELD') {
    // a second `scheduler start` is not a busy tick: the first one runs, and says where
    err(`scheduler already running: ${result.why}`);
    err('  routinely scheduler status shows it; routinely scheduler stop stops it');
    return ExitCode.BUSY;
  }
  if (result.reason === 'WAIT_TIMEOUT') {
    err(`${noun} busy: still held by ${result.why} after waiting ${(policy.waitTimeoutMs ?? 0) / 1000}s`);
  } else {
    err(`${noun} busy: held by ${result.why}`);
    // Only the scheduler lock is never waited for.
    err('  to wait for it instead, add --if-busy wait (--wait-timeout S gives up after S seconds)');
  }
  return ExitCode.BUSY;
}

/** `exec run --json` refused (or skipped) as busy: the answer as JSON on stdout, as `exec resume
 * --json` gives it, with the exit code of the plain form (0 skipped, 75 busy). */
export function reportBusyJson(result: Exclude<AcquireResult, { ok: true }>, policy: Policy): number {
  const skipped = policy.ifBusy === 'skip' && result.reason === 'LOCK_HELD';
  out(
    JSON.stringify(
      {
        status: 'CONFLICT',
        why_code: 'LOCK_CONFLICT',
        why: `exec busy: ${result.reason === 'WAIT_TIMEOUT' ? 'still ' : ''}held by ${result.why}`,
        next: skipped ? 'skipped; try again later' : 'wait for it to finish, or: routinely exec run --if-busy wait',
      },
      null,
      2,
    ),
  );
  return skipped ? ExitCode.OK : ExitCode.BUSY;
}

/** Said once on stderr when `--if-busy wait` starts waiting: whom we wait for, and how long. */
export function waitNotice(policy: Policy, key = 'exec-run'): (holder: string) => void {
  const limit = policy.waitTimeoutMs !== undefined ? `; giving up after ${policy.waitTimeoutMs / 1000}s` : '';
  return (holder) => err(`waiting for the ${nounOf(key)} lock, held by ${holder}${limit}`);
}
