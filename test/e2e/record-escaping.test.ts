// Strings from records and rows reach no terminal or log raw (SPEC §12): a pause note and a
// history reason (and run id) holding a newline, an OSC title sequence and a clear-screen sequence, in both
// backends, checked as raw bytes in `routine list`, `routine history`, the scheduler's log (text
// and JSON) and the status page.

import { describe, expect, it } from 'vitest';
import { withBackend } from '../../src/backend.js';
import { loadProject } from '../../src/config/load.js';
import { runCli, startCli } from '../helpers/cli.js';
import { httpGet } from '../helpers/http.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import { testProject } from '../helpers/testdir.js';

const EVIL = 'line1\nFORGED [routine] succeeded x\u001b]0;pwned\u0007\u001b[2J\u009b31m';
/** EVIL as the text views show it: every control character as \xNN. */
const EVIL_SHOWN = 'line1\\x0aFORGED [routine] succeeded x\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m';
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/; // anything but \n, \t
const rawControls = (s: string): string[] => [...s.replace(/\u001b\[[0-9;]*m/g, '')].filter((c) => RAW.test(c));

// (under CI=true this throws when there is no test cluster: database tests fail there, never skip)
const cluster = pgCluster();

interface ListRow {
  id: string;
  paused_note: string | null;
  last_reason: string | null;
}

describe.each(['file', 'postgres'] as const)('control characters from records (%s backend)', (backend) => {
  it.skipIf(backend === 'postgres' && !cluster)(
    'a pause note and a reason are printed escaped, never raw, and forge no line',
    async () => {
      const env: Record<string, string> =
        backend === 'postgres' ? { ROUTINELY_DATABASE_URL: await freshDatabase(cluster!) } : {};
      const project = testProject({
        ...(backend === 'postgres' ? { project: 'app', backend: { type: 'postgres' } } : {}),
        // r ticks every second: the scheduler logs its pause, note and all, at its next tick
        routines: [
          { id: 'r', schedule: '* * * * * *', action: 'command', run: 'true' },
          { id: 's', schedule: '0 0 1 1 *', action: 'command', run: 'true' },
        ],
      });
      expect((await runCli(['routine', 'pause', 'r', '--note', EVIL], { cwd: project, env })).code).toBe(0);
      // a fire whose reason is EVIL, recorded through the project's own backend (either kind)
      const at = new Date().toISOString();
      await withBackend(loadProject({ cwd: project, env: { ...process.env, ...env } }), (b) =>
        b.routines.recordFire(
          's',
          {
            result: 'failure',
            reason: EVIL,
            scheduled_at: at,
            started_at: at,
            finished_at: at,
            duration_ms: 1,
            exit_code: 1,
            // (a run id read from a record is no more trusted than a reason: a fault pass found
            // routine history printing it raw)
            run_id: `r-1${EVIL}`,
          },
          () => {},
        ),
      );
      const listed = (stdout: string): ListRow[] => JSON.parse(stdout) as ListRow[];
      const views: [string[], (stdout: string) => void][] = [
        // the newline shown, not taken (the note is cut to the terminal's width)
        [['routine', 'list'], (out) => expect(out).toMatch(/^r +.*paused: line1\\x0aFORGED/m)],
        // JSON escapes it its own way, and gives the string back whole
        [
          ['routine', 'list', '--json'],
          (out) => {
            expect(out).toContain('line1\\nFORGED [routine] succeeded x\\u001b]0;pwned\\u0007');
            expect(listed(out).map((row) => [row.id, row.paused_note, row.last_reason])).toEqual([
              ['r', EVIL, null],
              ['s', null, EVIL],
            ]);
          },
        ],
        [['routine', 'history', 's'], (out) => expect(out).toContain(`${EVIL_SHOWN}  r-1${EVIL_SHOWN}`)],
        [
          ['routine', 'history', 's', '--json'],
          (out) => expect((JSON.parse(out) as { reason: string }[]).map((e) => e.reason)).toEqual([EVIL]),
        ],
      ];
      for (const [args, shows] of views) {
        const r = await runCli(args, { cwd: project, env });
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
        expect(rawControls(r.stdout), `${args.join(' ')}: ${JSON.stringify(r.stdout)}`).toEqual([]);
        expect(rawControls(r.stderr)).toEqual([]);
        expect(r.stdout).not.toMatch(/^FORGED/m);
        shows(r.stdout);
      }
      for (const format of ['text', 'json']) {
        const s = startCli(['scheduler', 'start', '--log-format', format, '--http', '127.0.0.1:0'], {
          cwd: project,
          env,
        });
        await s.waitFor(/started/);
        await s.waitFor(format === 'text' ? /\[routine\] paused r / : /"event":"routine\.paused"/);
        if (format === 'text') {
          // the status page and its API: escaped too
          const base = (await s.waitFor(/listening on (http:\/\/\S+)/))[1]!;
          const page = await httpGet(base);
          expect(page.status).toBe(200);
          expect(rawControls(page.body)).toEqual([]); // (a newline in HTML text is a space: not a line)
          expect(page.body).toContain('paused: line1\nFORGED [routine] succeeded x\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m');
          const api = await httpGet(`${base}api/routines`);
          expect(api.status).toBe(200);
          expect(listed(api.body).map((row) => [row.id, row.paused_note, row.last_reason])).toEqual([
            ['r', EVIL, null],
            ['s', null, EVIL],
          ]);
          expect(rawControls(api.body)).toEqual([]);
        }
        await runCli(['routine', 'resume', 'r'], { cwd: project, env });
        await runCli(['routine', 'pause', 'r', '--note', EVIL], { cwd: project, env });
        s.child.kill('SIGTERM');
        await s.exited;
        expect(rawControls(s.stdout())).toEqual([]);
        expect(s.stdout()).not.toMatch(/^FORGED/m);
        if (format === 'text') expect(s.stdout()).toContain(`[routine] paused r (${EVIL_SHOWN})\n`);
        if (format === 'json') {
          const events = s
            .stdout()
            .trim()
            .split('\n')
            .map((line) => JSON.parse(line) as { event: string; routine?: string; note?: string });
          expect(events.filter((e) => e.event === 'routine.paused')[0]).toMatchObject({ routine: 'r', note: EVIL });
        }
      }
    },
  );
});
