// StrictModes for the whole path (SPEC §12), as OpenSSH checks a user's files: the project folder,
// the config's folder, the state folder and every folder above them belong to root or to you and
// are writable by nobody else; a sticky world-writable parent and a user private group are
// allowed, as OpenSSH allows them (docs/design.md "Trusted paths"). Light: no imports beyond
// node:fs, node:path and errors.ts (the commands that start from the cache use it).

import type { Stats } from 'node:fs';
import { lstatQuiet, realPath } from '../fs/look.js';
import { userDatabase } from '../fs/proc.js';
import { dirname, resolve } from 'node:path';

import { UntrustedPathError } from '../errors.js';

/** A name as the checks see it: null when it is missing or cannot be looked at (the check of
 * its folder refuses what matters). */
function lookAt(path: string): Stats | null {
  try {
    return lstatQuiet(path);
  } catch {
    return null;
  }
}

export { UntrustedPathError };

const myUid = (): number | null => (typeof process.geteuid === 'function' ? process.geteuid() : null);

let privateGroups: Map<number, string | null> | null = null;

/** Why group `gid` may have members other than this user (null: it is provably the user's own
 * private group). Proof, as a user private group is made (umask 002): the group is listed in
 * /etc/group under the user's own name, with no member but the user, it is the user's primary
 * group, and no other account in /etc/passwd has it as theirs. A gid /etc/group does not list (a
 * directory's group: LDAP, SSSD) cannot be enumerated here — Node has no getgrgid, and a
 * directory may not list members at all — so it counts as shared (SPEC §12). */
function groupProblem(gid: number, uid: number): string | null {
  privateGroups ??= new Map();
  const known = privateGroups.get(gid);
  if (known !== undefined) return known;
  let why: string | null;
  try {
    const passwd = userDatabase('passwd')
      .split('\n')
      .map((l) => l.split(':'));
    const me = passwd.find((f) => f.length > 3 && Number(f[2]) === uid);
    const others = passwd.filter((f) => f.length > 3 && Number(f[3]) === gid && Number(f[2]) !== uid);
    const line = userDatabase('group')
      .split('\n')
      .map((l) => l.split(':'))
      .find((f) => f.length > 3 && Number(f[2]) === gid);
    const members = (line?.[3] ?? '')
      .split(',')
      .map((m) => m.trim())
      .filter((m) => m && m !== me?.[0]);
    if (!line)
      why =
        'which /etc/group does not list (a directory group, such as LDAP or SSSD: its members cannot be known here, so it counts as shared)';
    else if (members.length > 0 || others.length > 0) why = 'which has other members';
    else if (!me || Number(me[3]) !== gid || line[0] !== me[0])
      why = `which is not your own private group (group ${line[0]}: a member could be added to it)`;
    else why = null;
  } catch {
    why = 'whose members cannot be read from /etc/group and /etc/passwd';
  }
  privateGroups.set(gid, why);
  return why;
}

function modeText(st: Stats): string {
  return (st.mode & 0o7777).toString(8).padStart(4, '0');
}

/** Why folder (or link) `p` may not be trusted, or null. `leaf`: the folder itself, not a parent. */
function refusal(p: string, st: Stats, uid: number, leaf: boolean): string | null {
  if (st.uid !== 0 && st.uid !== uid) return `${p} belongs to uid ${st.uid}, neither root nor you (uid ${uid})`;
  if (st.isSymbolicLink()) return null; // a link's own mode means nothing; its owner and folder do
  const group = (st.mode & 0o020) !== 0;
  const other = (st.mode & 0o002) !== 0;
  if (other && !(st.mode & 0o1000 && !leaf)) return `${p} is writable by every user (mode ${modeText(st)})`;
  if (group && !(other && st.mode & 0o1000 && !leaf)) {
    const shared = groupProblem(st.gid, uid);
    if (shared) return `${p} is writable by its group (gid ${st.gid}, mode ${modeText(st)}), ${shared}`;
  }
  return null;
}

/** Checks `dir` and every folder above it. Missing ones are skipped (they are created 0700).
 * `checked`: folders found fine in this same check (each call checks afresh: a scheduler's
 * reload sees a folder swapped since it started). */
function checkChain(dir: string, what: string, uid: number, checked: Set<string>): void {
  const folder = resolve(dir);
  for (let d = folder; ; d = dirname(d)) {
    if (!checked.has(d)) {
      const st = lookAt(d); // null: not there (yet)
      if (st) {
        // the folder itself only (not there yet, its nearest parent is a parent: /tmp may be)
        const why = refusal(d, st, uid, d === folder);
        if (why)
          throw new UntrustedPathError(
            `refusing the ${what}: ${why}; another user could change what runs as you. Fix: chmod go-w ${d} (or chown it), give each user their own "stateDir", or run routinely as a dedicated service user (docs/security.md)`,
          );
        if (st.isSymbolicLink()) {
          // the link is ours; where it points is judged the same way
          let target: string;
          try {
            target = realPath(d);
          } catch {
            target = d;
          }
          if (target !== d) checkChain(target, what, uid, checked);
        } else {
          checked.add(d);
        }
      }
    }
    if (dirname(d) === d) return;
  }
}

/** The checks of SPEC §12 for a project: its config file (a link: by its owner and target),
 * the config's folder, the project root and the state folder, with every folder above each. */
export function checkTrustedPaths(o: { configPath: string; root: string; stateDir: string }): void {
  const uid = myUid();
  if (uid === null) return; // no users to tell apart (Windows)
  const checked = new Set<string>();
  checkChain(dirname(o.configPath), 'config folder', uid, checked);
  const st = lookAt(o.configPath);
  if (st?.isSymbolicLink()) {
    if (st.uid !== 0 && st.uid !== uid) {
      throw new UntrustedPathError(
        `refusing the config: ${o.configPath} is a link owned by uid ${st.uid}, neither root nor you (uid ${uid}); another user could point it at a config of their choosing. Fix: replace it with a file of yours`,
      );
    }
    const target = realPath(o.configPath);
    checkChain(dirname(target), 'config folder', uid, checked);
  }
  if (resolve(o.root) !== resolve(dirname(o.configPath))) checkChain(o.root, 'project folder', uid, checked);
  checkChain(o.stateDir, 'state folder', uid, checked);
}

/** The checks for a lock folder set apart (`ROUTINELY_LOCK_DIR`), as for the state folder: the
 * folder and every folder above it (a lock folder another user can swap is a lock they hold). */
export function checkLockFolder(dir: string): void {
  const uid = myUid();
  if (uid === null) return;
  checkChain(dir, 'lock folder (ROUTINELY_LOCK_DIR)', uid, new Set());
}

/** The checks for a folder of `exec.taskDirs` (a task names a command that runs as you): the
 * folder and every folder above it, as the project folder — a link at it judged by its owner and
 * its target the same way. */
export function checkTaskFolder(dir: string): void {
  const uid = myUid();
  if (uid === null) return;
  checkChain(dir, 'task folder', uid, new Set());
}

/** A task file that is a link is followed only when the link is root's or yours and every
 * folder of its target passes the same checks (the target itself is checked when it is read: a
 * regular file of yours that nobody else may write). */
export function checkTaskFile(file: string): void {
  const uid = myUid();
  if (uid === null) return;
  const st = lookAt(file);
  if (!st?.isSymbolicLink()) return; // gone (reading it says so), or no link
  if (st.uid !== 0 && st.uid !== uid) {
    throw new UntrustedPathError(
      `refusing the task file: ${file} is a link owned by uid ${st.uid}, neither root nor you (uid ${uid}); another user could point it at tasks of their choosing. Fix: remove it (and chmod go-w its folder)`,
    );
  }
  let target: string;
  try {
    target = realPath(file);
  } catch {
    return; // dangling: reading it says so
  }
  checkChain(dirname(target), 'task file', uid, new Set());
}
