// `routinely import-crontab` (SPEC §10): a crontab's jobs as routinely.json content. Pure: text
// in, the config text (JSON with comments) and the notes for stderr out. Every line is accounted
// for: a job becomes a routine, an environment line goes into the `env` of the jobs below it (as
// cron builds each job's environment from the lines above it), and what cannot be carried
// (`@reboot`, an unescaped `%`, a line that is neither) is named in a comment and in a note.
// (Over 300 lines: the line parser, cron's environment rules and the config writer, pure and
// tested as one translation.)

import { printable as escapeControls } from '../printable.js';
import { cronProblem, isValidTimezone } from './cron.js';
import { ID_PATTERN, reservedLockName } from './types.js';
import { shellQuote } from '../shell-quote.js';

export interface ImportOptions {
  /** The name of the input in comments and notes (a path, or "stdin"). */
  source: string;
  /** A system crontab (/etc/crontab, /etc/cron.d/*): a user column after the schedule. */
  system: boolean;
  /** The `$schema` the output starts with (default the installed package's). */
  schema?: string;
  /** Whether a user of a system crontab's user column exists here (default: every one does). */
  userKnown?: (name: string) => boolean;
  /** Why cron skips the whole file whatever it holds (a file of /etc/cron.d by its name or
   * mode), or undefined. */
  cronSkips?: string;
  /** The zone cron ran the jobs in, given to each routine without CRON_TZ: for a project that
   * schedules a routine without `timezone` in UTC (the PostgreSQL backend), not in this
   * machine's zone as cron did. */
  zoneForUnzoned?: string;
}

export interface Imported {
  /** routinely.json content (JSON with comments) */
  text: string;
  /** One line per thing not carried or changed in meaning, for stderr. */
  notes: string[];
  routines: number;
  /** The header comment, the routines with their comments and the locks (for `--merge`). */
  head: string[];
  entries: Entry[];
  locks: LockEntry[];
}

export interface Routine {
  id: string;
  schedule: string;
  action: 'command';
  run: string;
  timezone?: string;
  lock?: string;
  exclusive?: false;
  ifBusy?: 'wait';
  waitTimeoutSeconds?: number;
  env?: Record<string, string>;
}

export interface Entry {
  comments: string[];
  routine: Routine | null;
}

/** A named lock made of a flock lock file (SPEC §4.16): one name per file. */
export interface LockEntry {
  name: string;
  file: string;
}

/** cronProblem's words for what cron itself refuses (measured beside Debian's daemon: "bad
 * minute", "bad hour", "bad day-of-week", "bad month"); a range that runs backwards or a date that
 * never comes cron takes and never fires. */
const CRON_REFUSES =
  / out of range | step -?\d+ must be at least 1$| is not a number | is not an? [a-z-]+ name |fields; expected/;

const ENV_LINE = /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/;
/** What cron reads as an environment line: a name up to blanks or "=" (or quoted), then "=". */
const CRON_ENV_LINE = /^\s*("[^"]*"|'[^']*'|[^\s="']+)\s*=\s*(.*)$/;

export function importCrontab(input: string, o: ImportOptions): Imported {
  const notes: string[] = [];
  const head: string[] = [
    `Imported from ${o.source} by routinely import-crontab. Check it with \`routinely validate\`.`,
    'cron ran these from your home directory with a small environment of its own, which each',
    'routine\'s "env" carries: PATH=/usr/bin:/bin and SHELL=/bin/sh unless the crontab set them, and',
    'every NAME=value line above the job. routinely runs them from the project folder with the',
    'scheduler\'s environment plus that "env".',
    'Each flock lock file became a named lock ("locks"): jobs that shared a file take turns,',
    'jobs on different files run side by side. A job without flock takes no lock',
    '("exclusive": false) and runs beside the others, as under cron. Each routine says which.',
  ];
  const locks: LockEntry[] = [];
  const entries: Entry[] = [];
  // per lock: its jobs that took the file shared (flock -s), and whether any took it exclusive
  const sharing = new Map<
    string,
    { shared: { entry: Entry & { routine: Routine }; where: string }[]; exclusive: boolean }
  >();
  // what cron sets for every job unless the crontab sets it (crontab(5)); HOME and LOGNAME are
  // the scheduler's user's, as they were the crontab owner's
  const env: Record<string, string> = { SHELL: '/bin/sh', PATH: '/usr/bin:/bin' };
  /** The lines for which cron ignores the whole file (none of its jobs ran under cron). */
  const ignoredFor: number[] = [];
  let timezone: string | undefined;
  let badZone: string | null = null;
  const seen = new Set<string>();
  const headNoted = new Set<string>();
  let pending: string[] = [];
  if (input.includes('\r\n'))
    notes.push(
      `${o.source}: CRLF line ends: cron keeps the carriage return in each line (a command's last word ends with it, so those jobs likely failed under cron); carried without it`,
    );
  const lines = input.replace(/\r\n/g, '\n').split('\n');
  // cron ignores a file whose last line has no newline (crontab(1) refuses to install it)
  const unended = lines.at(-1) !== '';
  if (!unended) lines.pop();
  lines.forEach((raw, index) => {
    const where = `${o.source}:${index + 1}`;
    /** `wholeFile`: a line cron refuses ("Syntax error, this crontab file will be ignored"). */
    const notCarried = (why: string, wholeFile = false): void => {
      if (wholeFile) ignoredFor.push(index + 1);
      entries.push({
        comments: [...pending, `not carried: line ${index + 1}: ${printable(raw.trim())}`, `  ${why}`],
        routine: null,
      });
      pending = [];
      notes.push(`${where}: not carried: ${why}`);
    };
    const line = raw.trim();
    if (line === '') return;
    // a byte-order mark (an editor's, at the file's start) is no blank to cron: the line's first
    // field starts with it, "bad minute", and the file is ignored (measured beside Debian's
    // daemon); JavaScript's trim() would take it away unseen
    if (/^[ \t]*\uFEFF/.test(raw)) {
      notCarried(
        'it starts with a byte-order mark (U+FEFF, an editor wrote it): cron reads it as part of the first field ("bad minute") and ignores the whole file; save the crontab without one',
        true,
      );
      return;
    }
    if (line.startsWith('#')) {
      pending.push(printable(line.replace(/^#\s?/, '')));
      return;
    }
    if (unended && index === lines.length - 1) {
      notCarried(
        'the last line of the file has no newline at its end: cron ignores the whole file for it (crontab(1) refuses to install it), so this job never ran; end the file with a newline',
        true,
      );
      return;
    }
    // a name cron takes (it reads one up to blanks or "=", quoted or not: `my.var=1`, `9X=3`,
    // `"QUOTED"=v` were in its jobs' environment, measured beside Debian's daemon) that no shell
    // can set, and routinely's "env" does not take
    // (a quoted name is read without its quotes: `"QUOTED"=v` sets QUOTED)
    const envRaw = raw.replace(/^(\s*)(["'])([A-Za-z_][A-Za-z0-9_]*)\2(?=\s*=)/, '$1$3');
    const odd = ENV_LINE.test(envRaw) ? null : CRON_ENV_LINE.exec(raw);
    if (odd) {
      pending = [];
      notes.push(
        `${where}: ${printable(line)}: cron put ${printable(odd[1]!.replace(/^(["'])(.*)\1$/, '$2'))} in the environment of the jobs below it, but it is no name a shell can set (letters, digits and "_", not starting with a digit), which a routine's "env" takes: not carried`,
      );
      return;
    }
    const assignment = ENV_LINE.exec(envRaw);
    if (assignment && !/^[\d*@]/.test(line)) {
      const name = assignment[1]!;
      const read = envValue(assignment[2]!);
      if ('refused' in read) {
        notCarried(`${name}=${assignment[2]!.trim()}: ${read.refused}`, true);
        return;
      }
      const value = read.value;
      pending = [];
      if (name === 'MAILTO' || name === 'MAILFROM') {
        // (MAILTO="": cron sent no mail either)
        if (!headNoted.has(name) && value !== '') {
          headNoted.add(name);
          const text =
            name === 'MAILTO'
              ? `MAILTO=${value}: routinely sends no mail. For a message when a routine fails (with the last lines of its output, as cron mails them), set "notify": { "command": "./scripts/mail-failure.sh" } or { "webhook": "https://…" } (docs/routines.md, Notifications).`
              : `MAILFROM=${value}: routinely sends no mail; see "notify".`;
          head.push(text);
          notes.push(`${where}: ${text}`);
        }
      } else if (name === 'CRON_TZ') {
        // TZ's own form `:Area/City` too; a zone this machine does not know is said here, and the
        // jobs it would apply to are not carried (their times cannot be known)
        const zone = value.replace(/^:/, '');
        timezone = zone === '' ? undefined : zone;
        badZone = zone !== '' && !isValidTimezone(zone) ? zone : null;
        if (badZone) notes.push(`${where}: CRON_TZ=${value}: not a time zone this machine knows (tz database)`);
        else if (zone !== '' && !headNoted.has(name)) {
          headNoted.add(name);
          const text = `CRON_TZ=${value}: cronie runs the jobs below it in that zone, and so do these routines ("timezone"); Debian's cron ignores CRON_TZ (it ran them in its own zone): if this crontab ran there, remove "timezone" from them to keep their times.`;
          head.push(text);
          notes.push(`${where}: ${text}`);
        }
      } else if (name === 'RANDOM_DELAY') {
        const text = `RANDOM_DELAY=${value}: cronie's random delay in minutes is "jitterSeconds" in routinely (per routine, in seconds); not set here.`;
        head.push(text);
        notes.push(`${where}: ${text}`);
      } else if (name === 'LOGNAME') {
        // (measured beside Debian's daemon: a job saw LOGNAME=root under `LOGNAME=deploy`, as
        // crontab(5) says: it "may not be changed")
        const text = `LOGNAME=${value}: cron sets LOGNAME to the crontab's owner whatever the crontab says, so it is not carried (the scheduler's user's is in the environment, as the owner's was)`;
        notes.push(`${where}: ${text}`);
        return;
      }
      // every assignment is in the environment of the jobs below it, as cron builds it (SHELL,
      // MAILTO and CRON_TZ too: a script that reads them sees what it saw there)
      env[name] = value;
      return;
    }
    const job = splitJob(line, o.system);
    if (typeof job === 'string') {
      notCarried(job, !bareScheduleTaken(line, o.system));
      return;
    }
    // (measured beside Debian's daemon: `Error: bad username`, and the file is ignored)
    if (job.user !== null && o.userKnown && !o.userKnown(job.user)) {
      notCarried(
        `the user ${JSON.stringify(printable(job.user))} does not exist on this machine: cron ignores the whole file for it ("bad username"), so no job of it ran; fix the user column`,
        true,
      );
      return;
    }
    // (`@REBOOT` is a syntax error to cron: cronGrammar below)
    if (job.schedule === '@reboot') {
      notCarried(
        '@reboot runs at boot, which routinely does not see: give the routine a real schedule with "catchUp": "latest" (it fires once at scheduler start when a time was missed), or keep it in cron, or use a systemd oneshot unit (WantedBy=multi-user.target)',
      );
      return;
    }
    if (badZone !== null) {
      notCarried(
        `CRON_TZ=${badZone} (above it) is not a time zone this machine knows: give it an IANA zone such as Europe/Berlin`,
      );
      return;
    }
    // a command that starts with * is the six-field mistake (a seconds field, or a day too many):
    // cron refuses it ("bad command") and ignores the whole file (measured beside Debian's daemon)
    if (job.command.startsWith('*')) {
      notCarried(
        'its command starts with "*": cron refuses that ("bad command", a time field too many?) and ignores the whole file for it, so no job of it ran; crontab lines have five time fields',
        true,
      );
      return;
    }
    // (measured beside Debian's daemon: a command of 1 000 characters is "command too long")
    // in bytes, the blanks after it included, as cron counts (measured beside Debian's daemon: a
    // command of 527 characters and 1007 bytes was "command too long", and 987 characters with
    // 40 blanks after them)
    const commandBytes = Buffer.byteLength(raw.trimStart().slice(line.length - job.command.length));
    if (commandBytes >= 1000) {
      notCarried(
        `its command is ${commandBytes} bytes (the blanks after it too): cron refuses 1000 or more ("command too long") and ignores the whole file for it, so this job never ran; put the command in a script`,
        true,
      );
      return;
    }
    const grammar = cronGrammar(job.schedule);
    if ('refused' in grammar) {
      notCarried(`schedule ${JSON.stringify(job.schedule)}: ${grammar.refused}`, !grammar.cronTook);
      return;
    }
    if (grammar.note) notes.push(`${where}: ${grammar.note}`);
    const days = cronDays(grammar.schedule);
    if ('refused' in days) {
      notCarried(`schedule ${JSON.stringify(job.schedule)}: ${days.refused}`);
      return;
    }
    const problem = cronProblem(days.schedule, timezone);
    if (problem) {
      notCarried(`schedule ${JSON.stringify(job.schedule)}: ${problem}`, CRON_REFUSES.test(problem));
      return;
    }
    const command = cronCommand(job.command);
    if ('refused' in command) {
      notCarried(command.refused);
      return;
    }
    const comments = [...pending, `line ${index + 1}: ${printable(line)}`];
    pending = [];
    if (job.user !== null)
      comments.push(
        `ran as ${job.user} (the user column of a system crontab): routinely runs it as the scheduler's user`,
      );
    if (grammar.note) comments.push(grammar.note);
    if (days.note) {
      comments.push(days.note);
      notes.push(`${where}: ${days.note}`);
    }
    const unwrapped = dropFlock(command.run);
    // cron ran the command with the crontab's SHELL (`$SHELL -c CMD`); routinely runs `run` with
    // /bin/sh -c, which execs that shell the same way
    const shell = env.SHELL!;
    const routine: Routine = {
      id: uniqueId(idFor(unwrapped.run), seen),
      schedule: days.schedule,
      action: 'command',
      // the command as cron ran it, its flock included: a process outside routinely that takes
      // the same file (a deploy script's own flock) still keeps the job out
      run: shell === '/bin/sh' ? command.run : `exec ${shellQuote(shell)} -c ${shellQuote(command.run)}`,
    };
    if (shell !== '/bin/sh')
      comments.push(`run with ${printable(shell)} -c (the crontab's SHELL, above it), as cron ran it`);
    if (timezone) routine.timezone = timezone;
    else if (o.zoneForUnzoned) routine.timezone = o.zoneForUnzoned;
    if (unwrapped.lockFile === undefined) {
      routine.exclusive = false;
      comments.push(
        'no flock: takes no lock ("exclusive": false) and runs beside the other routines, as under cron; unlike cron, never beside itself (a tick while its previous run goes is skipped, "previous run still running")',
      );
    } else {
      const lock = lockFor(unwrapped.lockFile, locks);
      routine.lock = lock.name;
      const shared = `the named lock "${lock.name}" (\`${unwrapped.wrapper}\`: the same file, the same lock)`;
      if (unwrapped.waitSeconds === undefined) {
        comments.push(
          `takes ${shared}: routines on it take turns, others run beside it; a tick that finds it held by something else is skipped (recorded "skipped", not failed), as flock -n exited`,
          `the flock stays in its command: a process outside routinely that holds ${printable(unwrapped.lockFile)} still keeps it out, as under cron (that tick then ends with flock's exit code 1, a failure)`,
        );
      } else {
        routine.ifBusy = 'wait';
        if (unwrapped.waitSeconds !== null) routine.waitTimeoutSeconds = unwrapped.waitSeconds;
        comments.push(
          `takes ${shared}: routines on it take turns, others run beside it; a tick that finds it held waits for it (ifBusy "wait")${unwrapped.waitSeconds !== null ? ` up to ${unwrapped.waitSeconds} s, as flock -w did` : ', as flock did, until shortly before its next tick (then it is recorded "skipped")'}`,
          `the flock stays in its command: a process outside routinely that holds ${printable(unwrapped.lockFile)} still makes it wait, as under cron`,
        );
      }
    }
    routine.env = { ...env };
    const background = backgroundOf(unwrapped.run);
    if (background) {
      const text = `${background}: under cron it went on after the job ended; routinely ends what a command leaves running in its process group and session when the command exits (docs/lock.md, rule 11), so start it with setsid (a session of its own) if it must outlive the job`;
      comments.push(text);
      notes.push(`${where}: ${text}`);
    }
    const entry = { comments, routine };
    entries.push(entry);
    if (routine.lock !== undefined) {
      const s = sharing.get(routine.lock) ?? { shared: [], exclusive: false };
      if (unwrapped.shared) s.shared.push({ entry, where });
      else s.exclusive = true;
      sharing.set(routine.lock, s);
    }
  });
  // flock -s: holders of a shared lock never exclude each other. A file every job took shared
  // is no lock at all; one also taken exclusive is carried as a lock taken in turn (routinely has
  // no shared locks), said
  for (const [name, s] of sharing) {
    if (s.shared.length === 0) continue;
    for (const { entry, where } of s.shared) {
      const text = s.exclusive
        ? `flock -s (shared): routinely has no shared locks, so it takes "${name}" in turn with every other job on it; under cron it ran beside the other shared ones`
        : `flock -s (shared) on every job of this lock file: they never excluded each other, so it takes no lock ("exclusive": false), as under cron they ran side by side`;
      if (!s.exclusive) {
        delete entry.routine.lock;
        delete entry.routine.ifBusy;
        delete entry.routine.waitTimeoutSeconds;
        entry.routine.exclusive = false;
        entry.comments = entry.comments.filter((c) => !c.startsWith('takes the named lock'));
      }
      entry.comments.push(text);
      notes.push(`${where}: ${text}`);
    }
    if (!s.exclusive)
      locks.splice(
        locks.findIndex((l) => l.name === name),
        1,
      );
  }
  if (pending.length > 0) entries.push({ comments: pending, routine: null });
  const count = entries.filter((e) => e.routine).length;
  if (o.zoneForUnzoned && entries.some((e) => e.routine && e.routine.timezone === o.zoneForUnzoned)) {
    const text = `the project's PostgreSQL backend schedules a routine without "timezone" in UTC: each routine without CRON_TZ carries this machine's zone ("timezone": "${o.zoneForUnzoned}"), which cron ran it in`;
    head.push(text);
    notes.push(`${o.source}: ${text}`);
  }
  if (count === 0) notes.push(`${o.source}: no job to import`);
  else if (o.cronSkips !== undefined) {
    const text = `cron skips this whole file: ${o.cronSkips}, so none of its jobs ran under cron; the routines here are what it says, and they will run under routinely`;
    head.push(text);
    notes.push(`${o.source}: ${text}`);
  } else if (ignoredFor.length > 0) {
    // (measured beside Debian's daemon: "Syntax error, this crontab file will be ignored")
    const lines = `line${ignoredFor.length === 1 ? '' : 's'} ${ignoredFor.join(', ')}`;
    const text = `cron ignores this whole file for ${lines} (below, not carried), so none of its jobs ran under cron; the routines here are what its other lines say, and they will run under routinely: fix ${lines} in the crontab too if cron keeps it`;
    head.push(text);
    notes.push(`${o.source}: ${text}`);
  }
  return {
    text: render(o.schema ?? INSTALLED_SCHEMA, head, locks, entries),
    notes,
    routines: count,
    head,
    entries,
    locks,
  };
}

/** The package's schema as a project that installed routinely finds it. */
const INSTALLED_SCHEMA = './node_modules/routinely/config/routinely.schema.json';

function render(schema: string, head: string[], locks: LockEntry[], entries: Entry[]): string {
  const out: string[] = ['{', `  "$schema": ${JSON.stringify(schema)},`, ...head.map((c) => `  // ${c}`)];
  if (locks.length > 0) out.push('  "locks": {', ...lockLines(locks, '    '), '  },');
  out.push('  "routines": [', ...routineLines(entries, '    '), '  ]', '}');
  return `${out.join('\n')}\n`;
}

/** The `locks` members (without the braces), each with its file in a comment. */
export function lockLines(locks: readonly LockEntry[], indent: string): string[] {
  return locks.map(
    (l, i) =>
      `${indent}${JSON.stringify(l.name)}: { "slots": 1 }${i < locks.length - 1 ? ',' : ''} // ${printable(l.file)}`,
  );
}

/** The routines with their comments (without the brackets), separated by commas. */
export function routineLines(entries: readonly Entry[], indent: string): string[] {
  const out: string[] = [];
  const withRoutine = entries.map((e, i) => (e.routine ? i : -1)).filter((i) => i >= 0);
  const last = withRoutine.at(-1);
  entries.forEach((e, i) => {
    for (const c of e.comments) out.push(`${indent}// ${c}`);
    if (!e.routine) return;
    const body = JSON.stringify(e.routine, null, 2)
      .split('\n')
      .map((l) => `${indent}${l}`);
    if (i !== last) body[body.length - 1] += ',';
    out.push(...body);
  });
  return out;
}

/** The named lock of a flock lock file: one name per file, from the file's name (`/tmp/app.lock`
 * → `app`), made unique among the locks of other files. */
function lockFor(file: string, locks: LockEntry[]): LockEntry {
  const known = locks.find((l) => l.file === file);
  if (known) return known;
  const base = (file.split('/').filter(Boolean).pop() ?? 'lock').replace(/\.(lock|lck|pid)$/i, '');
  const cleaned =
    base
      .toLowerCase()
      .replace(/[^a-z0-9_-]+/g, '-')
      .replace(/^[^a-z0-9]+/, '')
      .slice(0, 60) || 'lock';
  // the names the config keeps for itself (exec; exec-run, scheduler and none: config/types.ts)
  const name0 = cleaned === 'exec' || reservedLockName(cleaned) !== null ? `${cleaned}-lock` : cleaned;
  let name = name0;
  for (let n = 2; locks.some((l) => l.name === name); n++) name = `${name0}-${n}`;
  const entry = { name, file };
  locks.push(entry);
  return entry;
}

/** A job line: five time fields (or an @nickname), a user in a system crontab, the command. */
function splitJob(line: string, system: boolean): { schedule: string; user: string | null; command: string } | string {
  const nickname = line.startsWith('@');
  const want = (nickname ? 1 : 5) + (system ? 1 : 0);
  const m = new RegExp(`^((?:\\S+\\s+){${want}})(.*)$`).exec(line);
  if (!m || m[2]!.trim() === '') {
    return `neither a job (${nickname ? 'an @nickname' : 'five time fields'}${system ? ', a user' : ''} and a command) nor an environment line (NAME=value)`;
  }
  const words = m[1]!.trim().split(/\s+/);
  const user = system ? words.pop()! : null;
  return { schedule: words.join(' '), user, command: m[2]!.trim() };
}

/** Whether cron takes a line that is no job (measured beside Debian's daemon): in a user crontab,
 * a schedule alone (five fields it reads, or a nickname) is taken and the rest of the file runs;
 * anything else is a syntax error for which it ignores the whole file ("bad command" in a system
 * crontab, "bad minute" or "bad day-of-week" for too few fields). */
function bareScheduleTaken(line: string, system: boolean): boolean {
  if (system) return false;
  const words = line.split(/\s+/);
  if (words.length === 1) return CRON_NICKNAMES.includes(words[0]!);
  if (words.length !== 5) return false;
  const grammar = cronGrammar(line);
  if ('refused' in grammar) return grammar.cronTook === true;
  const problem = cronProblem(grammar.schedule);
  return problem === null || !CRON_REFUSES.test(problem);
}

/** cron's nicknames: lowercase only (`@HOURLY` is a syntax error to it). */
const CRON_NICKNAMES = ['@reboot', '@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly'];
/** One item of a cron field as Vixie cron reads it: `*`, a number or a name, a range of them, a
 * step. */
const CRON_ITEM = /^(\*|([0-9]+|[a-z]{3})(-([0-9]+|[a-z]{3}))?)(\/[0-9]+)?$/;
/** croner's additions: `?`, a leading `+`, `#n` (left after a day of week's is dropped), `L`,
 * `5L`, `L-3`, `LW`, `15W`. */
const CRONER_ONLY = /[?+#]|^[0-9]*lw?$|^l-[0-9]+$|^[0-9]+w$/i;

/** The schedule as cron's own grammar has it (measured beside Debian's daemon): croner's
 * additions cron refuses (`L`, `W`, `?`, a leading `+`, an uppercase nickname) are not carried —
 * cron ignores the whole file then, so the job never ran — and `#n` after a day of week, which
 * cron reads past (`MON#2` ran every Monday), is dropped with a note, so the routine runs on the
 * days cron ran it. */
function cronGrammar(
  schedule: string,
): { schedule: string; note?: string } | { refused: string; /** cron ran the file */ cronTook?: true } {
  const trimmed = schedule.trim();
  if (trimmed.startsWith('@'))
    return CRON_NICKNAMES.includes(trimmed)
      ? { schedule }
      : {
          refused: `cron knows no nickname ${trimmed} (they are lowercase: ${CRON_NICKNAMES.join(', ')}), and ignores the whole file for it, so this job never ran`,
        };
  const fields = trimmed.split(/\s+/);
  if (fields.length !== 5) return { schedule };
  const dropped: string[] = [];
  const pastEnd: string[] = [];
  const backwards: string[] = [];
  /** Day-of-week ranges that end at `sun`, written with 0. */
  const sunEnds: string[] = [];
  const dayStars: { field: number; item: string }[] = [];
  /** The day fields (2, 4) that held only ranges running backwards: they match no day. */
  const emptyDays: number[] = [];
  const original = [...fields];
  let refusedItem: string | undefined;
  for (const [i, field] of fields.entries()) {
    const items = field.split(',').map((item) => {
      // cron reads past "#n" after a day of week, and past "-M" after a step (`*/5-10` ran as
      // `*/5`: measured beside Debian's daemon, firing at :15)
      const past = (i === 4 ? /^(.*)#[0-9]+$/.exec(item) : null) ?? /^(.*\/[0-9]+)-[0-9]+$/.exec(item);
      if (past) dropped.push(item);
      const read = past ? past[1]! : item;
      // (measured beside Debian's daemon: "bad minute" for `5/10`, `mon-fri/2`'s minute and `1,,2`)
      if (read === '' || /^[0-9a-z]+\/[0-9]+$/i.test(read)) refusedItem ??= read;
      // a step past the field's end: cron ran the first value alone (`*/60` at :00, measured
      // beside Debian's daemon); routinely's check refuses such a step
      // a range that runs backwards matches nothing to cron (measured beside Debian's daemon:
      // `0 1,22-2 * * *` ran at 01:00 alone); `sun` ends a day-of-week range as 0, as cron
      // reads it (`0-sun` ran on Sundays alone), where croner would read 7
      const range = /^([0-9]+|[a-z]{3})-([0-9]+|[a-z]{3})(\/[0-9]+)?$/i.exec(read);
      if (range) {
        const from = cronValue(i, range[1]!);
        const to = cronValue(i, range[2]!);
        if (from !== undefined && to !== undefined && from > to) {
          backwards.push(item);
          return null;
        }
        if (i === 4 && to === 0 && range[2]!.toLowerCase() === 'sun') {
          sunEnds.push(item);
          return `${from}-0${range[3] ?? ''}`;
        }
      }
      const step = /^(\*|[0-9a-z]+(?:-[0-9a-z]+)?)\/([0-9]+)$/i.exec(read);
      const [min, max] = CRON_SPANS[i]!;
      if (!step || Number(step[2]) <= max) return read;
      // a day field that starts with * decides how cron joins the two day fields (below)
      if ((i === 2 || i === 4) && step[1] === '*') dayStars.push({ field: i, item: read });
      pastEnd.push(item);
      return step[1] === '*' ? String(min) : step[1]!.split('-')[0]!;
    });
    if (refusedItem !== undefined)
      return {
        refused:
          refusedItem === ''
            ? `the field "${field}" has an empty item (cron reads numbers, names, ranges and steps between single commas), and cron ignores the whole file for it, so this job never ran`
            : `"${refusedItem}": cron reads a step only after * or a range (a-b), and ignores the whole file for it, so this job never ran: write ${refusedItem.split('/')[0]}-<last>/${refusedItem.split('/')[1]}`,
      };
    // (anything else malformed is named by the schedule check below, in its own words)
    const kept = items.filter((item): item is string => item !== null);
    const odd = kept.find((item) => !CRON_ITEM.test(item.toLowerCase()) && CRONER_ONLY.test(item));
    if (odd !== undefined)
      return {
        refused: `"${odd}" is not cron syntax (cron reads numbers, three-letter names, *, -, / and ,; L, W, ? and + are croner's), and cron ignores the whole file for it, so this job never ran`,
      };
    if (kept.length === 0) {
      if (i !== 2 && i !== 4)
        return {
          cronTook: true,
          refused: `the ${CRON_FIELD_NAMES[i]} field "${field}" holds only ranges that run backwards, which match nothing to cron, so this job never ran`,
        };
      emptyDays.push(i);
    }
    fields[i] = kept.join(',');
  }
  // A day field of backward ranges alone matches no day. cron ORs the two day fields when
  // neither starts with *, so the job ran on the other field's days alone (`0 0 1 * sat-sun` on
  // the 1st); else (AND, or both empty) it never ran.
  for (const i of emptyDays) {
    const other = i === 2 ? 4 : 2;
    if (emptyDays.includes(other) || original[other]!.startsWith('*'))
      return {
        cronTook: true,
        refused: `the ${CRON_FIELD_NAMES[i]} field "${original[i]}" holds only ranges that run backwards, which match no day to cron${emptyDays.includes(other) ? ' (nor does the other day field)' : `, and with ${CRON_FIELD_NAMES[other]} ${original[other]} starting with * cron needs both`}, so this job never ran${i === 4 ? ' (for those days, write them as a list, sat,sun, or with Sunday as 7, 6-7)' : ''}`,
      };
    fields[i] = '*';
  }
  // written out, it no longer starts with *: the days stay cron's only while the other one does
  const lost = dayStars.find((d) => !fields[d.field === 2 ? 4 : 2]!.startsWith('*'));
  if (lost)
    return {
      cronTook: true,
      refused: `"${lost.item}" is a step past the end of its day field, which cron ran at its first value alone; as the field starts with *, cron joined the two day fields with AND, which the schedule cannot say once the step is written out: write the days out`,
    };
  if (dropped.length === 0 && pastEnd.length === 0 && backwards.length === 0 && sunEnds.length === 0)
    return { schedule };
  const carried = fields.join(' ');
  const notes = [
    ...(backwards.length === 0
      ? []
      : [
          `${backwards.join(', ')}: a range that runs backwards, which cron never matched${emptyDays.length > 0 ? ` (its day field matched no day, so cron ran it on the other day field's days alone)` : ''}`,
        ]),
    ...(sunEnds.length === 0
      ? []
      : [`${sunEnds.join(', ')}: cron ends a day-of-week range at sun as 0 (Sunday), where croner would read 7`]),
    ...(dropped.length === 0
      ? []
      : [
          dropped.some((d) => d.includes('#'))
            ? `${dropped.join(', ')}: cron reads past "#n" and ran it on every such day`
            : `${dropped.join(', ')}: cron reads past what follows a step ("-M" after "/N") and ran it as the step alone`,
        ]),
    ...(pastEnd.length === 0
      ? []
      : [`${pastEnd.join(', ')}: a step past the end of its field, which cron ran at its first value alone`]),
  ];
  return {
    schedule: carried,
    note: `${notes.join('; ')}, so it is carried as "${carried}"${dropped.some((d) => d.includes('#')) ? " (croner's #n would run only the nth one of the month)" : ''}`,
  };
}

/** Each field's first and last value as cron reads them (minute, hour, day of month, month, day
 * of week with Sunday as 0 or 7). */
const CRON_SPANS: readonly (readonly [number, number])[] = [
  [0, 59],
  [0, 23],
  [1, 31],
  [1, 12],
  [0, 7],
];

/** cron's day names as numbers (Sunday 0, as Vixie cron reads a range). */
const CRON_DAYS: Record<string, number> = { sun: 0, mon: 1, tue: 2, wed: 3, thu: 4, fri: 5, sat: 6 };
const CRON_MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const CRON_FIELD_NAMES = ['minute', 'hour', 'day-of-month', 'month', 'day-of-week'];

/** A number or a name of field `i` as cron reads it in a range; undefined for what it is not. */
function cronValue(i: number, v: string): number | undefined {
  if (/^[0-9]+$/.test(v)) return Number(v);
  const name = v.toLowerCase();
  if (i === 4) return CRON_DAYS[name];
  if (i === 3) return CRON_MONTHS.includes(name) ? CRON_MONTHS.indexOf(name) + 1 : undefined;
  return undefined;
}

/** The schedule as routinely must write it to keep the days cron ran it on: where cron ANDs the
 * two day fields — one of them starts with `*` but is not `*` itself, as in `0 0 *\/2 * 1` — the
 * day of week gets croner's `+`, with a note (routinely ORs them, as Vixie does for two plain
 * fields). (A day range that runs backwards is cronGrammar's.) */
function cronDays(schedule: string): { schedule: string; note?: string } | { refused: string } {
  const fields = schedule.trim().split(/\s+/);
  if (schedule.trim().startsWith('@') || fields.length !== 5) return { schedule };
  const [, , dom, , dow] = fields as [string, string, string, string, string];
  const starred = (f: string): boolean => f.startsWith('*');
  if ((starred(dom) || starred(dow)) && dom !== '*' && dow !== '*' && !dow.startsWith('+')) {
    const anded = [...fields.slice(0, 4), `+${dow}`].join(' ');
    return {
      schedule: anded,
      note: `days: cron runs "${schedule.trim()}" on days that match both day-of-month ${dom} and day-of-week ${dow} (a day field starting with *); routinely would run it on days matching either, so it is carried as "${anded}" (croner's + before the day of week ANDs them)`,
    };
  }
  return { schedule };
}

/** cron's `%`: an unescaped one ends the command (the rest is its standard input, each further
 * `%` a newline); `\%` is a plain `%`, `\\` a plain `\`. The first is refused by name, the
 * others carried as the shell then gets them. */
function cronCommand(text: string): { run: string } | { refused: string } {
  // as Debian's cron hands the command to the shell (measured beside the daemon: `x='a\\b'` is 3
  // characters, `x='a\\\%b'` 4): a backslash escapes the next character; before `%` or another
  // backslash it is dropped, before anything else kept — so in `\\%` the second backslash is
  // the escaped one and the `%` ends the command
  let run = '';
  let escaped = false;
  for (const c of text) {
    if (escaped) {
      run = c === '%' || c === '\\' ? `${run.slice(0, -1)}${c}` : run + c;
      escaped = false;
    } else if (c === '\\') {
      run += c;
      escaped = true;
    } else if (c === '%') {
      return {
        refused:
          'an unescaped % (cron ends the command there and sends the rest to it as standard input): escape it as \\% if it is a plain %, or put the command and its input in a script',
      };
    } else {
      run += c;
    }
  }
  return { run };
}

interface Word {
  value: string;
  /** index just past the word in the text */
  end: number;
}

/** The first `count` shell words of `text` (quotes and backslashes as sh reads them; no
 * expansion); stops early at an operator (`&&`, `;`, `|`, …) or a character it cannot read. */
function shellWords(text: string, count: number): Word[] {
  const words: Word[] = [];
  let i = 0;
  while (words.length < count) {
    while (i < text.length && /\s/.test(text[i]!)) i++;
    if (i >= text.length || /[;&|<>()`$]/.test(text[i]!)) break;
    let value = '';
    while (i < text.length && !/\s/.test(text[i]!)) {
      const c = text[i]!;
      if (c === "'") {
        const close = text.indexOf("'", i + 1);
        if (close < 0) return words;
        value += text.slice(i + 1, close);
        i = close + 1;
      } else if (c === '"') {
        let j = i + 1;
        for (; j < text.length && text[j] !== '"'; j++) {
          if (text[j] === '$' || text[j] === '`') return words;
          if (text[j] === '\\' && /["\\$`]/.test(text[j + 1] ?? '')) j++;
          value += text[j];
        }
        if (j >= text.length) return words;
        i = j + 1;
      } else if (c === '\\') {
        value += text[i + 1] ?? '';
        i += 2;
      } else if (/[;&|<>()`$]/.test(c)) {
        return words;
      } else {
        value += c;
        i++;
      }
    }
    words.push({ value, end: i });
  }
  return words;
}

/** `flock [-n|-w S|…] LOCK CMD…` and `flock … LOCK -c 'CMD'` at the start of a command: the
 * wrapper goes (its lock file becomes a named lock), the command stays as written. `waitSeconds`:
 * undefined for -n (skip when held), null for a blocking flock, S for -w S. */
function dropFlock(run: string): {
  run: string;
  lockFile?: string;
  wrapper?: string;
  waitSeconds?: number | null;
  shared?: boolean;
} {
  const words = shellWords(run, 32);
  if (words.length < 3 || !/(^|\/)flock$/.test(words[0]!.value)) return { run };
  let i = 1;
  let nonblock = false;
  let shared = false;
  let wait: number | null = null;
  for (; i < words.length; i++) {
    const w = words[i]!.value;
    if (w === '--') {
      i++;
      break;
    }
    if (!w.startsWith('-') || w === '-') break;
    if (w === '-n' || w === '--nb' || w === '--nonblock') nonblock = true;
    else if (w === '-w' || w === '--wait' || w === '--timeout') {
      const s = Number(words[++i]?.value);
      if (!Number.isFinite(s) || s < 0) return { run };
      wait = s;
    } else if (w === '-E' || w === '--conflict-exit-code') i++;
    else if (/^-[sxeonuF]+$/.test(w) || ['--shared', '--exclusive', '--close', '--no-fork', '--verbose'].includes(w)) {
      if (w.includes('n') && w.startsWith('-') && !w.startsWith('--')) nonblock = true;
      // the last of -s / -x decides, as flock(1) reads them
      if (w === '--shared' || (!w.startsWith('--') && w.includes('s'))) shared = true;
      if (w === '--exclusive' || (!w.startsWith('--') && w.includes('x'))) shared = false;
    } else return { run }; // an option we do not know: leave the command as it is
  }
  const lock = words[i];
  const next = words[i + 1];
  if (!lock || !next) return { run };
  let command: string;
  if (next.value === '-c' || next.value === '--command') {
    const body = shellWords(run.slice(next.end), 1)[0];
    if (!body || run.slice(next.end + body.end).trim() !== '') return { run };
    command = body.value;
  } else {
    command = run.slice(lock.end).trim();
  }
  const wrapper = printable(run.slice(0, run.length - run.slice(lock.end).length).trim());
  const share = shared ? { shared } : {};
  if (nonblock || wait === 0) return { run: command, lockFile: lock.value, wrapper, ...share };
  return { run: command, lockFile: lock.value, wrapper, waitSeconds: wait, ...share };
}

/** What of a command leaves work running after it exits, as cron let it (`… &`, `nohup …`);
 * null for none. (`setsid` leaves the session: routinely does not end it either.) */
function backgroundOf(run: string): string | null {
  const text = run.trim();
  if (/(^|[^&])&$/.test(text)) return 'a command that ends with & (its work left running in the background)';
  if (/(^|[;&|(\s])nohup\s/.test(text) && !/(^|[;&|(\s])setsid\s/.test(text))
    return 'nohup (work meant to outlive the job)';
  return null;
}

/** A routine id from the command: the program's name (`/usr/local/bin/backup.sh --full` →
 * `backup`), past `cd DIR &&`, `nice`, `VAR=x` and the like, and the script an interpreter runs
 * (`php /srv/app/report.php` → `report`; `sh -c 'SCRIPT'` → SCRIPT's). */
function idFor(run: string): string {
  // past `cd DIR &&` and a test (`test -x F &&`, `[ -x F ] &&`): the program that does the work
  const segments = commandsOf(run)
    .map((s) => shellWords(s.trim(), 8).map((w) => w.value))
    // a group's braces are not programs: `|| { cd / && run-parts …; }`
    .map((ws) => (ws[0] === '{' || ws[0] === '(' ? ws.slice(1) : ws))
    .filter((ws) => ws.length > 0 && !['cd', 'test', '[', '[[', '}', ')'].includes(ws[0]!));
  let program: string | undefined;
  for (const words of segments) {
    // sh -c 'SCRIPT': the script's program
    if (/(^|\/)(sh|dash|bash|zsh)$/.test(words[0]!) && words[1] === '-c' && words[2]) return idFor(words[2]);
    const rest = words.filter(
      (w) => !/^(env|nice|ionice|timeout|nohup|exec|sudo|chronic|-\S*|\d+[smhd]?|[A-Za-z_]\w*=.*)$/.test(w),
    );
    if (rest.length === 0) continue;
    const interpreter = /(^|\/)(php|python[\d.]*|node|ruby|perl|bash|sh|dash|zsh)$/.test(rest[0]!);
    program = interpreter && rest[1] && !rest[1].startsWith('-') ? rest[1] : rest[0];
    break;
  }
  const base = (program ?? 'job').split('/').filter(Boolean).pop() ?? 'job';
  const id = base
    .replace(/\.(sh|bash|py|rb|pl|js|mjs|cjs|php)$/, '')
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, 60);
  return ID_PATTERN.test(id) ? id : 'job';
}

/** The simple commands of a command line, split at `&&`, `||`, `;` and `|` outside quotes (so
 * the script of `sh -c 'a; b'` stays one word). */
function commandsOf(line: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote) {
      if (c === '\\' && quote === '"' && i + 1 < line.length) cur += c + line[++i];
      else {
        if (c === quote) quote = null;
        cur += c;
      }
    } else if (c === '\\' && i + 1 < line.length) cur += c + line[++i];
    else if (c === "'" || c === '"') {
      quote = c;
      cur += c;
    } else if (c === ';' || c === '|' || c === '&') {
      if ((c === '|' || c === '&') && line[i + 1] === c) i++;
      out.push(cur);
      cur = '';
    } else cur += c;
  }
  out.push(cur);
  return out;
}

function uniqueId(id: string, seen: Set<string>): string {
  let candidate = id;
  for (let n = 2; seen.has(candidate); n++) candidate = `${id}-${n}`;
  seen.add(candidate);
  return candidate;
}

/** cron's value quoting: a value in matching single or double quotes loses them. */
/** An environment line's value as cron reads it (measured beside Debian's daemon): in quotes,
 * what is between them with its trailing blanks dropped; nothing may follow the closing quote,
 * and an empty unquoted value or an unterminated quote is a syntax error, for which cron ignores
 * the whole file. */
function envValue(raw: string): { value: string } | { refused: string } {
  const v = raw.trim();
  const whole = 'cron ignores the whole file for it, so none of its jobs ran';
  if (v === '') return { refused: `an empty value needs quotes (NAME=""): ${whole}` };
  const q = v[0]!;
  if (q !== '"' && q !== "'") return { value: v };
  const close = v.indexOf(q, 1);
  if (close === -1) return { refused: `its ${q} is never closed: ${whole}` };
  if (close !== v.length - 1)
    return { refused: `text after its closing ${q} (cron has no escapes inside quotes): ${whole}` };
  return { value: v.slice(1, -1).replace(/\s+$/, '') };
}

/** A crontab line inside a // comment: control characters (and the line separators some
 * editors end a line at) escaped, so none ends the comment (merge-import.ts finds a lock's file
 * by it). */
export function printable(text: string): string {
  return escapeControls(text).replace(/[\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
}
