// The children journal: a holder appends each process group it starts to
// `<lockDir>/<key>.children.<lock_id>` the moment it starts it (one write(2), no rename), so a
// reclaimer on this host knows every group to end even if the holder died before the group
// reached its heartbeat file (SPEC §4.4). Only its holder writes it; readers validate each line.

import { openAppend, writeAll } from '../fs/durable.js';
import { LOCK_FILE_CAP, readFileChecked, unlinkQuiet } from '../fs/files.js';
import { closeFd } from '../fs/names.js';
import { ioNotice } from '../fs/io-notice.js';
import { samePidSpace, type LivenessProbe } from '../process/identity.js';
import type { LockHooks } from '../lock/lease.js';
import { journalPath, type LockPaths } from './paths.js';
import { isChildGroup, type ChildGroup } from '../lock/record.js';

export class ChildJournal {
  private fd: number | null = null;
  private where: string | undefined;
  readonly path: string;

  constructor(
    paths: LockPaths,
    lockId: string,
    private readonly probe: LivenessProbe,
    private readonly hooks: LockHooks = {},
  ) {
    this.path = journalPath(paths, lockId);
  }

  /** Identifies group `pid` (its leader's start time) and appends it. Best effort (a full
   * disk): the group also reaches the heartbeat file. */
  add(pid: number): ChildGroup {
    const proc = this.probe.inspect(pid);
    const child: ChildGroup = { pid, start_time: proc.state === 'alive' ? proc.startTime : null };
    try {
      this.hooks.step?.('children:append');
      if (this.fd === null) {
        // O_APPEND: every line goes to the end, and a torn last line (a crash mid-write) is
        // followed by a fresh one because each line starts with a newline. A regular file of
        // ours, writable by us alone, in a folder of ours (openAppend's checks).
        this.fd = openAppend(this.path);
      }
      // what JSON.stringify({ ...child, host, boot_id, pid_ns }) gives, the host's part made once
      this.where ??= `,"host":${JSON.stringify(this.probe.host)},"boot_id":${JSON.stringify(this.probe.bootId)},"pid_ns":${JSON.stringify(this.probe.pidNs ?? null)}}`;
      const line = `\n{"pid":${pid},"start_time":${JSON.stringify(child.start_time)}${this.where}\n`;
      // every byte: writeAll loops over short writes (a filling disk)
      writeAll(this.fd, Buffer.from(line));
    } catch (err) {
      // see above
      ioNotice(
        err,
        'appending to',
        this.path,
        'the group also goes into the heartbeat file, where a reclaimer finds it once written',
      );
    }
    return child;
  }

  close(remove: boolean): void {
    const opened = this.fd !== null;
    if (this.fd !== null) closeFd(this.fd);
    this.fd = null;
    if (remove && opened) unlinkQuiet(this.path);
  }
}

/** The groups recorded in one journal that belong to this host (and this boot). Lines that do
 * not parse, or that name pid 0 or 1, are skipped; a journal we do not own is not read at all. */
export function readChildJournal(file: string, probe: LivenessProbe): ChildGroup[] {
  const children: ChildGroup[] = [];
  let text: string | null = null;
  try {
    text = readFileChecked(file, LOCK_FILE_CAP)?.text ?? null;
  } catch {
    return children;
  }
  for (const line of (text ?? '').split('\n')) {
    if (line.length === 0) continue;
    try {
      const c = JSON.parse(line) as unknown;
      if (!isChildGroup(c)) continue;
      const where = c as ChildGroup & { host?: unknown; boot_id?: unknown; pid_ns?: unknown };
      if (typeof where.host !== 'string') continue;
      const space = {
        host: where.host,
        boot_id: typeof where.boot_id === 'string' ? where.boot_id : null,
        pid_ns: typeof where.pid_ns === 'string' ? where.pid_ns : null,
      };
      if (samePidSpace(space, probe)) children.push({ pid: c.pid, start_time: c.start_time });
    } catch {
      // a torn line
    }
  }
  return children;
}
