// Pure validation: JSON in, `{ok, config}` or issues with JSON paths out (changesets'
// validateConfig). Every message names the path, the bad value and what is allowed.
// (Over 300 lines: the config's rules that zod's shapes cannot say, one after another.)

import { isAbsolute, normalize } from 'node:path';
import * as z from 'zod/mini';
import type { ConfigIssue } from '../errors.js';
import { cronProblem, isValidTimezone } from './cron.js';
import { parseListen } from './listen.js';
import { allowedKeysAt, configSchema, taskSchema, type RawConfig } from './schema.js';
import {
  EXEC_LOCK_NAME,
  reservedLockName,
  ID_PATTERN,
  LOCK_NAME_PATTERN,
  NOTIFY_EVENTS,
  RETENTION_DEFAULTS,
  type Config,
  type NotifyDef,
  type NotifyEvent,
  type RoutineDef,
  type TaskDef,
} from './types.js';

export type Validation<T> = { ok: true; value: T } | { ok: false; issues: ConfigIssue[] };

export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else if (/^[A-Za-z_$][\w$]*$/.test(String(seg))) out += out ? `.${String(seg)}` : String(seg);
    else out += `[${JSON.stringify(String(seg))}]`;
  }
  return out;
}

/** Deeper than any config needs (a routine's notify headers are 5 levels down). */
export const MAX_CONFIG_DEPTH = 32;

/**
 * What no config can use, found before anything else reads the value (without recursion, so a
 * file of 100 000 nested brackets is an answer, not a stack overflow): a NUL byte in any string
 * or key (no command, path or environment value can hold one), and nesting deeper than
 * MAX_CONFIG_DEPTH. At most one issue per kind, at the first place found.
 */
export function unworkableValues(input: unknown, base: readonly PropertyKey[] = []): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  let nul = false;
  let deep = false;
  const stack: { v: unknown; path: PropertyKey[] }[] = [{ v: input, path: [...base] }];
  while (stack.length > 0 && !(nul && deep)) {
    const { v, path } = stack.pop()!;
    if (typeof v === 'string') {
      if (!nul && v.includes('\0')) {
        nul = true;
        issues.push({
          path: formatPath(path),
          message: 'holds a NUL byte (\\u0000): no command, path or environment value can',
        });
      }
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (path.length - base.length >= MAX_CONFIG_DEPTH) {
      if (!deep) {
        deep = true;
        issues.push({
          path: formatPath(path),
          message: `is nested deeper than ${MAX_CONFIG_DEPTH} levels, more than any config needs`,
        });
      }
      continue;
    }
    const entries: [PropertyKey, unknown][] = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [k, x] = entries[i]!;
      if (!nul && typeof k === 'string' && k.includes('\0')) {
        nul = true;
        issues.push({
          path: formatPath([...path, k]),
          message: 'is a key with a NUL byte (\\u0000): no name can hold one',
        });
      }
      stack.push({ v: x, path: [...path, k] });
    }
  }
  return issues;
}

/** An environment variable's name: what a shell can set (`B=C` would set `B` to `C=…`). */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Issues for env names that are not names (`env` of a routine or a task). */
export function envNameIssues(env: Record<string, string> | undefined, path: readonly PropertyKey[]): ConfigIssue[] {
  return Object.keys(env ?? {})
    .filter((k) => !ENV_NAME.test(k))
    .map((k) => ({ path: formatPath([...path, k]), message: envNameMessage(k) }));
}

const envNameMessage = (k: string): string =>
  `${showValue(k)} is not an environment variable name (letters, digits and "_", not starting with a digit)`;

export function showValue(v: unknown): string {
  if (v === undefined) return 'missing';
  // a number too large to read (1e400 reads as Infinity): said as such, not as null
  if (typeof v === 'number' && !Number.isFinite(v)) return 'a number too large to read (over 1.8e308)';
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let cur: unknown = root;
  for (const seg of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[seg as string];
  }
  return cur;
}

const ID_WORDS = 'letters, digits, ".", "_", "-"; starts with a letter or digit; at most 64 characters';
const LOCK_NAME_WORDS =
  'lowercase letters, digits, "_" and "-"; starts with a letter or digit; at most 63 characters; "exec" is the project exec lock';

const typeName = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);
/** "a string", "an array", "an object", "null" */
const aTypeName = (v: unknown): string => {
  const t = typeName(v);
  return t === 'null' ? t : /^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`;
};

/** Turns zod issues into our messages: path, bad value, what is allowed. */
function zodIssues(
  error: z.core.$ZodError,
  input: unknown,
  prefix: PropertyKey[] = [],
  inTaskFile = false,
): ConfigIssue[] {
  // of two "too big" at one path (an integer's safe range, and the field's own maximum), the
  // field's own: one line, the bound that matters
  const key = (i: z.core.$ZodIssue): string => JSON.stringify(i.path);
  const tighter = (i: z.core.$ZodIssue): boolean =>
    i.code === 'too_big' &&
    error.issues.some(
      (o) => o !== i && o.code === 'too_big' && key(o) === key(i) && Number(o.maximum) < Number(i.maximum),
    );
  return error.issues
    .filter((i) => !tighter(i))
    .flatMap((issue): ConfigIssue | ConfigIssue[] => {
      const path = [...prefix, ...issue.path];
      const value = valueAt(input, issue.path);
      let message: string;
      switch (issue.code) {
        case 'invalid_union': {
          // `false` or an object (a routine's notify): the object's own issues, each by its path,
          // rather than "Invalid input" for the whole value
          const branch = issue.errors.find(
            (b) => b.length > 0 && !b.every((i) => i.path.length === 0 && i.code !== 'unrecognized_keys'),
          );
          if (branch) return zodIssues({ issues: branch } as z.core.$ZodError, value, path, inTaskFile);
          // none came close: what each would take
          const wanted = issue.errors.flatMap((b) =>
            b.flatMap((i) =>
              i.code === 'invalid_value'
                ? i.values.map((v) => JSON.stringify(v))
                : i.code === 'invalid_type'
                  ? [i.expected === 'object' ? 'an object' : i.expected]
                  : [],
            ),
          );
          message =
            wanted.length > 0
              ? `${showValue(value)} is ${aTypeName(value)}; expected ${wanted.join(' or ')}`
              : `${showValue(value)}: ${issue.message}`;
          break;
        }
        case 'invalid_type':
          message =
            value === undefined
              ? `is required (${issue.expected})`
              : typeof value === 'number' && !Number.isFinite(value)
                ? `is ${showValue(value)}`
                : `${showValue(value)} is ${aTypeName(value)}; expected ${issue.expected}`;
          break;
        case 'unrecognized_keys': {
          const allowed = allowedKeysAt(issue.path, inTaskFile);
          const keys = issue.keys.map((k) => JSON.stringify(k)).join(', ');
          const guesses = allowed
            ? issue.keys.map((k) => closest(k, allowed)).filter((g): g is string => g !== null)
            : [];
          const guess = guesses.length ? `did you mean ${guesses.map((g) => JSON.stringify(g)).join(', ')}? ` : '';
          message = `unknown key${issue.keys.length > 1 ? 's' : ''} ${keys}${allowed ? ` (${guess}allowed: ${allowed.join(', ')})` : ''}`;
          break;
        }
        case 'invalid_value':
          message = `${showValue(value)} is not one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
          break;
        case 'too_small':
          message = `${showValue(value)} is too small (minimum ${issue.minimum}${issue.inclusive === false ? ', exclusive' : ''})`;
          if (issue.origin === 'string') message = `${showValue(value)} must not be empty`;
          break;
        case 'too_big':
          message = `${showValue(value)} is too big (maximum ${issue.maximum})`;
          break;
        case 'invalid_format': {
          const pattern = issue.format === 'regex' && 'pattern' in issue ? String(issue.pattern) : '';
          message = pattern.includes(ID_PATTERN.source)
            ? `${showValue(value)} is not a valid id (${ID_WORDS})`
            : pattern.includes(LOCK_NAME_PATTERN.source)
              ? `${showValue(value)} is not a lock name (${LOCK_NAME_WORDS})`
              : pattern.includes(ENV_NAME.source)
                ? envNameMessage(String(value))
                : `${showValue(value)} has an invalid format (${issue.format})`;
          break;
        }
        case 'invalid_key': {
          // a key of a map: a lock's name under "locks", a provider's id under "exec.providers"
          const key = String(issue.path.at(-1));
          message =
            path[0] === 'locks'
              ? `${JSON.stringify(key)} is not a lock name (${LOCK_NAME_WORDS})`
              : `${JSON.stringify(key)} is not a valid id (${ID_WORDS})`;
          break;
        }
        default:
          message = `${showValue(value)}: ${issue.message}`;
      }
      return { path: formatPath(path), message };
    });
}

export interface ValidateOptions {
  /** Skip cron/zone checks (they load croner); used by commands that never schedule. */
  schedules?: boolean;
}

export function validateConfig(input: unknown, options: ValidateOptions = {}): Validation<Config> {
  const unworkable = unworkableValues(input);
  if (unworkable.length > 0) return { ok: false, issues: unworkable };
  const parsed = z.safeParse(configSchema, input);
  if (!parsed.success) return { ok: false, issues: zodIssues(parsed.error, input) };
  const raw: RawConfig = parsed.data;
  const issues: ConfigIssue[] = [];

  const ttl = raw.lock?.ttlSeconds ?? 60;
  const refresh = raw.lock?.refreshSeconds;
  if (refresh !== undefined && refresh >= ttl / 2) {
    issues.push({ path: 'lock.refreshSeconds', message: `${refresh} must be below ttlSeconds/2 (${ttl / 2})` });
  }

  const backendType = raw.backend?.type ?? raw.lock?.backend ?? 'file';
  if (raw.backend && raw.lock?.backend && raw.backend.type !== raw.lock.backend) {
    issues.push({
      path: 'lock.backend',
      message: `${showValue(raw.lock.backend)} contradicts backend.type ${showValue(raw.backend.type)}`,
    });
  }
  if (backendType !== 'postgres' && raw.backend?.poolSize !== undefined) {
    issues.push({
      path: 'backend.poolSize',
      message: `${raw.backend.poolSize} applies to the postgres backend only (backend.type is ${showValue(backendType)})`,
    });
  }
  if (backendType === 'postgres' && raw.project === undefined) {
    issues.push({
      path: 'project',
      message:
        'is required with the postgres backend (it names the project in the database, where checkout paths differ between hosts)',
    });
  }

  const providers = raw.exec?.providers ?? {};
  const tasks = raw.exec?.tasks ?? [];
  issues.push(
    ...validateTaskSet(
      tasks.map((task, i) => ({ task, path: ['exec', 'tasks', i] })),
      providers,
    ),
  );
  for (const [i, dir] of (raw.exec?.taskDirs ?? []).entries()) {
    const problem = relativePathProblem(dir);
    if (problem) issues.push({ path: formatPath(['exec', 'taskDirs', i]), message: `${showValue(dir)} ${problem}` });
    // the state folder as a task folder (read without its subfolders): routinely's own files
    // there would be read as task files, and every exec command refused once they are written
    const folder = (p: string): string => normalize(p).replace(/(.)\/+$/, '$1');
    if (!problem && folder(raw.stateDir ?? '.routinely') === folder(dir))
      issues.push({
        path: 'stateDir',
        message: `${showValue(raw.stateDir ?? '.routinely')} is also exec.taskDirs[${i}]: the files routinely keeps there would be read as task files; give the state folder a folder of its own`,
      });
  }

  if (raw.http?.listen !== undefined) {
    const listen = parseListen(raw.http.listen);
    if (typeof listen === 'string')
      issues.push({ path: 'http.listen', message: `${showValue(raw.http.listen)} is not [HOST:]PORT: ${listen}` });
  }

  const retention = { ...RETENTION_DEFAULTS, ...raw.retention };
  if (retention.routineLogBytes < 2 * retention.runLogBytes) {
    const which = raw.retention?.routineLogBytes !== undefined ? 'routineLogBytes' : 'runLogBytes';
    issues.push({
      path: `retention.${which}`,
      message: `routineLogBytes (${retention.routineLogBytes}) must be at least 2 x runLogBytes (${retention.runLogBytes}): a routine's log holds its last run whole`,
    });
  }

  const routines: RoutineDef[] = [];
  const seen = new Map<string, number>();
  for (const [i, r] of (raw.routines ?? []).entries()) {
    const at = (key: string): string => formatPath(['routines', i, key]);
    const first = seen.get(r.id);
    if (first !== undefined)
      issues.push({ path: at('id'), message: `${showValue(r.id)} is a duplicate (also routines[${first}])` });
    else seen.set(r.id, i);
    if (r.action === 'command' && r.run === undefined) {
      issues.push({ path: at('run'), message: 'is required when action is "command"' });
    }
    if (r.action !== 'command' && r.run !== undefined) {
      issues.push({ path: at('run'), message: `is only allowed with action "command" (action is "${r.action}")` });
    }
    issues.push(...envNameIssues(r.env, ['routines', i, 'env']));
    if ((r.env !== undefined || r.cwd !== undefined) && r.action !== 'command') {
      issues.push({
        path: at(r.env !== undefined ? 'env' : 'cwd'),
        message: `is only allowed with action "command" (action is "${r.action}")`,
      });
    }
    if (r.cwd !== undefined) {
      const problem = relativePathProblem(r.cwd);
      if (problem) issues.push({ path: at('cwd'), message: `${showValue(r.cwd)} ${problem}` });
    }
    if (r.run !== undefined && r.run.trim() === '') issues.push({ path: at('run'), message: BLANK_RUN });
    if (r.timezone !== undefined && !isValidTimezone(r.timezone)) {
      issues.push({
        path: at('timezone'),
        message: `${showValue(r.timezone)} is not a known IANA time zone (e.g. "Europe/Berlin", "UTC")`,
      });
    } else if (options.schedules !== false) {
      const problem = cronProblem(r.schedule, r.timezone);
      if (problem)
        issues.push({
          path: at('schedule'),
          message: `${showValue(r.schedule)} is not a valid cron expression (${problem})`,
        });
    }
    if (r.waitTimeoutSeconds !== undefined && r.ifBusy !== 'wait') {
      issues.push({ path: at('waitTimeoutSeconds'), message: 'is only allowed with "ifBusy": "wait"' });
    }
    if (r.exclusive === false) {
      if (r.action !== 'command')
        issues.push({
          path: at('exclusive'),
          message: `false is only allowed with action "command" (action "${r.action}" always runs under the exec lock)`,
        });
      else if (r.ifBusy !== undefined)
        issues.push({
          path: at('ifBusy'),
          message:
            'is only allowed for a routine that takes a lock ("exclusive": false takes none, so it is never busy)',
        });
      else if (r.lock !== undefined)
        issues.push({
          path: at('lock'),
          message: 'is only allowed for a routine that takes a lock ("exclusive": false takes none)',
        });
    }
    const reservedLock = r.lock === undefined ? null : reservedLockName(r.lock);
    if (reservedLock) issues.push({ path: at('lock'), message: reservedLock });
    if (r.lock !== undefined && r.lock !== EXEC_LOCK_NAME && r.action !== 'command') {
      issues.push({
        path: at('lock'),
        message: `is only allowed with action "command" (action "${r.action}" always runs under the exec lock)`,
      });
    }
    if (r.notify) issues.push(...notifyProblems(r.notify, ['routines', i, 'notify']));
    const { notify, ...rest } = r;
    routines.push({
      ...rest,
      enabled: r.enabled ?? true,
      jitterSeconds: r.jitterSeconds ?? 0,
      catchUp: r.catchUp ?? 'none',
      ifBusy: r.ifBusy ?? 'skip',
      manualIfBusy: r.ifBusy ?? 'fail',
      exclusive: r.exclusive ?? true,
      lock: r.lock ?? EXEC_LOCK_NAME,
      starvedAfterSkips: r.starvedAfterSkips ?? 3,
      ...(notify === false ? { notify: false as const } : notify ? { notify: notifyDef(notify) } : {}),
    });
  }
  if (raw.notify) issues.push(...notifyProblems(raw.notify, ['notify']));
  const locks: Record<string, { slots: number }> = {};
  for (const [name, l] of Object.entries(raw.locks ?? {})) {
    if (name === EXEC_LOCK_NAME)
      issues.push({
        path: formatPath(['locks', name]),
        message: '"exec" is the project exec lock: it is not declared, and has one slot',
      });
    const reserved = reservedLockName(name);
    if (reserved) issues.push({ path: formatPath(['locks', name]), message: reserved });
    locks[name] = { slots: l.slots ?? 1 };
  }
  if (issues.length > 0) return { ok: false, issues };

  return {
    ok: true,
    value: {
      project: raw.project,
      stateDir: raw.stateDir ?? '.routinely',
      backend: {
        type: backendType,
        ...(raw.backend?.url !== undefined ? { url: raw.backend.url } : {}),
        poolSize: raw.backend?.poolSize ?? 2,
      },
      lock: { ttlSeconds: ttl, refreshSeconds: refresh },
      exec: {
        parallel: raw.exec?.parallel ?? 2,
        providers,
        tasks,
        taskDirs: raw.exec?.taskDirs ?? [],
      },
      routines,
      locks,
      passEnv: raw.passEnv ?? [],
      http: raw.http ? { listen: raw.http.listen ?? null, actions: raw.http.actions === true } : null,
      notify: raw.notify ? notifyDef(raw.notify) : null,
      retention,
    },
  };
}

type RawNotify = { webhook?: string; command?: string; on?: NotifyEvent[]; outputLines?: number };

/** Lines of output a notification carries by default (SPEC §10: as cron mails a job's output). */
export const NOTIFY_OUTPUT_LINES = 20;

function notifyDef(n: RawNotify): NotifyDef {
  return {
    ...(n.webhook !== undefined ? { webhook: n.webhook } : {}),
    ...(n.command !== undefined ? { command: n.command } : {}),
    on: n.on ?? [...NOTIFY_EVENTS],
    outputLines: n.outputLines ?? NOTIFY_OUTPUT_LINES,
  };
}

function notifyProblems(n: RawNotify, path: PropertyKey[]): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  if (n.webhook === undefined && n.command === undefined) {
    out.push({
      path: formatPath(path),
      message: 'needs "webhook" or "command" (or both); to silence a routine use "notify": false',
    });
  }
  if (n.webhook !== undefined) {
    let url: URL | null = null;
    try {
      url = new URL(n.webhook);
    } catch {
      // reported below
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      out.push({ path: formatPath([...path, 'webhook']), message: 'is not an http: or https: URL' });
    }
  }
  if (n.on !== undefined && n.on.length === 0)
    out.push({
      path: formatPath([...path, 'on']),
      message: 'is empty: list at least one event, or use "notify": false',
    });
  return out;
}

export interface LocatedTask {
  task: TaskDef;
  /** JSON path inside its file. */
  path: PropertyKey[];
  /** The task file, when the task does not come from routinely.json. */
  file?: string;
}

/** Checks a whole task set: unique ids, known providers, known dependencies, no cycles,
 * `cwd` inside the project. */
export function validateTaskSet(tasks: LocatedTask[], providers: Record<string, unknown>): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const byId = new Map<string, LocatedTask>();
  const issue = (t: LocatedTask, key: string | number | (string | number)[], message: string): void => {
    const tail = Array.isArray(key) ? key : [key];
    issues.push({ ...(t.file ? { file: t.file } : {}), path: formatPath([...t.path, ...tail]), message });
  };
  // a task file's one task has no path inside it: the file alone
  const where = (t: LocatedTask): string => [t.file, formatPath(t.path)].filter((x): x is string => !!x).join(': ');
  for (const t of tasks) {
    const prior = byId.get(t.task.id);
    if (prior) issue(t, 'id', `${showValue(t.task.id)} is a duplicate (also ${where(prior)})`);
    else byId.set(t.task.id, t);
    const provider = t.task.provider ?? 'default';
    if (provider !== 'default' && !Object.hasOwn(providers, provider)) {
      const known = ['default', ...Object.keys(providers).filter((p) => p !== 'default')];
      issue(t, 'provider', `${showValue(provider)} is not a provider in exec.providers (known: ${known.join(', ')})`);
    }
    for (const k of Object.keys(t.task.env ?? {})) if (!ENV_NAME.test(k)) issue(t, ['env', k], envNameMessage(k));
    if (t.task.run.trim() === '') issue(t, 'run', BLANK_RUN);
    if (t.task.cwd !== undefined) {
      const problem = relativePathProblem(t.task.cwd);
      if (problem) issue(t, 'cwd', `${showValue(t.task.cwd)} ${problem}`);
    }
  }
  for (const t of tasks) {
    for (const [j, dep] of (t.task.dependsOn ?? []).entries()) {
      if (!byId.has(dep)) issue(t, ['dependsOn', j], `${showValue(dep)} is not a task id`);
      else if (dep === t.task.id) issue(t, ['dependsOn', j], `${showValue(dep)} is the task itself`);
    }
  }
  if (issues.length === 0) {
    const cycle = findCycle(tasks.map((t) => t.task));
    if (cycle) {
      const t = byId.get(cycle[0]!)!;
      issue(t, 'dependsOn', `dependency cycle: ${cycle.join(' -> ')}`);
    }
  }
  return issues;
}

/** A relative path that stays inside the project root, or why not. */
/** A command of blanks only runs nothing, and says nothing of why. */
const BLANK_RUN = 'is blank: give the shell command to run';

export function relativePathProblem(p: string): string | null {
  if (isAbsolute(p)) return 'must be relative to the project root';
  const n = normalize(p);
  if (n === '..' || n.startsWith('../')) return 'leaves the project root';
  return null;
}

/** Returns one dependency cycle as ids (first id repeated at the end), or null. */
export function findCycle(tasks: readonly TaskDef[]): string[] | null {
  const deps = new Map(tasks.map((t) => [t.id, t.dependsOn ?? []]));
  const state = new Map<string, 'visiting' | 'done'>();
  const stack: string[] = [];
  const visit = (id: string): string[] | null => {
    const s = state.get(id);
    if (s === 'done') return null;
    if (s === 'visiting') return [...stack.slice(stack.indexOf(id)), id];
    state.set(id, 'visiting');
    stack.push(id);
    for (const d of deps.get(id) ?? []) {
      const c = visit(d);
      if (c) return c;
    }
    stack.pop();
    state.set(id, 'done');
    return null;
  };
  for (const t of tasks) {
    const c = visit(t.id);
    if (c) return c;
  }
  return null;
}

/** Validates the contents of one task file (one task or an array of tasks). */
export function validateTaskFile(input: unknown, file: string): Validation<LocatedTask[]> {
  const unworkable = unworkableValues(input);
  if (unworkable.length > 0) return { ok: false, issues: unworkable.map((i) => ({ ...i, file })) };
  const list = Array.isArray(input) ? input : [input];
  const located: LocatedTask[] = [];
  const issues: ConfigIssue[] = [];
  for (const [i, item] of list.entries()) {
    const prefix = Array.isArray(input) ? [i] : [];
    const parsed = z.safeParse(taskSchema, item);
    if (!parsed.success) {
      issues.push(...zodIssues(parsed.error, item, prefix, true).map((x) => ({ ...x, file })));
    } else {
      located.push({ task: parsed.data, path: prefix, file });
    }
  }
  return issues.length > 0 ? { ok: false, issues } : { ok: true, value: located };
}

/** Edits (insert, delete, replace, swap two neighbours) from a to b. */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/** The allowed key a misspelt one most likely meant (`shedule` → `schedule`), or null when none
 * is close: at most 2 edits, and fewer than a third of the key's length. */
export function closest(key: string, allowed: readonly string[]): string | null {
  let best: string | null = null;
  let bestD = Infinity;
  for (const a of allowed) {
    const d = editDistance(key.toLowerCase(), a.toLowerCase());
    if (d < bestD) [best, bestD] = [a, d];
  }
  return bestD <= Math.min(2, Math.max(1, Math.floor(key.length / 3))) ? best : null;
}
