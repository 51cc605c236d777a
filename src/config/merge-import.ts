// `routinely import-crontab --merge` (SPEC §10): the imported routines and named locks added to a
// project's routinely.json as text, so that every comment and every byte of the file stays where
// it was (`routinely init` writes a commented file). The file is read as JSON with comments;
// comments are blanked out only to find where the members are (stripJsonComments keeps every
// position), and the new lines are inserted at those positions. An id the file has already is
// refused by name, never renamed or replaced.

import { stripJsonComments } from './find.js';
import { lockLines, printable, routineLines, type Entry, type Imported } from './crontab.js';
import { isObj } from '../is-object.js';

/** A member of the top-level object: where its value starts and where it ends (its closing
 * bracket for an array or an object). */
interface Member {
  start: number;
  end: number;
}

/** The top-level object's brackets and members of `clean` (JSON with its comments blanked). */
function topLevel(clean: string): { open: number; close: number; members: Map<string, Member> } | null {
  let i = 0;
  const ws = (): void => {
    while (i < clean.length && /\s/.test(clean[i]!)) i++;
  };
  const string = (): string | null => {
    if (clean[i] !== '"') return null;
    const start = i++;
    while (i < clean.length && clean[i] !== '"') i += clean[i] === '\\' ? 2 : 1;
    i++;
    return JSON.parse(clean.slice(start, i)) as string;
  };
  /** Past a value; the index of its last character. */
  const value = (): number => {
    if (clean[i] === '"') {
      string();
      return i - 1;
    }
    if (clean[i] === '{' || clean[i] === '[') {
      let depth = 0;
      for (; i < clean.length; i++) {
        const c = clean[i]!;
        if (c === '"') {
          string();
          i--;
        } else if (c === '{' || c === '[') depth++;
        else if (c === '}' || c === ']') {
          depth--;
          if (depth === 0) return i++;
        }
      }
      return -1;
    }
    const start = i;
    while (i < clean.length && !/[,}\]\s]/.test(clean[i]!)) i++;
    return i > start ? i - 1 : -1;
  };
  ws();
  if (clean[i] !== '{') return null;
  const open = i++;
  const members = new Map<string, Member>();
  for (;;) {
    ws();
    if (clean[i] === '}') return { open, close: i, members };
    const key = string();
    if (key === null) return null;
    ws();
    if (clean[i++] !== ':') return null;
    ws();
    const start = i;
    const end = value();
    if (end < 0) return null;
    members.set(key, { start, end });
    ws();
    if (clean[i] === ',') i++;
  }
}

/** The index of the last character before `before` that is not white space (in `clean`). */
function lastSignificant(clean: string, before: number): number {
  let i = before - 1;
  while (i >= 0 && /\s/.test(clean[i]!)) i--;
  return i;
}

/** Whether the project's lock `name` is the lock file `file`'s: one slot, and its line in the
 * config names the file in its comment (`"app": { "slots": 1 }, // /tmp/app.lock`). */
function sameLockFile(text: string, name: string, file: string, lock: unknown): boolean {
  const slots = isObj(lock) ? lock.slots : undefined;
  if (slots !== undefined && slots !== 1) return false;
  const key = `${JSON.stringify(name)}:`;
  const comment = `// ${printable(file)}`;
  return text.split('\n').some((line) => line.includes(key) && line.trimEnd().endsWith(comment));
}

/** An imported routine and its comments with its lock's new name. */
function withLockRenamed(e: Entry, renamed: ReadonlyMap<string, { to: string; why: string }>): Entry {
  const r = e.routine?.lock !== undefined ? renamed.get(e.routine.lock) : undefined;
  if (e.routine === null || r === undefined) return e;
  const from = e.routine.lock!;
  const to = r.to;
  return {
    routine: { ...e.routine, lock: to },
    comments: [
      ...e.comments.map((c) => c.replaceAll(`the named lock "${from}"`, `the named lock "${to}"`)),
      `the lock is "${to}", not "${from}": ${r.why}`,
    ],
  };
}

/** The file's text with the imported routines and the locks it lacks added; or why not. */
export function mergeImported(
  text: string,
  imported: Imported,
  file: string,
): { text: string; added: { routines: number; locks: string[] } } | { refused: string } {
  const clean = stripJsonComments(text);
  let config: unknown;
  try {
    config = JSON.parse(clean);
  } catch (e) {
    return { refused: `${file} is not valid JSON (${(e as Error).message}): fix it, then import again` };
  }
  const top = topLevel(clean);
  if (!isObj(config) || !top) return { refused: `${file} holds no JSON object` };
  const routines = config.routines ?? [];
  if (!Array.isArray(routines)) return { refused: `${file}: "routines" is not an array` };
  if (config.locks !== undefined && !isObj(config.locks)) return { refused: `${file}: "locks" is not an object` };
  const ids = new Map<string, number>();
  routines.forEach((r, i) => isObj(r) && typeof r.id === 'string' && ids.set(r.id, i));
  for (const e of imported.entries) {
    const at = e.routine ? ids.get(e.routine.id) : undefined;
    if (at !== undefined) {
      return {
        refused: `routine "${e.routine!.id}" is in ${file} already (routines[${at}]): rename or remove it there, or change the crontab's job, then import again; nothing was written`,
      };
    }
  }
  // the project's locks: those declared, and those its routines take undeclared (one slot each)
  const existing: Record<string, unknown> = { ...((config.locks as Record<string, unknown> | undefined) ?? {}) };
  for (const r of routines)
    if (isObj(r) && typeof r.lock === 'string' && !Object.hasOwn(existing, r.lock)) existing[r.lock] = {};
  // A lock of the project with the imported lock's name is the same lock only when it is the
  // same lock file's (its comment names the file, as an import writes it) with one slot; else the
  // imported one gets a name of its own, so jobs cron ran side by side (another file) or one at a
  // time (a lock with more slots) stay so
  const taken = new Set([...Object.keys(existing), ...imported.locks.map((l) => l.name)]);
  const renamed = new Map<string, { to: string; why: string }>();
  for (const l of imported.locks) {
    // the file's lock already in the project (a crontab imported before), whatever its name
    const same = Object.keys(existing).find((name) => sameLockFile(text, name, l.file, existing[name]));
    if (same !== undefined) {
      if (same !== l.name) renamed.set(l.name, { to: same, why: `the project's lock of ${printable(l.file)}` });
      continue;
    }
    if (!Object.hasOwn(existing, l.name)) continue;
    let name = '';
    // (within a lock name's 63 characters)
    for (let n = 2; name === '' || taken.has(name); n++)
      name = `${l.name.slice(0, 63 - `-${n}`.length).replace(/-+$/, '')}-${n}`;
    taken.add(name);
    renamed.set(l.name, {
      to: name,
      why: `the project's lock "${l.name}" is another file's or has more slots, and ${printable(l.file)} gets one of its own`,
    });
  }
  const locks = imported.locks
    .map((l) => ({ ...l, name: renamed.get(l.name)?.to ?? l.name }))
    .filter((l) => !Object.hasOwn(existing, l.name));
  const importedEntries =
    renamed.size === 0 ? imported.entries : imported.entries.map((e) => withLockRenamed(e, renamed));
  const edits: { at: number; end?: number; text: string }[] = [];
  const heading = imported.head.slice(0, 1).map((c) => `    // ${c}`);
  const entries = [...heading, ...routineLines(importedEntries, '    ')];
  /** New members of the top-level object, added together at its end. */
  const added: string[] = [];
  const insertInto = (member: Member | undefined, name: string, lines: string[], bracket: '[]' | '{}'): void => {
    if (lines.length === 0) return;
    if (!member) {
      added.push(`\n  ${JSON.stringify(name)}: ${bracket[0]}\n${lines.join('\n')}\n  ${bracket[1]}`);
      return;
    }
    const last = lastSignificant(clean, member.end);
    if (last === member.start) {
      // empty: the new lines go after what it holds (comments: a commented-out entry is kept)
      let after = member.end;
      while (after > member.start + 1 && /\s/.test(text[after - 1]!)) after--;
      if (after === member.start + 1)
        edits.push({
          at: member.start,
          end: member.end + 1,
          text: `${bracket[0]}\n${lines.join('\n')}\n  ${bracket[1]}`,
        });
      else {
        const own = /[\r\n]/.test(text.slice(after, member.end));
        edits.push({ at: after, text: `\n${lines.join('\n')}${own ? '' : '\n  '}` });
      }
    } else {
      // the rest of that line (a closing bracket on it: `"locks": { … }`) goes on a line of its
      // own, out of the reach of the new lines' comments
      const rest = /^[^\r\n]*/.exec(text.slice(last + 1))![0];
      // (a comment ending that line stays on it: it is about its member)
      if (rest.trim().startsWith('//')) {
        edits.push({ at: last + 1, text: ',' });
        edits.push({ at: last + 1 + rest.length, text: `\n${lines.join('\n')}` });
      } else edits.push({ at: last + 1, text: `,\n${lines.join('\n')}${rest.trim() !== '' ? '\n  ' : ''}` });
    }
  };
  insertInto(top.members.get('locks'), 'locks', lockLines(locks, '    '), '{}');
  insertInto(top.members.get('routines'), 'routines', entries, '[]');
  if (added.length > 0) {
    const last = lastSignificant(clean, top.close);
    const rest = /^[^\r\n]*/.exec(text.slice(last + 1))![0];
    edits.push({
      at: last + 1,
      text: `${last > top.open ? ',' : ''}${added.join(',')}${rest.trim() !== '' ? '\n' : ''}`,
    });
  }
  // the file's own line ends (an editor on Windows writes CRLF): the new lines end as its do
  const eol = text.includes('\r\n') ? '\r\n' : '\n';
  let out = text;
  for (const e of edits.sort((a, b) => b.at - a.at))
    out = out.slice(0, e.at) + (eol === '\n' ? e.text : e.text.replaceAll('\n', eol)) + out.slice(e.end ?? e.at);
  return { text: out, added: { routines: imported.routines, locks: locks.map((l) => l.name) } };
}
