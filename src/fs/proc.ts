// Reading the system's own files: Linux's /proc, the kernel's view of processes (lock/identity.ts
// and control/control.ts decide what it means), and the user database (/etc/passwd,
// /etc/group: config/trust.ts). They are the system's files, not state: no ownership or size rules
// apply, and every error goes to the caller (a process that ended while we looked answers ENOENT
// or ESRCH).

import { closeSync, openSync, readdirSync, readFileSync, readlinkSync, readSync, statSync, type Stats } from 'node:fs';

const statBuf = Buffer.allocUnsafe(4096);

/** `/proc/<pid>/stat`, read into a static buffer: readFileSync sizes procfs files (0 bytes) with
 * a 64 KiB allocation per call, which dominated the liveness probe. */
export function readProcStat(pid: number): string {
  const fd = openSync(`/proc/${pid}/stat`, 'r');
  try {
    const n = readSync(fd, statBuf, 0, statBuf.length, 0);
    return statBuf.toString('latin1', 0, n);
  } finally {
    closeSync(fd);
  }
}

/** The last pid the kernel handed out in this pid namespace; null when it cannot be read. Read
 * after every command a runner ends: the file stays open (close-on-exec) and is read at offset 0,
 * one pread(2) instead of five calls. */
export function lastPid(): number | null {
  try {
    lastPidFd ??= openSync('/proc/sys/kernel/ns_last_pid', 'r');
    const got = readSync(lastPidFd, pidBuf, 0, pidBuf.length, 0);
    const n = Number(pidBuf.toString('latin1', 0, got).trim());
    return Number.isSafeInteger(n) && n > 0 ? n : null;
  } catch {
    const fd = lastPidFd;
    lastPidFd = null;
    try {
      if (fd !== null) closeSync(fd);
    } catch {
      // it was the read that failed; the next call opens the file again
    }
    return null;
  }
}
let lastPidFd: number | null = null;
const pidBuf = Buffer.alloc(32);

/** The names in /proc (pids among them); throws when /proc cannot be listed. */
export const procNames = (): string[] => readdirSync('/proc');

/** The uid that owns process `pid`; throws when it is gone. */
export const procOwnerUid = (pid: number): number => statSync(`/proc/${pid}`).uid;

/** `/proc/<pid>/environ`: NUL-separated `NAME=value` entries; throws when unreadable. */
export const procEnviron = (pid: number): Buffer => readFileSync(`/proc/${pid}/environ`);

/** The descriptors process `pid` holds open (`/proc/<pid>/fd`); throws when unreadable. */
export const procFds = (pid: number): string[] => readdirSync(`/proc/${pid}/fd`);

/** What descriptor `fd` of process `pid` is open on (stat through `/proc/<pid>/fd/<fd>`). */
export const procFdTarget = (pid: number, fd: string): Stats => statSync(`/proc/${pid}/fd/${fd}`);

/** The arguments process `pid` was started with (`/proc/<pid>/cmdline`, NUL-separated). */
export const procCmdline = (pid: number): string => readFileSync(`/proc/${pid}/cmdline`, 'utf8');

/** `/etc/passwd` or `/etc/group`, as text; throws when unreadable. */
export const userDatabase = (name: 'passwd' | 'group'): string => readFileSync(`/etc/${name}`, 'utf8');

/** This boot's id (`/proc/sys/kernel/random/boot_id`); throws when there is none. */
export const procBootId = (): string => readFileSync('/proc/sys/kernel/random/boot_id', 'latin1');

/** This process's pid namespace, e.g. `pid:[4026531836]`; throws when unknown. */
export const procPidNamespace = (): string => readlinkSync('/proc/self/ns/pid');
