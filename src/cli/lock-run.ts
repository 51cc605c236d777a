// The heart of `lock run` and `lock status` (SPEC §4) for lock-commands.ts: running a command
// under a lease, and the words of a status. Nothing here loads the config validator or the
// command-line parser.

import { displayPath } from '../config/find.js';
import { ExitCode } from '../errors.js';
import { runGroupUnderLease } from '../exec/group-run.js';
import { killGroup, leftoverMessage } from '../exec/process.js';
import type { Lease } from '../lock/lease.js';
import type { LockStatus } from '../lock/status.js';
import type { NamedLockStatus } from '../lock/named.js';
import { printable } from '../printable.js';
import { err, formatInZone, humanDuration } from './io.js';
import type { StopSignals } from './signals.js';

/** How long a forwarded SIGINT/SIGTERM may take before the group gets SIGKILL. */
const FORWARD_GRACE_MS = 10_000;

/** Runs CMD in its own group while `lease` is held; returns the exit code `lock run` exits with.
 * `lockName`: the lock's name for CMD (ROUTINELY_LOCK_NAME). */
export async function runUnderLease(
  cmd: string[],
  lease: Lease,
  stop: StopSignals,
  baseEnv: NodeJS.ProcessEnv,
  lockName = 'exec',
): Promise<number> {
  let childPid: number | null = null;
  let escalate: NodeJS.Timeout | undefined;
  // Ctrl-C and SIGTERM are passed on to the command (as flock's child gets them from the
  // terminal), not turned into a stop of ours
  const forward = stop.onSignal((signal, repeated) => {
    if (childPid === null) return;
    killGroup(childPid, repeated ? 'SIGKILL' : signal);
    escalate ??= setTimeout(() => childPid !== null && killGroup(childPid, 'SIGKILL'), FORWARD_GRACE_MS);
  });
  const run = await runGroupUnderLease(lease, {
    file: cmd[0]!,
    args: cmd.slice(1),
    env: baseEnv,
    lockName,
    stdio: 'inherit',
    onSpawn: (pid) => {
      childPid = pid;
      if (stop.received) killGroup(pid, stop.received);
    },
  });
  childPid = null;
  forward();
  clearTimeout(escalate);
  const result = run.process;
  if (run.leftovers > 0) err(`routinely: ${leftoverMessage(run.leftovers)}`);

  // Checked again after the command ended: a pause may have cost us the lock unnoticed.
  const check = lease.verify();
  if (!check.ok) {
    err(`routinely: lock lost: ${check.lost.why}; stopped ${cmd[0]} and left the lock alone`);
    return ExitCode.FAILED;
  }
  const released = await lease.release();
  if (!released.released) err(`routinely: lock not released: ${released.why}`);
  if (stop.received) return stop.exitCode;
  if (result.reason === 'spawn-error') {
    // as flock says it (and with a shell's exit codes: 127 not found, 126 not executable)
    const why = (result.error ?? '').replace(/^.*?: /, '');
    err(`routinely: lock run: failed to execute ${printable(cmd[0]!)}: ${why}`);
    return /Permission denied|Operation not permitted|Exec format error|Is a directory/.test(why) ? 126 : 127;
  }
  return result.exitCode;
}

/** A lock's status as lines; `title`: what it is called (default `<key> lock`). */
export function describeStatus(s: LockStatus, title = `${s.key} lock`): string[] {
  const lines = [`${title}: ${s.state}${s.state === 'stale' ? ` (${printable(s.why ?? '')})` : ''}`];
  const row = (k: string, v: string): void => {
    lines.push(`  ${`${k}:`.padEnd(12)}${v}`);
  };
  if (s.record) {
    const o = s.record.owner;
    row('holder', printable(s.holder ?? ''));
    row(
      'command',
      printable(
        [o.command, o.routine && `routine ${o.routine}`, o.run_id && `run ${o.run_id}`].filter(Boolean).join(', '),
      ),
    );
    row('since', formatInZone(new Date(s.record.created_at * 1000)));
    row('heartbeat', `${humanDuration((s.heartbeat_age_s ?? 0) * 1000)} ago`);
    const exp = s.expires_in_s ?? 0;
    row('expires', exp >= 0 ? `in ${humanDuration(exp * 1000)}` : `${humanDuration(-exp * 1000)} ago`);
    if (o.children && o.children.length > 0) row('children', o.children.map((c) => `pid ${c.pid}`).join(', '));
  } else if (s.state === 'stale') {
    row('holder', printable(s.holder ?? 'unreadable lock file'));
  }
  row('generation', String(s.generation));
  if (s.state === 'held') row('stale', `no (${printable(s.why ?? '')})`);
  row('file', displayPath(s.path));
  return lines;
}

/** `lock status --lock NAME`: a line for the lock, then each slot. */
export function describeNamed(n: NamedLockStatus): string[] {
  if (n.slots === 1) return describeStatus(n.slot_status[0]!, `${n.lock} lock`);
  const lines = [`${n.lock} lock: ${n.held} of ${n.slots} slots held`];
  if (n.configured_slots !== undefined)
    lines.push(
      `  (the config has ${n.configured_slots} slot${n.configured_slots === 1 ? '' : 's'}: a slot above it is kept by its holder until it ends; a stale one is reclaimed by lock break --lock ${n.lock} or a scheduler's start or reload)`,
    );
  for (const s of n.slot_status) lines.push(...describeStatus(s, `slot ${s.slot}`).map((l) => `  ${l}`));
  return lines;
}

/** `lock status`: the exec lock, then each named lock in use (its slots that are not free). */
export function describeAll(all: LockStatus & { named: NamedLockStatus[] }): string[] {
  const lines = describeStatus(all);
  for (const n of all.named) {
    for (const s of n.slot_status) {
      if (s.state === 'free') continue;
      lines.push(...describeStatus(s, n.slots === 1 ? `${n.lock} lock` : `${n.lock} lock, slot ${s.slot}`));
    }
  }
  return lines;
}
