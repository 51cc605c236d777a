// `routine stop ID` and the HTTP `…/stop` action (SPEC §10): the running fire of a command
// routine on this host is stopped as `systemctl stop` stops a unit — SIGTERM to its process
// group, SIGKILL after the grace — and recorded once, as a failure that says it was stopped and
// by whom. The process that runs the fire (a scheduler, `routine run`, `serve`) records it: the
// stopper leaves a request `<stateDir>/stops/<marker id>.json` (0600, in a 0700 folder, never
// through a symbolic link) before it signals, and the fire's owner takes it when its command
// has ended, so its record reads `stopped by hand (cli, pid 4711)` rather than `killed by
// SIGTERM`. The group is found as a reclaimer finds one: a live process-group leader of this
// user whose environment holds the fire's `ROUTINELY_RUN_ID` (the open marker names the run; a
// row or a file naming some other process cannot make us signal it, SPEC §12).

import { childPath } from '../fs/names.js';
import type { Backend } from '../backend-types.js';
import type { Clock } from '../clock.js';
import { errnoCode } from '../errors.js';
import { unlinkQuiet } from '../fs/files.js';
import { lstatQuiet } from '../fs/look.js';
import { processGone, samePidSpace, systemProbe, type LivenessProbe } from '../process/identity.js';
import { ensureStateDir, readJsonState, writeJsonDurable } from '../state/json-file.js';
import { isRunId } from '../run-id.js';
import type { OpenFire } from '../state/routine-state.js';

/** Marker ids are ours (randomHex); run ids as run-id.ts checks them: anything else is not looked up. */
const MARKER_ID = /^[0-9a-f]{4,64}$/;

const stopsDir = (stateDir: string): string => childPath(stateDir, 'stops');

/** How long past SIGKILL the stopper still waits for the group to go. */
const KILL_WAIT_MS = 5_000;

/** Who asked, as the record says it: `cli, pid 4711` or `http, 127.0.0.1`. */
export type StopWho = { via: 'cli'; pid: number } | { via: 'http'; address: string };

export const whoText = (w: StopWho): string => (w.via === 'cli' ? `cli, pid ${w.pid}` : `http, ${w.address}`);

/** The reason a stopped fire is recorded with. */
export const stoppedReason = (who: string): string => `stopped by hand (${who})`;
/** Whether a fire was stopped by hand: never retried, as `systemctl stop` is not restarted. */
export const stoppedByHand = (reason: string | null): boolean => reason?.startsWith('stopped by hand (') === true;

function requestPath(stateDir: string, markerId: string): string | null {
  return MARKER_ID.test(markerId) ? childPath(stopsDir(stateDir), `${markerId}.json`) : null;
}

/** The request, before the stopper looks for the fire's group (`signalled: false`), and again,
 * with `signalled: true`, just before it signals that group. */
export function writeStopRequest(stateDir: string, markerId: string, who: StopWho, signalled = true): void {
  const path = requestPath(stateDir, markerId);
  if (!path) throw new Error(`not a fire id: ${JSON.stringify(markerId)}`);
  ensureStateDir(stopsDir(stateDir));
  writeJsonDurable(path, { version: 1, who: whoText(who), at: new Date().toISOString(), signalled });
}

/** The fire's owner, once its command ended: who stopped it (the request is removed), or null.
 * A request whose group was not signalled yet is removed and is no stop: the command ended on
 * its own and keeps its result (an older stopper's request, without the field, counts). */
export function takeStopRequest(stateDir: string, markerId: string): string | null {
  const path = requestPath(stateDir, markerId);
  if (!path) return null;
  const read = readJsonState(path, (v): { who: string; signalled: boolean } | string => {
    const o = v as { version?: unknown; who?: unknown; signalled?: unknown };
    return o && o.version === 1 && typeof o.who === 'string' && o.who.length <= 200
      ? { who: o.who, signalled: o.signalled !== false }
      : 'not a stop request';
  });
  if (read.kind === 'missing') return null;
  unlinkQuiet(path);
  if (read.kind !== 'ok') return 'unknown';
  return read.value.signalled ? read.value.who : null;
}

export type StopOutcome =
  /** Nothing of it runs (on this host or, as far as can be told, anywhere). */
  | { kind: 'idle' }
  /** It runs on another host (a shared database): not signalled from here. */
  | { kind: 'elsewhere'; host: string; pid: number }
  /** Signalled; `killed` when the grace ran out; `recorded` when its record came in time. */
  | { kind: 'stopped'; runId: string; killed: boolean; recorded: boolean; waitedMs: number }
  /** Its fire is open here but no process of it could be found (between its marker and its
   * command, or it does not run a command of ours). */
  | { kind: 'not-found'; runId: string | null };

export interface StopOptions {
  backend: Backend;
  stateDir: string;
  routine: string;
  who: StopWho;
  /** SIGTERM to SIGKILL. */
  graceMs: number;
  clock: Clock;
  probe?: LivenessProbe;
  /** How long to wait for the fire's record once its group is gone. */
  recordWaitMs?: number;
}

/** Stops the running fire(s) of a command routine on this host; see the file's comment. */
export async function stopRoutine(o: StopOptions): Promise<StopOutcome> {
  const probe = o.probe ?? systemProbe();
  const record = await o.backend.routines.readOne(o.routine, () => {});
  const open = (record?.open_fires ?? []).filter((f) => !processGone(f.owner, probe));
  const here = open.filter((f) => samePidSpace(f.owner, probe));
  if (here.length === 0) {
    const away = open[0];
    return away ? { kind: 'elsewhere', host: away.owner.host, pid: away.owner.pid } : { kind: 'idle' };
  }
  const fire = here[0]!;
  if (!fire.run_id || !isRunId(fire.run_id) || !probe.markedGroupLeaders)
    return { kind: 'not-found', runId: fire.run_id };
  // the request first: the owner may see its command end at any moment after the signal. Until
  // the group is signalled it says so: a command that ends by itself meanwhile keeps its result
  writeStopRequest(o.stateDir, fire.id, o.who, false);
  const request = requestPath(o.stateDir, fire.id)!;
  const entry = `ROUTINELY_RUN_ID=${fire.run_id}`;
  let groups = probe.markedGroupLeaders(entry, 'ROUTINELY_EVENT').map((g) => g.pid);
  for (let i = 0; groups.length === 0 && i < 20; i++) {
    await o.clock.sleep(100); // its marker is written before its command starts
    groups = probe.markedGroupLeaders(entry, 'ROUTINELY_EVENT').map((g) => g.pid);
  }
  if (groups.length === 0) {
    unlinkQuiet(request);
    // it ended by itself while we looked (its record closed the fire): nothing was stopped
    return (await stillOpen(o, fire.id)) ? { kind: 'not-found', runId: fire.run_id } : { kind: 'idle' };
  }
  writeStopRequest(o.stateDir, fire.id, o.who, true);
  const started = o.clock.monotonic();
  signalGroups(groups, 'SIGTERM');
  let killed = false;
  // never a hang: a process stuck in the kernel (D state) outlives SIGKILL; after another
  // grace we stop waiting and say whether the record came
  while (groups.some((g) => groupAlive(g)) && o.clock.monotonic() - started < 2 * o.graceMs + KILL_WAIT_MS) {
    if (!killed && o.clock.monotonic() - started >= o.graceMs) {
      signalGroups(groups, 'SIGKILL');
      killed = true;
    }
    await o.clock.sleep(50);
  }
  // the owner records it (and frees the lock) as its command ends
  const until = o.clock.monotonic() + (o.recordWaitMs ?? 10_000);
  let recorded = false;
  while (o.clock.monotonic() < until) {
    if (!(await stillOpen(o, fire.id))) {
      recorded = true;
      break;
    }
    await o.clock.sleep(50);
  }
  // recorded, and our request never taken: its owner had taken the one before it (not yet
  // signalled) as the command ended by itself, just before the signal; it kept its result
  if (recorded && lstatQuiet(request)) {
    unlinkQuiet(request);
    return { kind: 'idle' };
  }
  return { kind: 'stopped', runId: fire.run_id, killed, recorded, waitedMs: Math.round(o.clock.monotonic() - started) };
}

/** Whether the fire `id` is still open in its routine's record. */
async function stillOpen(o: StopOptions, id: string): Promise<boolean> {
  const now = await o.backend.routines.readOne(o.routine, () => {});
  return (now?.open_fires ?? []).some((f: OpenFire) => f.id === id);
}

function signalGroups(groups: number[], signal: NodeJS.Signals): void {
  for (const g of groups) {
    try {
      process.kill(-g, signal);
    } catch (err) {
      if (errnoCode(err) !== 'ESRCH') throw err;
    }
  }
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return errnoCode(err) === 'EPERM';
  }
}
