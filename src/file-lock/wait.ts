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
import { lockPaths, type LockPaths } from './paths.js';

/** Acquires with the `--if-busy` policy of SPEC §4 (if-busy.ts): a wait pauses by a doubling
 * pause up to `pollMaxMs`, cut short when a release mark appears. */
export async function acquireFileLease(opts: AcquireOptions): Promise<AcquireResult> {
  const clock = opts.clock ?? systemClock;
  // every attempt of this process times the holder on its own clock (observer.ts)
  const paths = lockPaths(opts.lockDir, opts.key);
  const observe = observerOf(paths.lock, opts.ttlMs, clock);
  let watcher: FSWatcher | undefined;
  let wake: (() => void) | undefined;
  const backoff = new Backoff(1, opts.pollMaxMs ?? 50, clock);
  await fairTurn(opts.ifBusy, paths.lock, clock);
  try {
    return await acquireUnderPolicy(opts, {
      clock,
      ttlMs: opts.ttlMs,
      attempt: () => attemptAcquire(opts, { observe }),
      pause: async (signal, leftMs) => {
        watcher ??= watchLock(paths, () => wake?.());
        const stop = new AbortController();
        wake = () => stop.abort();
        const onAbort = (): void => stop.abort();
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
