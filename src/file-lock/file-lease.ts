// A held file lock (SPEC §4.3, §4.6, §4.10, §4.13): heartbeat, child tracking, loss detection and
// release. Created only by attemptAcquire().
//
// Every write a holder makes goes to a file that carries its own lock_id (its heartbeat
// `<key>.beat.<lock_id>`, its children journal) or is the view `<key>.lock` re-linked to its own
// slot while it is the highest. So a holder that stalls anywhere, for any time, can at worst
// rewrite files nobody else reads as theirs; the slot sequence decides who holds the lock
// (docs/lock.md "Design").
// (Over 300 lines: one object, the held lease, whose heartbeat, loss checks, generation raise
// and release share its private state; the heartbeat file is beat.ts, the view view.ts.)

import type { Stats } from 'node:fs';
import type { Clock } from '../clock.js';
import { printable } from '../printable.js';
import { FolderReplacedError, errnoCode } from '../errors.js';
import { ChildJournal } from './children.js';
import { checkFolder, linkNew, unlinkQuiet, writeNewFile } from '../fs/files.js';
import { randomHex } from '../fs/random-ids.js';
import { lstatQuiet } from '../fs/look.js';
import { ioNotice } from '../fs/io-notice.js';
import { statFollow } from '../fs/look.js';
import { childPath, renameOver } from '../fs/names.js';
import type { LivenessProbe } from '../process/identity.js';
import type { Lease, LockHooks, LockOwnerInfo, RefreshResult, ReleaseResult } from '../lock/lease.js';
import { LeaseState, giveUpLeadMs } from '../lock/lease-state.js';
import { beatPath, freePath, slotGeneration, slotPath, type LockPaths } from './paths.js';
import { serializeLockRecord, toEpochSeconds, type LockRecord } from '../lock/record.js';
import { createBeatFile, reuseBeatFile, rewriteBeatFile, type Beat } from './beat.js';
import { listLockDir, readSlot } from './slots.js';
import { healView, judgeView, readView, removeView, sameStamp, type ViewStamp } from './view.js';
import { noteReleased } from './fair-turn.js';

const CHILD_WRITE_MS = 250;
/** What a failed view write means (said with it). */
export const VIEW_ONLY =
  'only the view `<key>.lock` of the lock is stale or missing; who holds the lock is decided by its slots (docs/lock.md)';
export interface LeaseTiming {
  ttlMs: number;
  refreshMs: number;
}

export { safetyMarginMs } from '../lock/lease-state.js';

type FileCheck = { ok: true } | { ok: false; why: string; takenOver: boolean };

export class FileLease extends LeaseState implements Lease {
  tookOver = false;
  tookOverFrom: LockRecord | null = null;
  private readonly childJournal: ChildJournal;
  private childTimer: NodeJS.Timeout | undefined;
  /** The journal has every child at once; the heartbeat copy waits CHILD_WRITE_MS from the
   * start, so a short command (a routine's `true`) costs no extra heartbeat file. */
  private lastChildWrite: number;
  /** Wall-clock expiry of our last written heartbeat, as observers see it. */
  private expiresAtMs: number;
  private jumpCheck = false;
  /** Our heartbeat file exists (created at acquisition): later beats rewrite it in place. */
  private beatCreated = false;
  /** Why the last heartbeat could not be written (cleared by the next one that is). */
  private lastWriteError: NodeJS.ErrnoException | null = null;
  /** `<key>.lock` as the last checkFiles() found it. */
  private viewSeen: Stats | null = null;

  private readonly paths: LockPaths;
  private slotIno: number;
  private view: ViewStamp | null;
  private readonly timing: LeaseTiming;
  private readonly hooks: LockHooks;

  constructor(o: {
    paths: LockPaths;
    record: LockRecord;
    /** The inode of the slot this lease took. */
    slotIno: number;
    view: ViewStamp | null;
    timing: LeaseTiming;
    clock: Clock;
    probe: LivenessProbe;
    /** When (monotonic ms) the take was confirmed. */
    confirmedAt: number;
    hooks?: LockHooks;
  }) {
    super(o.record, o.clock, o.timing.ttlMs, o.confirmedAt);
    this.paths = o.paths;
    this.slotIno = o.slotIno;
    this.view = o.view;
    this.timing = o.timing;
    this.hooks = o.hooks ?? {};
    const { paths, record, probe, clock, hooks = {} } = o;
    this.expiresAtMs = record.expires_at * 1000;
    this.childJournal = new ChildJournal(paths, record.lock_id, probe, hooks);
    this.lastChildWrite = clock.monotonic();
  }

  get path(): string {
    return this.paths.lock;
  }

  private step(name: string): void {
    this.hooks.step?.(name);
  }

  /** Starts the heartbeat timer. Unref'd: the heartbeat alone never keeps a process alive. */
  startHeartbeat(): void {
    this.startTimers(() => this.refresh(), this.timing.refreshMs);
  }

  refresh(): RefreshResult {
    const check = this.verify();
    if (!check.ok) return check;
    return this.beat();
  }

  /** Writes our heartbeat (our own file), then checks nobody took over meanwhile. */
  private beat(): RefreshResult {
    const sent = this.clock.monotonic();
    const beat = this.writeBeat();
    // A transient write error (ENOSPC, EIO) is retried on the next beat; once the lease has run
    // out without a successful write, verify() reports it lost.
    if (!beat) return { ok: true };
    // A stall between verify() and the write may have outlasted the lease: a heartbeat that
    // lands after our expiry proves nothing, because someone may have judged us stale already.
    const late = super.expiredBy();
    if (late) return this.lose(late);
    const after = this.checkFiles('beat:recheck');
    if (!after.ok) return this.lose(after.why, after.takenOver);
    this.rec = { ...this.rec, heartbeat_at: beat.heartbeat_at, expires_at: beat.expires_at };
    this.expiresAtMs = beat.expires_at * 1000;
    this.confirmed(sent);
    this.healView();
    return { ok: true };
  }

  /** Creates `<key>.beat.<lock_id>` (only ever ours) with the heartbeat as of acquisition: every
   * later heartbeat rewrites it in place, over the blocks it has, so a full disk or a folder out
   * of inodes never costs a holder its lease (SPEC §4.15). It is not kept open between beats (an
   * open file would keep `mount -o remount,ro` from making the folder read-only). Throws the
   * I/O error when even this cannot be written (the lock is then not taken). */
  createBeat(spares: readonly string[] = []): void {
    const file = beatPath(this.paths, this.rec.lock_id);
    this.step('acquire:beat');
    // an earlier holder's, left at its release: renamed ours and rewritten in place (one inode
    // fewer made and removed a lease); one that another acquirer took first, or that is not a
    // whole heartbeat file of ours, and the next, or a new file
    const beat = this.beatNow();
    if (!spares.slice(0, 2).some((name) => reuseBeatFile(childPath(this.paths.dir, name), file, beat)))
      createBeatFile(file, beat);
    this.beatCreated = true;
  }

  private beatNow(): Beat {
    const now = this.clock.now();
    return {
      version: 1,
      lock_id: this.rec.lock_id,
      heartbeat_at: toEpochSeconds(now),
      expires_at: toEpochSeconds(now + this.timing.ttlMs),
      run_id: this.rec.owner.run_id ?? null,
      routine: this.rec.owner.routine ?? null,
      children: this.rec.owner.children ?? [],
      ...(this.rec.owner.stopping ? { stopping: true as const } : {}),
      owner: {
        pid: this.rec.owner.pid,
        host: this.rec.owner.host,
        boot_id: this.rec.owner.boot_id,
        start_time: this.rec.owner.start_time,
        command: this.rec.owner.command,
        ...(this.rec.owner.pid_ns ? { pid_ns: this.rec.owner.pid_ns } : {}),
      },
    };
  }

  /** Rewrites our heartbeat file in place (a reader that meets the write half done sees a
   * checksum that does not match, and reads again). null when an I/O error stopped it. */
  private writeBeat(): Beat | null {
    const beat = this.beatNow();
    const replaced = this.folderReplaced();
    if (replaced) {
      // nothing is written through a swapped folder; the lease runs out unless it is back
      this.lastWriteError = Object.assign(new Error(replaced.message), { code: 'EREPLACED' }) as NodeJS.ErrnoException;
      return null;
    }
    try {
      this.step('beat:write');
      if (!this.beatCreated) this.createBeat();
      else {
        rewriteBeatFile(beatPath(this.paths, this.rec.lock_id), beat);
      }
      this.lastWriteError = null;
      return beat;
    } catch (err) {
      if (errnoCode(err) === undefined) throw err;
      this.lastWriteError = err as NodeJS.ErrnoException;
      ioNotice(
        err,
        'writing the heartbeat',
        beatPath(this.paths, this.rec.lock_id),
        'the next heartbeat tries again; the lease is lost only if none is written before it runs out',
      );
      return null;
    }
  }

  verify(): RefreshResult {
    if (this.lostInfo) return { ok: false, lost: this.lostInfo };
    if (this.released) return { ok: false, lost: { code: 'LOCK_LOST', why: 'the lease was released', graceMs: 0 } };
    const expired = this.expiredBy();
    if (expired) return this.lose(expired);
    const files = this.checkFiles('verify');
    if (!files.ok) return this.lose(files.why, files.takenOver);
    return { ok: true };
  }

  /** Whether the slot sequence still says we hold the lock: our slot is in place and nobody
   * has taken the next one. Three lstat(2) calls in the common case. */
  private checkFiles(step: string): FileCheck {
    const g = this.rec.generation;
    // a lock folder swapped under us says nothing about who holds the lock: expiry decides,
    // as for a folder that cannot be read (and a lease lost so is taken back once it is back)
    if (this.folderReplaced()) return { ok: true };
    this.step(`${step}:slots`);
    let mine;
    let next;
    try {
      mine = lstatQuiet(slotPath(this.paths, g));
      next = lstatQuiet(slotPath(this.paths, g + 1));
    } catch (err) {
      if (errnoCode(err) === undefined) throw err;
      return { ok: true }; // unreadable for now; expiry decides if it stays so
    }
    // the folder may have been swapped between the check above and these reads: a slot that
    // seems gone, or a next one that seems taken, is judged again against the folder first
    if ((next || !mine || mine.ino !== this.slotIno) && this.folderInDoubt()) return { ok: true };
    if (next) {
      const r = readSlot(this.paths, g + 1);
      const by =
        r.kind === 'ok'
          ? `pid ${r.holder.record.owner.pid} on ${printable(r.holder.record.owner.host)} (generation ${g + 1})`
          : `generation ${g + 1}`;
      return { ok: false, why: `the lock now belongs to ${by}`, takenOver: true };
    }
    if (!mine || mine.ino !== this.slotIno) {
      return { ok: false, why: `our lock record ${slotPath(this.paths, g)} was removed or replaced`, takenOver: true };
    }
    this.step(`${step}:view`);
    let view;
    let found;
    try {
      view = lstatQuiet(this.paths.lock);
      this.viewSeen = view;
      if (!view || sameStamp(view, this.view)) return { ok: true };
      // `<key>.lock` is not our view: a record there that claims our generation or a later one
      // is someone else's claim, and we stop (SPEC §4.3: a refresh that finds another lock_id)
      found = judgeView(this.paths, this.rec, view, this.slotIno);
    } catch (err) {
      // (an I/O error on the view, as on the slots above: our slot is there, expiry decides)
      if (errnoCode(err) === undefined) throw err;
      return { ok: true };
    }
    if (found.kind === 'ours') this.view = found.stamp;
    if (found.kind !== 'claim') return { ok: true };
    if (this.folderInDoubt()) return { ok: true }; // swapped since the slots were read
    return { ok: false, why: `the lock file ${this.paths.lock} now carries ${found.who}`, takenOver: true };
  }

  /** Writes `<key>.lock` again if it is missing or shows an older holder. Only the view:
   * nothing reads it to decide who holds the lock. */
  private healView(): void {
    try {
      this.view = healView(this.paths, this.rec, this.slotIno, this.view, (n) => this.step(n));
    } catch (err) {
      // best effort; the next beat tries again
      ioNotice(err, 'linking the lock view', this.paths.lock, VIEW_ONLY);
    }
  }

  /** Records a child group: at once in `<key>.children.<lock_id>` (one appended line; if we
   * die now, the reclaimer must know the group), and in our heartbeat file at most every
   * CHILD_WRITE_MS (an exec run starts hundreds of tasks). */
  trackChild(pid: number): void {
    // released: the journal is closed and removed, and nobody judges this holder any more
    if (this.released) return;
    const child = this.childJournal.add(pid);
    this.withChild(child);
    this.scheduleChildWrite();
  }

  private scheduleChildWrite(): void {
    if (this.childTimer) return;
    const wait = Math.max(0, this.lastChildWrite + CHILD_WRITE_MS - this.clock.monotonic());
    if (wait === 0) {
      this.lastChildWrite = this.clock.monotonic();
      this.refresh();
      return;
    }
    this.childTimer = setTimeout(() => {
      this.childTimer = undefined;
      this.lastChildWrite = this.clock.monotonic();
      if (!this.released && !this.lostInfo) this.refresh();
    }, wait);
    this.childTimer.unref();
  }

  /** Cheap currency check for frequent fenced writes: not lost, not released, and our lease not
   * yet expired by our own clock. No I/O unless the wall clock jumped; verify() checks files. */
  confirm(): boolean {
    if (this.lostInfo || this.released) return false;
    const expired = this.expiredBy();
    if (expired) this.markLost(expired);
    return !expired;
  }

  /** Also against the wall clock that observers judge `expires_at` by. If it jumped forward
   * (a VM resumed, NTP stepped) while our own clock says the lease is fine, we re-read the slots:
   * still ours, we renew the heartbeat at once and carry on; someone else's, it is lost
   * (SPEC §4.13). */
  protected override expiredBy(): string | null {
    const own = super.expiredBy();
    if (own) return `${own}${this.writeTrouble()}`;
    if (this.jumpCheck) return null;
    const left = this.expiresAtMs - this.clock.now();
    if (left > giveUpLeadMs(this.ttlMs)) return null;
    this.jumpCheck = true;
    try {
      const wallElapsed = this.clock.now() - this.rec.heartbeat_at * 1000;
      const files = this.checkFiles('jump');
      if (!files.ok) return this.markLost(`${files.why} (after the wall clock jumped)`, files.takenOver).why;
      const r = this.beat();
      if (!r.ok) return r.lost.why;
      // not renewed after all: the heartbeat could not be written (said when the lease runs out)
      if (this.lastWriteError) return null;
      this.hooks.notice?.(
        `the wall clock jumped forward (${Math.round(wallElapsed / 1000)}s since our last heartbeat by the wall clock); the ${this.rec.key} lock is still ours, heartbeat renewed`,
      );
      return null;
    } finally {
      this.jumpCheck = false;
    }
  }

  /** Moves our generation up to at least `atLeast` by taking that slot too (state written under
   * an older lock folder shows a higher one: the folder was wiped). Only ever raises. */
  async raiseGeneration(atLeast: number): Promise<void> {
    if (atLeast <= this.rec.generation) return;
    if (!this.verify().ok) return;
    const next: LockRecord = { ...this.rec, generation: atLeast, owner: { ...this.rec.owner, children: [] } };
    const tmp = `${this.paths.dir}/${this.paths.tmpPrefix}${randomHex(8)}`;
    const target = slotPath(this.paths, atLeast);
    this.step('raise:write');
    writeNewFile(tmp, serializeLockRecord(next));
    try {
      this.step('raise:link');
      if (!linkNew(tmp, target)) {
        this.markLost(`generation ${atLeast} was taken by someone else while we raised ours`, true);
        return;
      }
    } finally {
      unlinkQuiet(tmp);
    }
    const ino = lstatQuiet(target)?.ino ?? null;
    // The new slot jumps over numbers: if anyone took one of them (we stalled and lost the lock
    // meanwhile), the jump would put a second holder above them. Then it is withdrawn.
    this.step('raise:recheck');
    const previous = this.rec.generation;
    const between = listLockDir(this.paths)
      .map((n) => slotGeneration(this.paths, n))
      .filter((g): g is number => g !== null && g !== atLeast && g > previous);
    if (between.length > 0 || ino === null) {
      if (ino !== null && lstatQuiet(target)?.ino === ino) unlinkQuiet(target);
      this.markLost(
        `the lock was taken (generation ${Math.min(...between, atLeast)}) while we raised our generation`,
        true,
      );
      return;
    }
    this.rec = { ...this.rec, generation: atLeast };
    this.slotIno = ino;
    const check = this.checkFiles('raise:recheck');
    if (!check.ok) {
      this.markLost(check.why, check.takenOver);
      return;
    }
    this.hooks.notice?.(
      `raised the ${this.rec.key} lock's generation from ${previous} to ${atLeast} (state showed a higher one)`,
    );
    this.healView();
  }

  annotate(fields: Partial<LockOwnerInfo>): void {
    this.withOwner(fields);
    this.refresh();
  }

  async release(): Promise<ReleaseResult> {
    return this.releaseSync();
  }

  /** Removes our view of the lock if it is still ours, then links our release mark
   * `<key>.free.<generation>` (a name only we create: safe whatever happened while we were away). */
  releaseSync(): ReleaseResult {
    this.stopHeartbeat();
    clearTimeout(this.childTimer);
    this.childTimer = undefined;
    if (this.released) return { released: true };
    const lost = this.lostInfo;
    this.viewSeen = null;
    const files = lost ? null : this.checkFiles('release');
    const stillOurs = files?.ok === true;
    try {
      this.step('release:view');
      const view = stillOurs ? this.viewSeen : lstatQuiet(this.paths.lock);
      if (view && sameStamp(view, this.view)) removeView(this.paths, view.ino, (n) => this.step(n));
    } catch (err) {
      // the view is only a view
      ioNotice(err, 'removing the lock view', this.paths.lock, VIEW_ONLY);
    }
    this.step('release:mark');
    try {
      linkNew(slotPath(this.paths, this.rec.generation), freePath(this.paths, this.rec.generation));
    } catch (err) {
      // Could not link the mark (a full folder): without a heartbeat file, observers judge our
      // slot by its creation-time expiry, and by our pid once we exit.
      unlinkQuiet(beatPath(this.paths, this.rec.lock_id));
      ioNotice(
        err,
        'linking the release mark',
        freePath(this.paths, this.rec.generation),
        'the lock is released all the same: the next holder finds this process gone (or its record expired) instead of the mark',
      );
    }
    this.released = true;
    this.closeChildJournal(true);
    if (stillOurs && this.beatCreated) {
      // nothing reads a released holder's heartbeat (its release mark decides): left for the
      // next holder to take as its own (createBeat), or for the collector
      this.step('release:spare');
      const beat = beatPath(this.paths, this.rec.lock_id);
      try {
        renameOver(beat, childPath(this.paths.dir, `${this.paths.sparePrefix}${randomHex(8)}`));
      } catch (err) {
        if (errnoCode(err) !== 'ENOENT')
          ioNotice(err, 'moving aside the heartbeat file', beat, 'the next holder makes a new one');
      }
    }
    if (!stillOurs) {
      const why = lost?.why ?? (files && !files.ok ? files.why : 'the lock was no longer ours');
      let holder: LockRecord | null = null;
      try {
        const v = readView(this.paths);
        holder = v.kind === 'ok' ? v.record : null;
      } catch {
        holder = null;
      }
      return { released: false, reason: 'NOT_OWNER', holder, why: `${why}; left it alone` };
    }
    noteReleased(this.paths.lock, this.clock);
    return { released: true };
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.releaseSync();
  }

  private closeChildJournal(remove: boolean): void {
    this.childJournal.close(remove);
  }

  /** Whether the lock folder says nothing now: replaced since it was checked, or gone (a folder
   * on its path swapped or moved away). Then expiry decides, as for a folder that cannot be read. */
  private folderInDoubt(): boolean {
    if (this.folderReplaced()) return true;
    // followed: the lock folder may itself be a root that is a symlink (ROUTINELY_LOCK_DIR)
    return !statFollow(this.paths.dir)?.isDirectory();
  }

  /** The lock folder replaced since it was checked (a FolderReplacedError), or null. */
  private folderReplaced(): Error | null {
    try {
      checkFolder(this.paths.dir);
      return null;
    } catch (err) {
      if (err instanceof FolderReplacedError) return err;
      return null; // anything else is found by the file operations themselves
    }
  }

  private lose(why: string, takenOver = false): RefreshResult {
    return { ok: false, lost: this.markLost(why, takenOver) };
  }

  /** Why our heartbeat cannot be written, for a lease that runs out because of it (the path and
   * the error: a read-only or failing state folder), or ''. */
  private writeTrouble(): string {
    const e = this.lastWriteError;
    return e
      ? `; its heartbeat could not be written to ${beatPath(this.paths, this.rec.lock_id)} (${e.code ?? 'error'}: ${e.message.replace(/^\w+: /, '').split(',')[0]})`
      : '';
  }

  /** Whether the lease was lost because its own heartbeats could not be written (the state
   * folder is read-only or failing), not because someone else took the lock. */
  get lostToWriteErrors(): boolean {
    return this.lostInfo !== null && this.lostInfo.graceMs > 0 && this.lastWriteError !== null;
  }

  protected override onLost(): void {
    clearTimeout(this.childTimer);
    this.closeChildJournal(false); // the reclaimer reads it
  }
}
