// Waiting for the file lock (SPEC §4 `--if-busy wait`, the policy in if-busy.ts): attempts spaced
// by a doubling pause up to `pollMaxMs`, cut short by inotify when a holder releases, so a waiter takes a freed lock at
// once and notices a holder killed with SIGKILL within one pause (its slot is then stale).

import type { FSWatcher } from 'node:fs';
import { watchFolder } from '../fs/names.js';
import { Backoff } from '../backoff.js';
import { systemClock } from '../clock.js';
import { attemptAcquire, type AcquireOptions } from './acquire.js';
import { fairTurn } from './fair-turn.js';
import type { AcquireResult } from '../lock/lease.js';
import { acquireUnderPolicy } from '../lock/if-busy.js';
import { observerOf } from '../lock/observer.js';
import { freePath, lockPaths, slotPath, type LockPaths } from './paths.js';
import { lstatQuiet } from '../fs/look.js';

const WOKEN = 'woken';

/** Acquires with the `--if-busy` policy of SPEC §4 (if-busy.ts): a wait pauses by a doubling
 * pause up to `pollMaxMs`, cut short when a release mark appears. */
export async function acquireFileLease(opts: AcquireOptions): Promise<AcquireResult> {
  const clock = opts.clock ?? systemClock;
  // every attempt of this process times the holder on its own clock (observer.ts)
  const paths = lockPaths(opts.lockDir, opts.key);
  const observe = observerOf(paths.lock, opts.ttlMs, clock);
  let watcher: FSWatcher | undefined;
  let wake: (() => void) | undefined;
  const pollMaxMs = opts.pollMaxMs ?? 50;
  const backoff = new Backoff(1, pollMaxMs, clock);
  await fairTurn(opts.ifBusy, paths.lock, clock);
  // the last full attempt, when it found the lock held: its answer, and the slot it found held
  let busy: { at: number; r: Awaited<ReturnType<typeof attemptAcquire>>; slot: number } | null = null;
  try {
    return await acquireUnderPolicy(opts, {
      clock,
      ttlMs: opts.ttlMs,
      attempt: async () => {
        if (busy && clock.monotonic() - busy.at < pollMaxMs && stillHeld(paths, busy)) return busy.r;
        // (only a wait: fail and skip look again to name the one that won, as every busy does)
        const r = await attemptAcquire(opts, { observe, busyOnLostRace: opts.ifBusy === 'wait' });
        if (r.ok) return r;
        // a race lost to a waiter woken with us: the next full look is still due when it was
        if (r.lostTo !== undefined && busy) {
          busy = { at: busy.at, r, slot: r.lostTo };
          return r;
        }
        const slot = r.lostTo ?? r.holder?.generation ?? null;
        busy = slot === null ? null : { at: clock.monotonic(), r, slot };
        return r;
      },
      pause: async (signal, leftMs) => {
        watcher ??= watchLock(paths, () => wake?.());
        const stop = new AbortController();
        // a reason of our own: abort() without one builds a DOMException, with its stack, per wake
        wake = () => stop.abort(WOKEN);
        const onAbort = (): void => stop.abort(WOKEN);
        signal?.addEventListener('abort', onAbort, { once: true });
        await backoff.wait(stop.signal, leftMs);
        signal?.removeEventListener('abort', onAbort);
        if (stop.signal.aborted) backoff.reset(); // a release mark appeared: look again at once
      },
    });
  } finally {
    watcher?.close();
  }
}

/**
 * A waiter's look between two full attempts at most `pollMaxMs` apart, in a system call or two:
 * whether the slot the last one found held is still held — no release mark — or was taken by the
 * next holder since (its slot linked, not released). Either way the answer is the last one (the
 * holder it names at most `pollMaxMs` old). A holder that died or stalled releases nothing: the
 * next full attempt judges it, so a dead holder is noticed within `pollMaxMs` and a pause. Only
 * ever an answer of busy: a wrong one delays a waiter, never lets two hold the lock.
 */
function stillHeld(paths: LockPaths, busy: { slot: number }): boolean {
  if (!lstatQuiet(freePath(paths, busy.slot))) return true;
  const next = busy.slot + 1;
  if (!lstatQuiet(slotPath(paths, next)) || lstatQuiet(freePath(paths, next))) return false;
  busy.slot = next; // woken by a release another waiter won: its slot is held now
  return true;
}

/** Wakes a waiter as soon as a holder releases (its release mark appears). Polling still runs,
 * because a holder killed with SIGKILL changes nothing; every other name (slots, views,
 * heartbeats, temp files, other keys) is ignored, or each step of every cycle would wake every
 * waiter for nothing. */
function watchLock(paths: LockPaths, onChange: () => void): FSWatcher | undefined {
  // undefined when no inotify watches are left: polling alone still works
  return watchFolder(paths.dir, (name) => {
    if (name === null || name.startsWith(paths.freePrefix)) onChange();
  });
}
