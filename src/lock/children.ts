// The children journal: a holder appends each process group it starts to
// `<lockDir>/<key>.children.<lock_id>` the moment it starts it (one write(2), no rename), so a
// reclaimer on this host knows every group to end even if the holder died before the group
// reached the lock record itself (SPEC §4.4).

import { closeSync, constants, openSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ensureDir, readNoFollow, unlinkQuiet } from './files.js';
import { samePidSpace, type LivenessProbe } from './identity.js';
import type { ChildGroup } from './record.js';

export class ChildJournal {
  private fd: number | null = null;
  readonly path: string;

  constructor(dir: string, key: string, lockId: string, private readonly probe: LivenessProbe) {
    this.path = journalPath(dir, key, lockId);
  }

  /** Best effort (a full disk): the group also reaches the lock record. */
  add(child: ChildGroup): void {
    try {
      if (this.fd === null) {
        ensureDir(dirname(this.path));
        this.fd = openSync(this.path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
      }
      writeSync(this.fd, `${JSON.stringify({ ...child, host: this.probe.host, boot_id: this.probe.bootId, pid_ns: this.probe.pidNs ?? null })}\n`);
    } catch {
      // see above
    }
  }

  close(remove: boolean): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
    if (remove) unlinkQuiet(this.path);
  }
}

export function journalPath(dir: string, key: string, lockId: string): string {
  return join(dir, `${key}.children.${lockId}`);
}

/** The groups recorded in one journal that belong to this host (and this boot). */
export function readChildJournal(file: string, probe: LivenessProbe): ChildGroup[] {
  const children: ChildGroup[] = [];
  let text: string | null = null;
  try {
    text = readNoFollow(file);
  } catch {
    return children;
  }
  for (const line of (text ?? '').split('\n')) {
    try {
      const c = JSON.parse(line) as ChildGroup & { host: string; boot_id?: string | null; pid_ns?: string | null };
      if (samePidSpace(c, probe) && Number.isSafeInteger(c.pid) && c.pid > 0) children.push({ pid: c.pid, start_time: c.start_time ?? null });
    } catch {
      // a torn or empty line
    }
  }
  return children;
}
