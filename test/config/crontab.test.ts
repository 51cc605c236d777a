import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { importCrontab } from '../../src/config/crontab.js';
import { stripJsonComments } from '../../src/config/load.js';
import { validateConfig } from '../../src/config/validate.js';
import { shellQuote } from '../../src/shell-quote.js';

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'crontab', 'user.crontab');

interface Out {
  $schema: string;
  locks?: Record<string, { slots: number }>;
  routines: {
    id: string;
    schedule: string;
    run: string;
    timezone?: string;
    lock?: string;
    exclusive?: boolean;
    ifBusy?: string;
    waitTimeoutSeconds?: number;
    env?: Record<string, string>;
  }[];
}

/** What cron sets for every job of a crontab that sets neither. */
const CRON_ENV = { SHELL: '/bin/sh', PATH: '/usr/bin:/bin' };
const bash = (command: string): string => `exec '/bin/bash' -c ${shellQuote(command)}`;

function imported(text: string, system = false) {
  const r = importCrontab(text, { source: 'crontab', system });
  const config = JSON.parse(stripJsonComments(r.text)) as Out;
  const valid = validateConfig(config);
  expect(valid.ok ? [] : valid.issues).toEqual([]);
  return { ...r, config, byId: Object.fromEntries(config.routines.map((x) => [x.id, x])) };
}

describe('import-crontab', () => {
  it('a real user crontab: every job a routine that validates, every other line accounted for', () => {
    const r = imported(readFileSync(FIXTURE, 'utf8'));
    expect(r.config.routines.map((x) => `${x.id} ${x.schedule}`)).toEqual([
      'backup 15 3 * * *',
      'sync */5 * * * *',
      'report 0 4 * * 1',
      'rotate @hourly',
      'tar 0 0 1 * *',
      'backup-2 0 5 * * sun,sat',
      'curl 0 9 * * mon-fri',
    ]);
    expect(r.routines).toBe(7);
    // the output is a config: "$schema" first
    expect(r.text).toMatch(/^\{\n {2}"\$schema": "\.\/node_modules\/routinely\/config\/routinely\.schema\.json",\n/);
    // flock -n LOCK CMD and flock -xn LOCK -c 'CMD': its lock file a named lock of its own, and
    // the command as cron ran it, its flock kept (a process outside routinely that holds the file
    // still keeps the job out)
    // (SHELL=/bin/bash above them: each run by bash, as cron ran it)
    expect(r.byId.backup!.run).toBe(
      bash('flock -n /tmp/backup.lock /usr/local/bin/backup.sh --full >> /var/log/backup.log 2>&1'),
    );
    expect(r.byId.sync!.run).toBe(
      bash("/usr/bin/flock -xn /var/lock/sync.lock -c 'cd /srv/app && ./bin/sync --quiet'"),
    );
    expect(r.config.locks).toEqual({ backup: { slots: 1 }, sync: { slots: 1 }, report: { slots: 1 } });
    expect(r.text).toContain('"backup": { "slots": 1 }, // /tmp/backup.lock');
    expect(r.byId.backup).toMatchObject({ lock: 'backup' });
    expect(r.byId.backup!.ifBusy).toBeUndefined();
    expect(r.text).toContain(
      '// takes the named lock "backup" (`flock -n /tmp/backup.lock`: the same file, the same lock): routines on it take turns, others run beside it; a tick that finds it held by something else is skipped (recorded "skipped", not failed), as flock -n exited',
    );
    expect(r.text).toContain(
      "// the flock stays in its command: a process outside routinely that holds /tmp/backup.lock still keeps it out, as under cron (that tick then ends with flock's exit code 1, a failure)",
    );
    // flock that waits (-w 600): the routine waits for the lock as long
    expect(r.byId.report).toMatchObject({
      run: bash('flock -w 600 /tmp/report.lock php /srv/app/report.php'),
      lock: 'report',
      ifBusy: 'wait',
      waitTimeoutSeconds: 600,
    });
    // no flock: no lock, as under cron
    expect(r.byId.rotate).toMatchObject({ exclusive: false });
    expect(r.byId.rotate!.lock).toBeUndefined();
    // \% is a plain %
    expect(r.byId.tar!.run).toBe(bash('tar czf "$BACKUP_DIR/home-$(date +%Y%m).tgz" /home'));
    expect(r.text).toContain("// run with /bin/bash -c (the crontab's SHELL, above it), as cron ran it");
    // environment lines reach the jobs below them, unquoted, SHELL and MAILTO too, as cron builds
    // the job's environment
    expect(r.byId.backup!.env).toEqual({
      SHELL: '/bin/bash',
      PATH: '/usr/local/bin:/usr/bin:/bin',
      MAILTO: 'ops@example.com',
      BACKUP_DIR: '/srv/backups',
    });
    expect(r.byId['backup-2']!.env).toEqual({
      SHELL: '/bin/bash',
      PATH: '/usr/local/bin:/usr/bin:/bin',
      MAILTO: 'ops@example.com',
      BACKUP_DIR: '/srv/backups',
      GREETING: 'hello there',
    });
    // CRON_TZ: the zone of the schedules below it
    expect(r.byId.curl!.timezone).toBe('Europe/Paris');
    expect(r.byId['backup-2']!.timezone).toBeUndefined();
    // what is not carried: in a comment where it was, and in a note, never silently
    expect(r.text).toMatch(
      /\/\/ not carried: line 13: @reboot \/usr\/local\/bin\/start-worker\.sh\n {4}\/\/ {3}@reboot runs at boot, which routinely does not see: give the routine a real schedule with "catchUp": "latest"/,
    );
    expect(r.text).toMatch(
      /\/\/ not carried: line 15: 30 2 \* \* \* mail -s "nightly" root%the backup ran%bye\n {4}\/\/ {3}an unescaped % \(cron ends the command there/,
    );
    expect(r.notes).toEqual([
      expect.stringMatching(
        /^crontab:5: MAILTO=ops@example\.com: routinely sends no mail\. For a message when a routine fails .* set "notify"/,
      ),
      expect.stringMatching(/^crontab:13: not carried: @reboot runs at boot/),
      expect.stringMatching(/^crontab:15: not carried: an unescaped %/),
      // cronie's meaning carried, Debian's said (it ignores CRON_TZ)
      expect.stringMatching(
        /^crontab:18: CRON_TZ=Europe\/Paris: cronie runs the jobs below it in that zone, .*Debian's cron ignores CRON_TZ/,
      ),
    ]);
    expect(r.text).toMatch(/^ {2}\/\/ MAILTO=ops@example\.com: routinely sends no mail/m);
    // the crontab's own comment stays above its job
    expect(r.text).toMatch(/\/\/ nightly database backup\n {4}\/\/ line 9: 15 3 \* \* \* flock -n/);
  });

  it('a system crontab: the user column is not part of the command', () => {
    const r = imported('17 * * * * root cd / && run-parts --report /etc/cron.hourly\n', true);
    expect(r.config.routines[0]).toMatchObject({
      id: 'run-parts',
      schedule: '17 * * * *',
      run: 'cd / && run-parts --report /etc/cron.hourly',
    });
    expect(r.text).toContain(
      "ran as root (the user column of a system crontab): routinely runs it as the scheduler's user",
    );
    const ghost = importCrontab('17 * * * * ghost true\n', {
      source: 'crontab',
      system: true,
      userKnown: (name) => name === 'root',
    });
    expect(ghost.routines).toBe(0);
    expect(ghost.notes).toEqual([
      'crontab:1: not carried: the user "ghost" does not exist on this machine: cron ignores the whole file for it ("bad username"), so no job of it ran; fix the user column',
      'crontab: no job to import',
    ]);
  });

  it('lines that are neither a job nor a variable, and schedules cron would refuse, are named', () => {
    const r = imported('this is not a cron line\n61 * * * * x\n* * * * *\n0 0 30 2 * never\n');
    expect(r.config.routines).toEqual([]);
    expect(r.notes).toEqual([
      'crontab:1: not carried: schedule "this is not a cron": minute "this": "this" is not a number (0-59)',
      expect.stringMatching(/^crontab:2: not carried: schedule "61 \* \* \* \*": minute 61 out of range 0-59/),
      'crontab:3: not carried: neither a job (five time fields and a command) nor an environment line (NAME=value)',
      expect.stringMatching(/^crontab:4: not carried: schedule "0 0 30 2 \*": never fires/),
      'crontab: no job to import',
    ]);
  });

  // found by a fault pass beside the cron daemon (Debian cron 3.0pl1): each ran differently there
  it('a line cron refuses makes cron ignore the whole file (measured beside Debian\'s daemon: "Syntax error, this crontab file will be ignored"): said once for the file; lines cron takes and never fires are not such lines', () => {
    const ignored = (lines: number[]): string =>
      `crontab: cron ignores this whole file for line${lines.length === 1 ? '' : 's'} ${lines.join(', ')} (below, not carried), so none of its jobs ran under cron; the routines here are what its other lines say, and they will run under routinely: fix line${lines.length === 1 ? '' : 's'} ${lines.join(', ')} in the crontab too if cron keeps it`;
    // bad minute, bad hour, bad day-of-week, bad month, a step of 0, an empty unquoted value: the
    // daemon said "Error: bad …" for each and ran nothing of the file
    for (const [bad, line] of [
      ['61 * * * * x', 2],
      ['* 24 * * * x', 2],
      ['* * * * 8 x', 2],
      ['0 0 * foo * x', 2],
      ['0-59/0 * * * * x', 2],
      ['FOO=', 2],
      // a step after a single value, an empty item, an uppercase nickname, too few fields, a
      // word where the fields go (a second read measured each: "bad minute", "bad time specifier",
      // "bad day-of-week")
      ['5/10 * * * * x', 2],
      ['1,,2 * * * * x', 2],
      ['@REBOOT x', 2],
      ['0 3 * * x', 2],
      ['hello world', 2],
      // the six-field mistake ("bad command": a command that starts with *), and a byte-order
      // mark before a line ("bad minute"), measured with Debian's crontab(1) by a fault pass
      ['0 3 * * * * /usr/bin/true', 2],
      ['@daily * /bin/x', 2],
      ['\uFEFF0 0 * * * echo hi', 2],
      ['\uFEFF# a comment', 2],
    ] as const) {
      const r = imported(`* * * * * echo first\n${bad}\n0 3 * * * echo last\n`);
      expect(r.config.routines, bad).toHaveLength(2);
      expect(r.notes.at(-1), bad).toBe(ignored([line]));
      expect(r.text, bad).toContain(`// ${ignored([line]).replace(/^crontab: /, '')}`);
    }
    const two = imported(`61 * * * * x\n* * * * * echo ok\n* 24 * * * x\n`);
    expect(two.notes.at(-1)).toBe(ignored([1, 3]));
    const system = imported(`* * * * * root\n0 3 * * * root echo ok\n`, true);
    expect(system.notes.at(-1)).toBe(ignored([1]));
    // the daemon took these and ran the rest of the file: a date that never comes, a range that
    // runs backwards, @reboot, an unescaped %
    // …and a schedule alone in a user crontab (five fields, or a nickname; a system crontab's
    // "bad command" is below)
    for (const taken of [
      '0 0 31 2 * x',
      '5-1 * * * * x',
      '0 0 * * sat-sun x',
      '@reboot x',
      '* * * * * echo 50%',
      '* * * * *',
      '@daily',
    ]) {
      const r = imported(`* * * * * echo first\n${taken}\n`);
      expect(r.config.routines, taken).toHaveLength(1);
      expect(r.notes.join('\n'), taken).not.toMatch(/ignores this whole file/);
    }
  });

  it("a step past the end of its field is carried as the first value, as cron ran it (*/60 and */100 fired at :00 beside Debian's daemon); a day field starting with * keeps cron's AND only while the other one does too", () => {
    const r = imported(
      [
        '*/60 * * * * echo sixty',
        '*/100 */30 * */13 * echo many',
        '10-20/70 * * * * echo range',
        '0 0 */32 * * echo dom',
        '0 0 */32 * */2 echo both',
        '0 0 */32 * 1 echo lost',
        '',
      ].join('\n'),
    );
    expect(r.config.routines.map((x) => [x.run, x.schedule])).toEqual([
      ['echo sixty', '0 * * * *'],
      ['echo many', '0 0 * 1 *'],
      ['echo range', '10 * * * *'],
      ['echo dom', '0 0 1 * *'],
      // cron: day 1 AND every other day of the week (both fields start with *)
      ['echo both', '0 0 1 * +*/2'],
    ]);
    expect(r.notes[0]).toBe(
      'crontab:1: */60: a step past the end of its field, which cron ran at its first value alone, so it is carried as "0 * * * *"',
    );
    expect(r.notes.find((n) => n.startsWith('crontab:6:'))).toMatch(
      /^crontab:6: not carried: schedule "0 0 \*\/32 \* 1": "\*\/32" is a step past the end of its day field/,
    );
    // none of these is a line cron refuses: the file ran
    expect(r.notes.join('\n')).not.toMatch(/ignores this whole file/);
  });

  it("\\\\% is a backslash and then cron's %: refused, as cron ends the command there; \\% alone is a plain %", () => {
    const r = imported('* * * * * echo a\\\\%b; touch /tmp/after\n* * * * * echo a\\%b\n* * * * * echo a\\\\\\%b\n');
    expect(r.config.routines.map((x) => x.run)).toEqual(['echo a%b', 'echo a\\%b']);
    expect(r.notes).toEqual([expect.stringMatching(/^crontab:1: not carried: an unescaped %/)]);
  });

  it('a command of 1000 bytes or more, the blanks after it included, is not carried: cron refuses it and ignores the file (measured beside the daemon)', () => {
    const long = `echo ${'x'.repeat(995)}`; // 1000 characters
    const r = imported(
      [
        `* * * * * ${long}`,
        `* * * * * ${long.slice(0, 998)}`,
        // 527 characters, 1007 bytes
        `* * * * * echo ${'é'.repeat(501)}x`,
        // 987 characters and 40 blanks
        `* * * * * ${long.slice(0, 987)}${' '.repeat(40)}`,
        '',
      ].join('\n'),
    );
    expect(r.config.routines.map((x) => x.run.length)).toEqual([998]);
    expect(r.notes).toEqual([
      expect.stringMatching(
        /^crontab:1: not carried: its command is 1000 bytes \(the blanks after it too\): cron refuses 1000 or more/,
      ),
      expect.stringMatching(/^crontab:3: not carried: its command is 1008 bytes/),
      expect.stringMatching(/^crontab:4: not carried: its command is 1027 bytes/),
      expect.stringMatching(/^crontab: cron ignores this whole file for lines 1, 3, 4 \(below, not carried\)/),
    ]);
  });

  it('environment lines as cron reads them: a quoted name is the name; one no shell can set (my.var, MY-VAR, 9X) is said and not carried, never "the whole file ignored"; LOGNAME is cron\'s own (measured beside the daemon)', () => {
    const r = imported(
      ['my.var=1', 'MY-VAR=2', '9X=3', '"QUOTED"=qv', 'LOGNAME=deploy', '* * * * * ./a.sh', ''].join('\n'),
    );
    expect(r.config.routines).toHaveLength(1);
    expect(r.config.routines[0]!.env).toEqual({ SHELL: '/bin/sh', PATH: '/usr/bin:/bin', QUOTED: 'qv' });
    expect(r.notes).toEqual([
      expect.stringMatching(/^crontab:1: my\.var=1: cron put my\.var in the environment .*: not carried$/),
      expect.stringMatching(/^crontab:2: MY-VAR=2: cron put MY-VAR /),
      expect.stringMatching(/^crontab:3: 9X=3: cron put 9X /),
      expect.stringMatching(
        /^crontab:5: LOGNAME=deploy: cron sets LOGNAME to the crontab's owner whatever the crontab says/,
      ),
    ]);
  });

  it("croner's additions cron refuses (L, W, ?, +, an uppercase nickname) are not carried; #n after a day of week is dropped, as cron ran the job on every such day", () => {
    const r = imported(
      [
        '0 0 L * * last',
        '0 0 1W * * weekday',
        '0 0 ? * 1 q',
        '0 0 * * +1 plus',
        '@HOURLY upper',
        '0 9 * * MON#2 second',
        '0 9 * * mon-fri#1,sun weekdays',
        '@hourly lower',
        '*/5-10 * * * * stepped',
      ].join('\n') + '\n',
    );
    expect(r.config.routines.map((x) => [x.run, x.schedule])).toEqual([
      ['second', '0 9 * * MON'],
      ['weekdays', '0 9 * * mon-fri,sun'],
      ['lower', '@hourly'],
      // measured beside Debian's daemon: fired at :10 and :15, not at :07
      ['stepped', '*/5 * * * *'],
    ]);
    const notes = r.notes.join('\n');
    for (const [line, item] of [
      [1, 'L'],
      [2, '1W'],
      [3, '\\?'],
      [4, '\\+1'],
    ] as const)
      expect(notes).toMatch(
        new RegExp(
          `crontab:${line}: not carried: schedule "[^"]+": "${item}" is not cron syntax .*cron ignores the whole file for it`,
        ),
      );
    expect(notes).toMatch(
      /crontab:5: not carried: schedule "@HOURLY": cron knows no nickname @HOURLY \(they are lowercase/,
    );
    expect(notes).toMatch(
      /crontab:6: MON#2: cron reads past "#n" and ran it on every such day, so it is carried as "0 9 \* \* MON"/,
    );
    expect(notes).toMatch(
      /crontab:9: \*\/5-10: cron reads past what follows a step \("-M" after "\/N"\) and ran it as the step alone, so it is carried as "\*\/5 \* \* \* \*"/,
    );
  });

  it('flock -s: a lock file every job took shared is no lock (they ran side by side); one also taken exclusive is taken in turn, said', () => {
    const r = imported(
      [
        '* * * * * flock -s /tmp/sh.lock one',
        '* * * * * flock --shared /tmp/sh.lock two',
        '* * * * * flock -sn /tmp/mx.lock three',
        '* * * * * flock /tmp/mx.lock four',
      ].join('\n') + '\n',
    );
    expect(r.config.routines.map((x) => [x.run, x.lock ?? null, x.exclusive ?? null])).toEqual([
      ['flock -s /tmp/sh.lock one', null, false],
      ['flock --shared /tmp/sh.lock two', null, false],
      ['flock -sn /tmp/mx.lock three', 'mx', null],
      ['flock /tmp/mx.lock four', 'mx', null],
    ]);
    expect(Object.keys(r.config.locks ?? {})).toEqual(['mx']);
    expect(r.notes).toEqual([
      expect.stringMatching(
        /^crontab:1: flock -s \(shared\) on every job of this lock file: they never excluded each other/,
      ),
      expect.stringMatching(/^crontab:2: flock -s \(shared\) on every job/),
      expect.stringMatching(/^crontab:3: flock -s \(shared\): routinely has no shared locks, so it takes "mx" in turn/),
    ]);
  });

  it('a command that leaves work in the background (& at its end, nohup) is said: routinely ends what it leaves running, setsid keeps it', () => {
    const r = imported(
      '* * * * * (sleep 5; touch done) >/dev/null 2>&1 &\n* * * * * nohup ./serve.sh\n* * * * * setsid nohup ./d\n* * * * * a && b\n',
    );
    expect(r.config.routines).toHaveLength(4);
    expect(r.notes).toEqual([
      expect.stringMatching(/^crontab:1: a command that ends with & .*start it with setsid/),
      expect.stringMatching(/^crontab:2: nohup \(work meant to outlive the job\)/),
    ]);
  });

  it('\\\\ reaches the shell as one backslash, \\% as %, any other backslash as it is (measured beside the daemon: the lengths cron gave)', () => {
    // crontab text → what cron's shell got (x='a\\b' in a crontab was 3 characters long there)
    const cases: [string, string][] = [
      ["x='a\\b'", "x='a\\b'"],
      ["x='a\\\\b'", "x='a\\b'"],
      ["x='a\\\\\\\\b'", "x='a\\\\b'"],
      ["x='a\\%b'", "x='a%b'"],
      ["x='a\\\\\\%b'", "x='a\\%b'"],
      ["x='a\\\\\\\\\\%b'", "x='a\\\\%b'"],
      ["x='a\\\\'", "x='a\\'"],
      ["x='a\\\\\\b'", "x='a\\\\b'"],
    ];
    const r = imported(cases.map(([line]) => `* * * * * ${line}\n`).join(''));
    expect(r.config.routines.map((x) => x.run)).toEqual(cases.map(([, run]) => run));
  });

  it('a CRON_TZ this machine does not know: said, and the jobs under it not carried (no unexpected error); :Area/City is a zone', () => {
    const r = imported('CRON_TZ=Europe/Berln\n0 3 * * * echo x\nCRON_TZ=:Europe/Berlin\n0 4 * * * echo y\n');
    expect(r.config.routines).toEqual([expect.objectContaining({ run: 'echo y', timezone: 'Europe/Berlin' })]);
    expect(r.notes).toEqual([
      'crontab:1: CRON_TZ=Europe/Berln: not a time zone this machine knows (tz database)',
      'crontab:2: not carried: CRON_TZ=Europe/Berln (above it) is not a time zone this machine knows: give it an IANA zone such as Europe/Berlin',
      expect.stringMatching(/^crontab:3: CRON_TZ=:Europe\/Berlin: cronie runs the jobs below it in that zone/),
    ]);
  });

  it('days cron ANDs (a day field starting with *) are carried with + so routinely ANDs them too, and said; backwards day ranges cron never ran are refused', () => {
    const r = imported(
      '0 0 */2 * 1 odd-mondays\n0 0 1-5 * */3 early\n0 0 * * 1 mondays\n0 0 1,15 * 1 or\n0 0 * * sat-sun wk\n0 0 * * 5-0 x\n',
    );
    expect(r.config.routines.map((x) => x.schedule)).toEqual([
      '0 0 */2 * +1',
      '0 0 1-5 * +*/3',
      '0 0 * * 1',
      '0 0 1,15 * 1',
    ]);
    expect(r.notes).toEqual([
      expect.stringMatching(
        /^crontab:1: days: cron runs "0 0 \*\/2 \* 1" on days that match both .* carried as "0 0 \*\/2 \* \+1"/,
      ),
      expect.stringMatching(/^crontab:2: days: .* carried as "0 0 1-5 \* \+\*\/3"/),
      expect.stringMatching(
        /^crontab:5: not carried: schedule "0 0 \* \* sat-sun": the day-of-week field "sat-sun" holds only ranges that run backwards, which match no day to cron, and with day-of-month \* starting with \* cron needs both, so this job never ran \(for those days, write them as a list, sat,sun, or with Sunday as 7, 6-7\)$/,
      ),
      expect.stringMatching(
        /^crontab:6: not carried: schedule "0 0 \* \* 5-0": the day-of-week field "5-0" holds only/,
      ),
    ]);
  });

  it("a range that runs backwards matches nothing to cron (measured beside Debian's daemon): dropped from its list, a day field of them alone leaves the other day field's days (ORed), else the job never ran; a day-of-week range ending at sun ends at 0", () => {
    const r = imported(
      [
        '0 0 1 * sat-sun first',
        '0 1,22-2 * * * one',
        '0 0 25-5 * 2 tuesdays',
        '1,50-10 * * * * minute',
        '5 22-2 * * * never-hour',
        '0 0 */2 * sat-sun never-and',
        '0 0 * dec-jan * never-month',
        '0 0 * * 0-sun sundays',
        '0 0 * * sun-sun sundays-too',
        '0 0 * * mon-fri weekdays',
      ].join('\n') + '\n',
    );
    expect(r.config.routines.map((x) => [x.id, x.schedule])).toEqual([
      ['first', '0 0 1 * *'],
      ['one', '0 1 * * *'],
      ['tuesdays', '0 0 * * 2'],
      ['minute', '1 * * * *'],
      ['sundays', '0 0 * * 0-0'],
      ['sundays-too', '0 0 * * 0-0'],
      ['weekdays', '0 0 * * mon-fri'],
    ]);
    expect(r.notes).toEqual([
      expect.stringMatching(
        /^crontab:1: sat-sun: a range that runs backwards, which cron never matched \(its day field matched no day, so cron ran it on the other day field's days alone\), so it is carried as "0 0 1 \* \*"$/,
      ),
      expect.stringMatching(/^crontab:2: 22-2: a range that runs backwards, .* carried as "0 1 \* \* \*"$/),
      expect.stringMatching(/^crontab:3: 25-5: .* carried as "0 0 \* \* 2"$/),
      expect.stringMatching(/^crontab:4: 50-10: .* carried as "1 \* \* \* \*"$/),
      expect.stringMatching(/^crontab:5: not carried: .*the hour field "22-2" holds only ranges that run backwards/),
      expect.stringMatching(/^crontab:6: not carried: .*with day-of-month \*\/2 starting with \* cron needs both/),
      expect.stringMatching(/^crontab:7: not carried: .*the month field "dec-jan"/),
      expect.stringMatching(
        /^crontab:8: 0-sun: cron ends a day-of-week range at sun as 0 .* carried as "0 0 \* \* 0-0"$/,
      ),
      expect.stringMatching(/^crontab:9: sun-sun: .* carried as "0 0 \* \* 0-0"$/),
    ]);
  });

  it('ids from sh -c scripts with their own ; or && (split outside quotes only) and past a { group }', () => {
    const r = imported(
      '0 3 * * * sh -c \'backup.sh; echo done\'\n0 5 * * * /bin/bash -c "cd /srv && ./report.sh"\n25 6 * * * test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }\n',
    );
    expect(r.config.routines.map((x) => x.id)).toEqual(['backup', 'report', 'run-parts']);
  });

  it('flock forms it cannot read are left as written; ids stay unique and valid', () => {
    const r = imported(
      [
        '* * * * * flock --unknown-option /tmp/l cmd',
        '* * * * * flock -n /tmp/l',
        '* * * * * flock -n "/tmp/with space.lock" ./a.sh one',
        '* * * * * ./a.sh two',
        '* * * * * ./a.sh three',
        '* * * * * nice -n 10 python3 /opt/etl/load.py',
        '* * * * * $HOME/bin/x',
      ].join('\n') + '\n',
    );
    expect(r.config.routines.map((x) => [x.id, x.run])).toEqual([
      ['flock', 'flock --unknown-option /tmp/l cmd'],
      ['flock-2', 'flock -n /tmp/l'],
      ['a', 'flock -n "/tmp/with space.lock" ./a.sh one'],
      ['a-2', './a.sh two'],
      ['a-3', './a.sh three'],
      ['load', 'nice -n 10 python3 /opt/etl/load.py'],
      ['job', '$HOME/bin/x'],
    ]);
  });

  it('a comment cannot end early: control characters in a line are escaped', () => {
    const r = imported('# evil\u2028"}\n@reboot x\u001b[2J\n');
    expect(r.text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u2028]/);
    expect(r.text).toContain('// evil\\u2028"}');
    expect(r.text).toContain('@reboot x\\x1b[2J');
  });

  it('CRLF line ends (carried without the CR cron kept, said) and a last line without a newline (cron ignores the file: not carried, said)', () => {
    const r = imported('A=1\r\n0 1 * * * echo one\r\n0 2 * * * echo two');
    expect(r.config.routines.map((x) => [x.run, x.env])).toEqual([['echo one', { ...CRON_ENV, A: '1' }]]);
    expect(r.notes).toEqual([
      expect.stringMatching(/^crontab: CRLF line ends: cron keeps the carriage return/),
      expect.stringMatching(
        /^crontab:3: not carried: the last line of the file has no newline at its end: cron ignores the whole file/,
      ),
      expect.stringMatching(/^crontab: cron ignores this whole file for line 3 /),
    ]);
  });

  it('environment lines cron refuses (an empty unquoted value, an unclosed quote, text after the closing quote) are not carried; a quoted value loses its trailing blanks, as cron reads it', () => {
    const r = imported(
      [
        'A=',
        'B="unterminated',
        'C="a"b',
        "D='it''s'",
        'E="x \\"y\\""',
        'F=" lead and trail "',
        'G=""',
        '* * * * * job',
      ].join('\n') + '\n',
    );
    expect(r.config.routines.map((x) => x.env)).toEqual([{ ...CRON_ENV, F: ' lead and trail', G: '' }]);
    expect(r.notes).toEqual([
      expect.stringMatching(/^crontab:1: not carried: A=: an empty value needs quotes/),
      expect.stringMatching(/^crontab:2: not carried: B="unterminated: its " is never closed/),
      expect.stringMatching(/^crontab:3: not carried: C="a"b: text after its closing "/),
      expect.stringMatching(/^crontab:4: not carried: D='it''s': text after its closing '/),
      expect.stringMatching(/^crontab:5: not carried: E="x \\"y\\"": text after its closing "/),
      expect.stringMatching(/^crontab: cron ignores this whole file for lines 1, 2, 3, 4, 5 /),
    ]);
  });
});

describe('import-crontab: locks and ids (SPEC §4.16, §10)', () => {
  it('one named lock per lock file (the same file, the same lock; names made unique); -n skips, a blocking flock waits, -w S waits S; no flock, no lock', () => {
    const r = imported(
      [
        '*/5 * * * * flock -n /tmp/app.lock ./index.sh',
        '*/2 * * * * flock -n /tmp/app.lock -c "./sync.sh"',
        '0 * * * * flock /var/lock/app.lock ./other-app.sh',
        '0 * * * * flock /tmp/DB.lck ./dump.sh',
        '*/10 * * * * flock -w 30 /tmp/DB.lck ./vacuum.sh',
        '* * * * * /usr/bin/flock -n /run/exec ./e.sh',
        '* * * * * ./bare.sh',
      ].join('\n') + '\n',
    );
    expect(r.config.locks).toEqual({
      app: { slots: 1 },
      'app-2': { slots: 1 },
      db: { slots: 1 },
      'exec-lock': { slots: 1 },
    });
    expect(
      r.config.routines.map((x) => [
        x.id,
        x.lock ?? null,
        x.exclusive ?? true,
        x.ifBusy ?? 'skip',
        x.waitTimeoutSeconds ?? null,
      ]),
    ).toEqual([
      ['index', 'app', true, 'skip', null],
      ['sync', 'app', true, 'skip', null],
      ['other-app', 'app-2', true, 'wait', null],
      ['dump', 'db', true, 'wait', null],
      ['vacuum', 'db', true, 'wait', 30],
      ['e', 'exec-lock', true, 'skip', null],
      ['bare', null, false, 'skip', null],
    ]);
    expect(r.text).toContain('"app-2": { "slots": 1 }, // /var/lock/app.lock');
  });

  it('a lock file named like a lock the config keeps for itself (scheduler, exec-run, none) gets a name it takes', () => {
    const r = imported(
      [
        '* * * * * flock -n /tmp/scheduler.lock ./a.sh',
        '* * * * * flock -n /run/exec-run.lock ./b.sh',
        '* * * * * flock -n /run/none.lock ./c.sh',
      ].join('\n') + '\n',
    );
    expect(r.config.locks).toEqual({
      'scheduler-lock': { slots: 1 },
      'exec-run-lock': { slots: 1 },
      'none-lock': { slots: 1 },
    });
  });

  it('ids from the program past cd …&&, a test, nice, timeout N and NAME=value', () => {
    const r = imported(
      [
        '* * * * * cd /srv/app && [ -x bin/report ] && nice -n 10 timeout 60 bin/report --all',
        '* * * * * test -f /etc/enabled && LANG=C ./scripts/cleanup.sh',
        '* * * * * [[ -d /srv ]] && timeout 5m /usr/local/bin/warm-cache',
      ].join('\n') + '\n',
    );
    expect(r.config.routines.map((x) => x.id)).toEqual(['report', 'cleanup', 'warm-cache']);
  });

  it("SHELL: each job below it runs with that shell, as cron ran `$SHELL -c CMD`; every job's environment is cron's", () => {
    const r = imported(
      [
        '0 1 * * * echo "plain: $SHELL $PATH"',
        'SHELL=/bin/bash',
        'MAILTO=""',
        `0 2 * * * [[ "it's" == it* ]] && echo "bash: $SHELL \${BASH_VERSION:+yes} $MAILTO."`,
        'SHELL=/bin/sh',
        '0 3 * * * echo back',
      ].join('\n') + '\n',
    );
    const [plain, bashed, back] = r.config.routines;
    expect(plain).toMatchObject({ run: 'echo "plain: $SHELL $PATH"', env: CRON_ENV });
    expect(bashed!.env).toEqual({ SHELL: '/bin/bash', PATH: '/usr/bin:/bin', MAILTO: '' });
    expect(back).toMatchObject({ run: 'echo back', env: { ...CRON_ENV, MAILTO: '' } });
    // what the runner does with `run` (sh -c, the routine's env over the scheduler's)
    const ran = (x: (typeof r.config.routines)[number]) =>
      spawnSync('/bin/sh', ['-c', x.run], { encoding: 'utf8', env: { ...process.env, ...x.env } }).stdout;
    expect(ran(plain!)).toBe('plain: /bin/sh /usr/bin:/bin\n');
    expect(ran(bashed!)).toBe('bash: /bin/bash yes .\n');
    expect(r.notes).toEqual([]);
  });
});
