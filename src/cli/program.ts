// The command line: commander wiring only. Each command's module is imported when the command
// runs, so `routinely --version` never pays for zod or croner. This is the only file that calls
// process.exit; it maps errors to the exit codes of SPEC §7 and never prints a stack trace.
// (Over 300 lines: the declaration of every command and option, one after another.)

import { Argument, Command, InvalidArgumentError, Option } from 'commander';
import { ExitCode, UsageError } from '../errors.js';
import { reportError } from './report-error.js';

import { VERSION } from '../version.js';
import { printable } from '../printable.js';

import type { GlobalOptions } from './globals.js';
import type { ListFlags } from './routine-list-command.js';
import type { FreshLockSource } from './lock-commands.js';

export type { GlobalOptions };

/** Node's timers overflow past ≈ 24.8 days; longer values are refused. */
const MAX_SECONDS = 2_000_000;

/** `least`: what the range's message starts from (`above 0` for a limit that refuses 0). */
function seconds(flag: string, least = '0') {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+(\.\d+)?$/.test(value.trim()) || !Number.isFinite(n) || n > MAX_SECONDS) {
      throw new InvalidArgumentError(
        `${flag} takes a number of seconds, ${least} to ${MAX_SECONDS} (a plain number such as 30 or 1.5), got ${JSON.stringify(value)}`,
      );
    }
    return n;
  };
}

/** A limit that 0 would turn into "stop at once" (as the config's `timeoutSeconds`, which must
 * be above 0): refused, with what to do instead. */
function positiveSeconds(flag: string) {
  const parse = seconds(flag, 'above 0');
  return (value: string): number => {
    const n = parse(value);
    if (n === 0)
      throw new InvalidArgumentError(
        `${flag} takes a number of seconds above 0, got ${JSON.stringify(value)} (without ${flag}: no limit)`,
      );
    return n;
  };
}

function positiveInt(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || n < 1)
      throw new InvalidArgumentError(`${flag} takes a whole number of at least 1, got ${JSON.stringify(value)}`);
    // (Number() of 20 digits is a float that rounds: said as too large, not as no whole number)
    if (!Number.isSafeInteger(n))
      throw new InvalidArgumentError(
        `${flag} takes a whole number of at least 1, got ${JSON.stringify(value)}, which is too large`,
      );
    return n;
  };
}

const ifBusyOption = (defaultMode: string): Option =>
  new Option('--if-busy <mode>', `what to do when the exec lock is held (default: ${defaultMode})`).choices([
    'fail',
    'skip',
    'wait',
  ]);
const waitTimeoutOption = (): Option =>
  new Option('--wait-timeout <seconds>', 'with --if-busy wait: give up (exit 75) after this long').argParser(
    seconds('--wait-timeout'),
  );

const httpOption = (): Option =>
  new Option(
    '--http <[host:]port>',
    'serve /metrics, /healthz, /api/* and a status page here (default host 127.0.0.1; any other needs ROUTINELY_HTTP_TOKEN)',
  );

const keyOption = (): Option =>
  new Option('--key <key>', 'which lock').choices(['exec-run', 'scheduler']).default('exec-run');
const lockOption = (what: string): Option => new Option('--lock <name>', what);

function buildProgram(setExit: (code: number) => void): Command {
  const program = new Command('routinely')
    .description("Run a project's recurring work safely under one crash-safe project exec lock.")
    .version(VERSION, '-V, --version', 'print the version')
    .addOption(configOption())
    .configureHelp({ showGlobalOptions: true })
    .enablePositionalOptions()
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .addHelpText(
      'after',
      `
Examples:
  routinely validate                         check the config, next fire times
  routinely lock run -- ./scripts/deploy.sh  a command under the exec lock
  routinely lock run --if-busy skip -- make  skip (exit 0) when it is busy
  routinely lock status --json               who holds the lock, until when
  routinely exec run                         the ready exec tasks
  routinely routine list                     every routine: next, last, result
  routinely routine history --since yesterday  what ran last night
  crontab -l | routinely import-crontab      a crontab as routinely.json
  routinely routine run --help               help for one command

Exit codes (every command):
  0    success, or a busy skip with --if-busy skip, or nothing to do
  1    the work ran and failed (a task or command failed, the lock was lost)
  2    bad usage, bad config, bad input (the message names what and where)
  3    scheduler status: no scheduler is running
  74   I/O error on state (disk full, read-only, EIO, the database unreachable):
       the work did not run, nothing was lost
  75   busy: the lock is held and --if-busy fail, or --wait-timeout passed;
       a conflict on resume
  129, 130, 131, 143  stopped by SIGHUP, SIGINT, SIGQUIT, SIGTERM
  lock run -- CMD exits with CMD's own exit code when it ran.`,
    );
  let active: Command = program;
  program.hook('preAction', (_program, actionCommand) => {
    active = actionCommand;
  });
  const globals = (): GlobalOptions => globalsOf(active);
  // each command's module, loaded only when that command runs (start-up parses no other command's code)
  const load = {
    completion: () => import('./completion.js'),
    exec: () => import('./exec-commands.js'),
    importCrontab: () => import('./import-crontab-command.js'),
    init: () => import('./init-command.js'),
    lock: () => import('./lock-commands.js'),
    routine: () => import('./routine-commands.js'),
    routineLogs: () => import('./routine-logs.js'),
    scheduler: () => import('./scheduler-command.js'),
    schedulerControl: () => import('./scheduler-control.js'),
    validate: () => import('./validate-command.js'),
  };
  // the lock commands' source when the cache cannot answer: the config validated now
  const freshLock: FreshLockSource = async (g, use) => (await import('./lock-fresh.js')).freshLockSource(g, use);
  const act =
    <A extends unknown[]>(fn: (...args: A) => Promise<number>) =>
    async (...args: A): Promise<void> => {
      setExit(await fn(...args));
    };

  const lock = program.command('lock').description('the project exec lock and named locks (like flock, crash-safe)');
  lock
    .command('run')
    .description('run CMD while holding the project exec lock, or a named lock')
    .addOption(ifBusyOption('fail'))
    .addOption(waitTimeoutOption())
    .addOption(lockOption('the lock to hold: a named lock, or "exec" (the default)'))
    .addOption(new Option('--routine <id>', 'record the hold as fired by this routine').hideHelp())
    .argument('<cmd...>', 'the command and its arguments (after --)')
    .passThroughOptions()
    .addHelpText(
      'after',
      `
CMD runs in its own process group with the lock held and heartbeated;
SIGINT/SIGTERM are forwarded to it. Exits with CMD's exit code; 75 when busy (or
0 with --if-busy skip); 1 when the lock was lost while CMD ran. CMD sees
ROUTINELY_LOCK_NAME and ROUTINELY_LOCK_GENERATION (fencing token). A named lock
(--lock db) excludes only its own holders; "locks" in the config gives it slots.

Examples:
  routinely lock run -- npm run migrate
  routinely lock run --if-busy wait --wait-timeout 60 -- ./backup.sh
  routinely lock run --lock agents -- ./agent review`,
    )
    .action(
      act(
        async (cmd: string[], opts) =>
          (await (
            await load.lock()
          ).lockRun(cmd, opts, globals(), freshLock, process.env, async (path, name) =>
            (await import('./config-slots.js')).configuredSlots(path, name),
          )) ?? ExitCode.FAILED,
      ),
    );
  lock
    .command('status')
    .description('show the holder, generation, heartbeat age, expiry and staleness')
    .option('--json', 'print JSON')
    .addOption(lockOption('one lock, every slot (default: the exec lock and every named lock in use)'))
    .addOption(keyOption())
    .action(act(async (opts) => (await (await load.lock()).lockStatus(opts, globals(), freshLock)) ?? ExitCode.FAILED));
  lock
    .command('break')
    .description('remove the lock, only if it is stale (dead owner, expired, unreadable)')
    .addOption(lockOption('a named lock (each of its stale slots), or "exec" (the default)'))
    .addOption(keyOption())
    .action(act(async (opts) => (await import('./lock-fresh.js')).lockBreak(opts, globals())));

  const routineOption = (): Option =>
    new Option('--routine <id>', 'record the run as fired by this routine').hideHelp();
  const runOptions = (c: Command): Command =>
    c
      .addOption(ifBusyOption('fail'))
      .addOption(waitTimeoutOption())
      .addOption(
        new Option('--parallel <n>', 'tasks at once (default exec.parallel)').argParser(positiveInt('--parallel')),
      )
      .addOption(
        new Option('--timeout <seconds>', 'stop the whole run after this long (ABORTED / RUN_TIMEOUT)').argParser(
          positiveSeconds('--timeout'),
        ),
      )
      .option('--json', 'print the final run state as JSON')
      .addOption(routineOption());

  program
    .command('register')
    .description('sync the task registry with the config and task files (takes the lock)')
    .addOption(ifBusyOption('fail'))
    .addOption(waitTimeoutOption())
    .addOption(routineOption())
    .action(act(async (opts) => (await load.exec()).registerCommand(opts, globals())));

  const exec = program.command('exec').description('exec tasks: run, resume, inspect');
  runOptions(
    exec
      .command('run')
      .description('run the ready tasks (or the named ones) under the exec lock')
      .argument('[task...]', 'run exactly these tasks'),
  )
    .addHelpText(
      'after',
      `
Ready tasks are the pending ones whose dependencies have succeeded. Each task
runs with sh -c in its own process group, output to
<stateDir>/exec/runs/<run-id>/<task>.log. Exit 0 when all succeeded (or nothing
was ready), 1 when any failed, 75 when busy.

Examples:
  routinely exec run
  routinely exec run build docs --parallel 4
  routinely exec run --if-busy wait --json`,
    )
    .action(act(async (tasks: string[], opts) => (await load.exec()).runCommand(tasks, opts, globals())));
  runOptions(
    exec
      .command('resume')
      .description('finish an interrupted run: keep what succeeded, run the rest again')
      .argument('[run-id]', 'the run (default: the newest INTERRUPTED, ABORTED or orphaned RUNNING run)'),
  ).action(act(async (runId: string | undefined, opts) => (await load.exec()).resumeCommand(runId, opts, globals())));
  exec
    .command('status')
    .description('tasks and their statuses')
    .option('--json', 'print JSON')
    .action(act(async (opts) => (await load.exec()).statusCommand(opts, globals())));
  exec
    .command('runs')
    .description('recent runs, newest first')
    .option('--json', 'print JSON')
    .addOption(new Option('--limit <n>', 'how many').argParser(positiveInt('--limit')).default(20))
    .action(act(async (opts) => (await load.exec()).runsCommand(opts, globals())));
  exec
    .command('show')
    .description('one run: status, explanation, every task')
    .argument('<run-id>')
    .option('--json', 'print JSON')
    .action(act(async (runId: string, opts) => (await load.exec()).showCommand(runId, opts, globals())));
  exec
    .command('reset')
    .description('set tasks back to pending (takes the lock)')
    .argument('<task...>')
    .addOption(ifBusyOption('fail'))
    .addOption(waitTimeoutOption())
    .action(act(async (tasks: string[], opts) => (await load.exec()).resetCommand(tasks, opts, globals())));

  const routine = program.command('routine').description('routines: list, fire now, history, pause');
  routine
    .command('list')
    .description('every routine: schedule, next and last run, last result, counts, paused')
    .option('--json', 'print JSON (the fields of routine-state.json plus schedule and next_run_at)')
    .option(
      '--check',
      'exit 1 when an enabled routine is failing (its last run failed, whatever skips came after), starved, or no scheduler runs',
    )
    .action(
      act(async (opts) => {
        const fresh = async (f: ListFlags, g: GlobalOptions) => (await load.routine()).freshListInputs(f, g);
        return (
          (await (await import('./routine-list-command.js')).routineList(opts, globals(), fresh)) ?? ExitCode.FAILED
        );
      }),
    );
  routine
    .command('run')
    .description(
      'fire one routine now, exactly as the scheduler would, and record it (refused as busy: nothing recorded)',
    )
    .argument('<id>')
    .addOption(ifBusyOption("the routine's own ifBusy, else fail"))
    .addOption(waitTimeoutOption())
    .option('--json', "print the fire's record as JSON (the command's output goes to stderr)")
    .action(act(async (id: string, opts) => (await load.routine()).routineRun(id, opts, globals())));
  routine
    .command('history')
    .description(
      'past fires of a routine (or of every routine, merged), in time order, the newest last, as journalctl shows them',
    )
    .argument('[id]', 'one routine, also one no longer in the config')
    .option(
      '--since <time>',
      'fires scheduled at or after TIME: ISO-8601, 10:00, today, yesterday, 2h, 1h30m, -1h, 2h ago, 1 hour ago',
    )
    .option('--until <time>', 'fires scheduled before TIME (the same forms)')
    .addOption(
      new Option('--result <result>', 'only these (the words the view prints, or the stored ones)').choices([
        'ok',
        'failed',
        'skipped',
        'success',
        'failure',
      ]),
    )
    .option('-r, --reverse', 'newest first')
    .addOption(
      new Option('--limit <n>', 'the newest N (default 20, all with --since/--until)').argParser(
        positiveInt('--limit'),
      ),
    )
    .option('--json', 'print JSON')
    .action(act(async (id: string | undefined, opts) => (await load.routine()).routineHistory(id, opts, globals())));
  routine
    .command('logs')
    .description("a routine's output, every run framed by a start and an end line (the rotated .1 file first)")
    .argument('<id>')
    .option('--run <run-id>', "only this run's section, frames included")
    .addOption(
      new Option('--lines <n>', 'only the last N lines (default: all; 10 with --follow)').argParser(
        positiveInt('--lines'),
      ),
    )
    .option('-f, --follow', 'keep printing new output, through rotation, until Ctrl-C; with --run, until that run ends')
    .action(act(async (id: string, opts) => (await load.routineLogs()).routineLogs(id, opts, globals())));
  routine
    .command('pause')
    .description('stop firing a routine (a running scheduler honours it at once)')
    .argument('<id>')
    .option('--note <text>', 'why, shown in routine list')
    .action(act(async (id: string, opts) => (await load.routine()).routinePause(id, opts, globals())));
  routine
    .command('stop')
    .description(
      'stop the running fire of a command routine on this host: SIGTERM to its process group, SIGKILL after the grace; recorded once as a failure, stopped by hand',
    )
    .argument('<id>')
    .addOption(
      new Option('--timeout <seconds>', 'the grace between SIGTERM and SIGKILL')
        .argParser(seconds('--timeout'))
        .default(10),
    )
    .action(act(async (id: string, opts) => (await load.routine()).routineStop(id, opts, globals())));
  routine
    .command('resume')
    .description('fire a paused routine again on its schedule')
    .argument('<id>')
    .action(act(async (id: string) => (await load.routine()).routineResume(id, globals())));

  const scheduler = program.command('scheduler').description('the long-running scheduler');
  scheduler
    .command('start')
    .description('run the scheduler in the foreground (systemd, a container, a terminal)')
    .addOption(
      new Option('--log-format <format>', 'log lines as text or JSON').choices(['text', 'json']).default('text'),
    )
    .addOption(
      new Option('--shutdown-timeout <seconds>', 'on SIGTERM/SIGINT, wait this long for running routines')
        .argParser(seconds('--shutdown-timeout'))
        .default(30),
    )
    .addOption(httpOption())
    .addHelpText(
      'after',
      `
Fires every enabled, unpaused routine under the exec lock: a command routine's
command in its own process group, the exec actions as exec run / exec resume /
register do, each with --if-busy skip (or the routine's own ifBusy). A tick that
meets a busy lock is logged as "[routine] skipped <id>: exec busy" and recorded
as skipped. SIGHUP or a change of the config file reloads it (a bad config is
logged and the old one kept). SIGTERM/SIGINT: stop firing, wait for running
routines up to --shutdown-timeout, stop them, exit 0. --http serves /metrics,
/healthz, /api/* and a status page (docs/http.md).`,
    )
    .action(act(async (opts) => (await load.scheduler()).schedulerStart(opts, globals())));

  scheduler
    .command('status')
    .description('whether a scheduler runs for this project: pid, host, since, heartbeat (exit 3 when none runs)')
    .option('--json', 'print JSON')
    .action(act(async (opts) => (await load.schedulerControl()).schedulerStatus(opts, globals())));
  scheduler
    .command('stop')
    .description('SIGTERM to the scheduler on this host, then wait until it has exited')
    .addOption(
      new Option('--timeout <seconds>', 'give up waiting after this long (exit 1)')
        .argParser(seconds('--timeout'))
        .default(60),
    )
    .action(act(async (opts) => (await load.schedulerControl()).schedulerStop(opts, globals())));

  program
    .command('serve')
    .description('serve the metrics, health, API and status page without firing anything (a host that only watches)')
    .addOption(httpOption())
    .addOption(
      new Option('--log-format <format>', 'log lines as text or JSON').choices(['text', 'json']).default('text'),
    )
    .action(act(async (opts) => (await load.scheduler()).serve(opts, globals())));

  program
    .command('init')
    .description('write a commented starter routinely.json (with $schema) here')
    .option(
      '--force',
      'write it even if a routinely.json exists here (overwritten) or in a parent folder (a nested project)',
    )
    .addHelpText(
      'after',
      `
Refuses (exit 2) when this folder already has a routinely.json, or is inside a
project (a routinely.json in a parent folder, which commands run here already
use); --force overrides both. With --config PATH it writes PATH instead of
./routinely.json.

"$schema" points at ./node_modules/routinely/config/routinely.schema.json
(relative to the file) when routinely is installed in the project or a parent
folder; otherwise at the schema of the routinely running init, as a file:// URL
that works on this machine only.`,
    )
    .action(act(async (opts) => (await load.init()).init(opts, globals())));

  program
    .command('validate')
    .description('check the config and print the next 3 fire times of each routine')
    .option(
      '--json',
      'print the result as JSON, valid or not (for CI): valid, config, routines with their next times, errors (file, path, message), warnings',
    )
    .action(
      act(async (opts) => {
        const fresh = async (g: GlobalOptions) => (await import('./validate-fresh.js')).freshView(g);
        return (await (await load.validate()).validate(globals(), opts, fresh)) ?? ExitCode.FAILED;
      }),
    );

  program
    .command('import-crontab')
    .description('print the jobs of a crontab as routinely.json content (routines, locks)')
    .argument('[file]', 'a crontab file, or - (the default) for standard input')
    .option(
      '--system',
      'the crontab has a user column after the schedule (/etc/crontab, /etc/cron.d/*: assumed for those paths)',
    )
    .option('--merge', "add them to the project's routinely.json instead (an id it has is refused)")
    .addHelpText(
      'after',
      `
Schedules are kept; each flock lock file becomes a named lock (jobs that
shared a file take turns, others run side by side): flock -n skips a busy
tick, a blocking flock waits until shortly before the next tick, -w S waits S.
A job without flock takes no lock ("exclusive": false), as under cron.
NAME=value lines go into the env of the jobs below them; MAILTO becomes a note
about "notify"; \\% becomes %. What cannot be carried (@reboot, an unescaped %)
is named in a comment and on stderr. Exit 0 when it printed (or merged).

Examples:
  crontab -l | routinely import-crontab > routinely.json
  routinely import-crontab /etc/cron.d/backup
  crontab -l | routinely import-crontab --merge`,
    )
    .action(
      act(async (file: string | undefined, opts) =>
        (await load.importCrontab()).importCrontabCommand(file, opts, globals()),
      ),
    );

  program
    .command('completion')
    .description('print a completion script for bash, zsh or fish (commands, options, their values, routine ids)')
    .addArgument(new Argument('<shell>', 'the shell').choices(['bash', 'zsh', 'fish']))
    .action(
      act(async (shell: string) => {
        const { completionScript } = await load.completion();
        process.stdout.write(completionScript(shell, program));
        return ExitCode.OK;
      }),
    );

  acceptGlobalsEverywhere(program);
  refuseRepeatedValues(program);
  addExamples(program);
  return program;
}

/** An example (or a few) for every command, shown at the end of its --help (SPEC §10); the
 * commands whose help text already ends with examples are not in this table. */
const EXAMPLES: Record<string, string[]> = {
  'lock status': [
    'routinely lock status',
    'routinely lock status --lock agents --json',
    'routinely lock status --json --key scheduler',
  ],
  'lock break': [
    'routinely lock break      # only a stale lock: dead holder, expired heartbeat',
    'routinely lock break --lock db',
  ],
  register: ['routinely register'],
  'exec resume': ['routinely exec resume', 'routinely exec resume r-20261201T030000Z-1a2b --if-busy wait'],
  'exec status': ['routinely exec status', 'routinely exec status --json'],
  'exec runs': ['routinely exec runs --limit 5'],
  'exec show': ['routinely exec show r-20261201T030000Z-1a2b', 'routinely exec show r-20261201T030000Z-1a2b --json'],
  'exec reset': ['routinely exec reset build test'],
  'routine list': [
    'routinely routine list',
    'routinely routine list --check   # monitoring: exit 1 when failing or starved',
  ],
  'routine run': [
    'routinely routine run backup',
    'routinely routine run backup --if-busy wait --wait-timeout 600',
    'routinely routine run backup --json',
  ],
  'routine history': [
    'routinely routine history backup --limit 5',
    'routinely routine history --since yesterday --result failed',
    'routinely routine history --since "2h ago" --json',
  ],
  'routine logs': ['routinely routine logs backup --lines 50', 'routinely routine logs backup --follow'],
  'routine pause': ['routinely routine pause backup --note "disk swap until Friday"'],
  'routine stop': ['routinely routine stop backup', 'routinely routine stop backup --timeout 30'],
  'routine resume': ['routinely routine resume backup'],
  'scheduler start': ['routinely scheduler start', 'routinely scheduler start --log-format json --http 127.0.0.1:9464'],
  'scheduler status': ['routinely scheduler status || echo "no scheduler"', 'routinely scheduler status --json'],
  'scheduler stop': ['routinely scheduler stop', 'routinely scheduler stop --timeout 120'],
  serve: ['routinely serve --http 127.0.0.1:9464'],
  init: ['routinely init', 'routinely init --config ops/routinely.json'],
  validate: ['routinely validate', 'routinely validate --json > validate.json'],
  completion: [
    'eval "$(routinely completion bash)"      # in ~/.bashrc',
    'eval "$(routinely completion zsh)"       # in ~/.zshrc, after compinit',
    'routinely completion fish > ~/.config/fish/completions/routinely.fish',
  ],
};

/** Every command's help ends with its examples and where the exit codes are. */
function addExamples(cmd: Command, path = ''): void {
  for (const sub of cmd.commands) {
    const at = path ? `${path} ${sub.name()}` : sub.name();
    if (sub.commands.length > 0) {
      addExamples(sub, at);
      continue;
    }
    const examples = EXAMPLES[at];
    sub.addHelpText(
      'after',
      `${examples ? `\nExamples:\n${examples.map((e) => `  ${e}`).join('\n')}\n` : ''}\nExit codes: ${EXIT_CODES_SHORT} (routinely --help explains each).`,
    );
  }
}

const EXIT_CODES_SHORT =
  '0 ok, 1 failed, 2 usage or config, 3 no scheduler, 74 state I/O,\n75 busy, 129/130/143 signal';

const configOption = (): Option =>
  new Option('-c, --config <path>', 'config file (default: routinely.json found upward; env ROUTINELY_CONFIG)');

/** The global options are accepted after any subcommand too (`routinely validate --config X`, as
 * users type them). commander reads an option only on the command that defines it, and the
 * positional options that `lock run -- CMD` needs stop the program's own options at the first
 * subcommand, so every command gets hidden copies (help lists them once, as global options). */
function acceptGlobalsEverywhere(cmd: Command): void {
  for (const sub of cmd.commands) {
    sub.addOption(configOption().hideHelp());
    sub.version(VERSION, '-V, --version');
    sub.options.find((o) => o.long === '--version')?.hideHelp();
    acceptGlobalsEverywhere(sub);
  }
}

/** An option that takes a value, given twice on one command (`--lock a --lock b`, `--timeout 1
 * --timeout 2`), is refused (exit 2) rather than the last one taken without a word, as a key given
 * twice in the config is. The global `--config` is the exception: given before and after the
 * subcommand, the one nearest it wins (globalsOf). */
function refuseRepeatedValues(cmd: Command): void {
  for (const sub of cmd.commands) {
    for (const opt of sub.options) {
      if (!(opt.required || opt.optional) || opt.long === '--config') continue;
      let seen = false;
      sub.on(`option:${opt.name()}`, () => {
        if (seen) throw new UsageError(`${opt.long ?? opt.short} given twice: give it once`);
        seen = true;
      });
    }
    refuseRepeatedValues(sub);
  }
}

/** The global options as given anywhere on the command line; given twice, the one nearest the
 * subcommand (the later one) wins. */
function globalsOf(command: Command): GlobalOptions {
  const chain: Command[] = [];
  for (let c: Command | null = command; c; c = c.parent) chain.unshift(c);
  const merged: GlobalOptions = {};
  for (const c of chain) {
    const config = c.opts<GlobalOptions>().config;
    if (config !== undefined) merged.config = config;
  }
  return merged;
}

/** How long the process may wait at exit for its output (set by the scheduler; io.ts). */
export { exitFlushLimit } from './io.js';

export async function main(argv: string[]): Promise<number> {
  let exitCode: number = ExitCode.OK;
  const program = buildProgram((code) => {
    exitCode = code;
  });
  try {
    const asked = helpAskedFor(program, argv.slice(2));
    if (typeof asked === 'string') throw new UsageError(asked);
    const bare = asked ?? helpWithoutCommand(program, argv.slice(2));
    if (bare) {
      // `routinely` or `routinely exec` alone: asked for nothing wrong, so the help goes to
      // stdout (commander would print it to stderr) and the exit code is 0.
      bare.outputHelp();
      return ExitCode.OK;
    }
    await program.parseAsync(argv);
    return exitCode;
  } catch (error) {
    return reportError(error);
  }
}

/** `routinely help [COMMAND…]`: the command named (`help exec run` is exec run's, not exec's), or
 * why none is (an unknown word is an error, exit 2, not the program's help); null for any other
 * line. */
function helpAskedFor(program: Command, args: string[]): Command | string | null {
  if (args[0] !== 'help' || args.some((a) => a.startsWith('-'))) return null;
  let at = program;
  for (const word of args.slice(1)) {
    const sub = at.commands.find((c) => c.name() === word || c.aliases().includes(word));
    if (!sub) {
      const path = [...names(at), word].join(' ');
      return `help: unknown command '${printable(path)}' (routinely help lists the commands)`;
    }
    at = sub;
  }
  return at;
}

/** The words that name `cmd` after `routinely`. */
function names(cmd: Command): string[] {
  const out: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) out.unshift(c.name());
  return out;
}

/** The command whose help answers these arguments: none at all, or a group (`exec`, `lock`, …)
 * without its subcommand. */
function helpWithoutCommand(program: Command, args: string[]): Command | null {
  if (args.length === 0) return program;
  if (args.length !== 1) return null;
  const group = program.commands.find((c) => c.name() === args[0]);
  return group && group.commands.length > 0 ? group : null;
}
