// `routinely import-crontab --merge` (SPEC §10): the imported routines and named locks added to a
// project's routinely.json as text, so that every comment and every byte of the file stays where
// it was (`routinely init` writes a commented file). The file is read as JSON with comments;
// comments are blanked out only to find where the members are (stripJsonComments keeps every
// position), and the new lines are inserted at those positions. An id the file has already is
// refused by name, never renamed or replaced.

import { stripJsonComments } from './find.js';
import { lockLines, routineLines, type Imported } from './crontab.js';
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
  const have = new Set(Object.keys((config.locks as Record<string, unknown> | undefined) ?? {}));
  const locks = imported.locks.filter((l) => !have.has(l.name));
  const edits: { at: number; end?: number; text: string }[] = [];
  const heading = imported.head.slice(0, 1).map((c) => `    // ${c}`);
  const entries = [...heading, ...routineLines(imported.entries, '    ')];
  /** New members of the top-level object, added together at its end. */
  const added: string[] = [];
  const insertInto = (member: Member | undefined, name: string, lines: string[], bracket: '[]' | '{}'): void => {
    if (lines.length === 0) return;
    if (!member) {
      added.push(`\n  ${JSON.stringify(name)}: ${bracket[0]}\n${lines.join('\n')}\n  ${bracket[1]}`);
      return;
    }
    const last = lastSignificant(clean, member.end);
    if (last === member.start)
      edits.push({
        at: member.start,
        end: member.end + 1,
        text: `${bracket[0]}\n${lines.join('\n')}\n  ${bracket[1]}`,
      });
    else {
      // the rest of that line (a closing bracket on it: `"locks": { … }`) goes on a line of its
      // own, out of the reach of the new lines' comments
      const rest = /^[^\n]*/.exec(text.slice(last + 1))![0];
      edits.push({ at: last + 1, text: `,\n${lines.join('\n')}${rest.trim() !== '' ? '\n  ' : ''}` });
    }
  };
  insertInto(top.members.get('locks'), 'locks', lockLines(locks, '    '), '{}');
  insertInto(top.members.get('routines'), 'routines', entries, '[]');
  if (added.length > 0) {
    const last = lastSignificant(clean, top.close);
    const rest = /^[^\n]*/.exec(text.slice(last + 1))![0];
    edits.push({
      at: last + 1,
      text: `${last > top.open ? ',' : ''}${added.join(',')}${rest.trim() !== '' ? '\n' : ''}`,
    });
  }
  let out = text;
  for (const e of edits.sort((a, b) => b.at - a.at)) out = out.slice(0, e.at) + e.text + out.slice(e.end ?? e.at);
  return { text: out, added: { routines: imported.routines, locks: locks.map((l) => l.name) } };
}
