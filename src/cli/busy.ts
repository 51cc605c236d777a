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

/** `--wait-timeout` alone implies `--if-busy wait`; with fail or skip it is a usage error. */
export function busyPolicy(flags: BusyFlags, fallback: IfBusy): Policy {
  if (flags.waitTimeout !== undefined) {
    if (flags.ifBusy !== undefined && flags.ifBusy !== 'wait') {
      throw new UsageError(`--wait-timeout only applies with --if-busy wait (got --if-busy ${flags.ifBusy})`);
    }
    return { ifBusy: 'wait', waitTimeoutMs: flags.waitTimeout * 1000 };
  }
  return { ifBusy: flags.ifBusy ?? fallback };
}

const NOUN: Record<string, string> = { 'exec-run': 'exec', scheduler: 'scheduler' };

/** Prints the busy outcome and returns the exit code: 0 for a skip, 75 otherwise. */
export function reportBusy(result: Exclude<AcquireResult, { ok: true }>, policy: Policy, key = 'exec-run'): number {
  const noun = NOUN[key] ?? key;
  if (policy.ifBusy === 'skip' && result.reason === 'LOCK_HELD') {
    out(`skipped: ${noun} busy`);
    return ExitCode.OK;
  }
  if (result.reason === 'WAIT_TIMEOUT') {
    err(`${noun} busy: still held by ${result.why} after waiting ${(policy.waitTimeoutMs ?? 0) / 1000}s`);
  } else {
    err(`${noun} busy: held by ${result.why}`);
  }
  return ExitCode.BUSY;
}
