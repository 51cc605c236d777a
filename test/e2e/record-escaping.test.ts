// Strings from records and rows reach no terminal or log raw (SPEC §12): a pause note and a
// history reason holding a newline, an OSC title sequence and a clear-screen sequence, in both
// backends, checked as raw bytes in `routine list`, `routine history`, the scheduler's log (text
// and JSON) and `lock status`.

import { describe, expect, it } from 'vitest';
import { loadProject } from '../../src/config/load.js';
import { recordFire } from '../../src/scheduler/file-store.js';
import { runCli, startCli } from '../helpers/cli.js';
import { httpGet } from '../helpers/http.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import { testProject } from '../helpers/testdir.js';

const EVIL = 'line1\nFORGED [routine] succeeded x\u001b]0;pwned\u0007\u001b[2J\u009b31m';
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/; // anything but \n, \t
const rawControls = (s: string): string[] => [...s.replace(/\u001b\[[0-9;]*m/g, '')].filter((c) => RAW.test(c));

const cluster = pgCluster();

describe.each(['file', 'postgres'] as const)('control characters from records (%s backend)', (backend) => {
  it('a pause note and a reason are printed escaped, never raw, and forge no line', async () => {
    if (backend === 'postgres' && !cluster) return;
    const env: Record<string, string> = backend === 'postgres' ? { ROUTINELY_DATABASE_URL: await freshDatabase(cluster!) } : {};
    const project = testProject({
      ...(backend === 'postgres' ? { project: 'app', backend: { type: 'postgres' } } : {}),
      routines: [{ id: 'r', schedule: '0 0 1 1 *', action: 'command', run: 'true' }, { id: 's', schedule: '0 0 1 1 *', action: 'command', run: 'true' }],
    });
    expect((await runCli(['routine', 'pause', 'r', '--note', EVIL], { cwd: project, env })).code).toBe(0);
    if (backend === 'file') {
      const p = loadProject({ cwd: project });
      const at = new Date().toISOString();
      await recordFire(p, 's', { result: 'failure', reason: EVIL, scheduled_at: at, started_at: at, finished_at: at, duration_ms: 1, exit_code: 1, run_id: 'r-1' });
    }
    for (const args of [['routine', 'list'], ['routine', 'list', '--json'], ['routine', 'history', 's'], ['routine', 'history', 's', '--json'], ['lock', 'status']]) {
      const r = await runCli(args, { cwd: project, env });
      expect(rawControls(r.stdout), `${args.join(' ')}: ${JSON.stringify(r.stdout)}`).toEqual([]);
      expect(rawControls(r.stderr)).toEqual([]);
      expect(r.stdout).not.toMatch(/^FORGED/m);
      if (args.includes('--json')) expect(() => JSON.parse(r.stdout)).not.toThrow();
    }
    const list = await runCli(['routine', 'list'], { cwd: project, env });
    expect(list.stdout).toContain('\\x0aFORGED'); // the newline shown, not taken (the note is cut to the terminal's width)
    for (const format of ['text', 'json']) {
      const s = startCli(['scheduler', 'start', '--log-format', format, '--http', '127.0.0.1:0'], { cwd: project, env });
      await s.waitFor(/started/);
      if (format === 'text') {
        // the status page and its API: escaped too
        const base = (await s.waitFor(/listening on (http:\/\/\S+)/))[1]!;
        const page = await httpGet(base);
        expect(page.status).toBe(200);
        expect(rawControls(page.body)).toEqual([]); // (a newline in HTML text is a space: not a line)
        const api = await httpGet(`${base}api/routines`);
        expect(() => JSON.parse(api.body)).not.toThrow();
        expect(rawControls(api.body)).toEqual([]);
      }
      await runCli(['routine', 'resume', 'r'], { cwd: project, env });
      await runCli(['routine', 'pause', 'r', '--note', EVIL], { cwd: project, env });
      s.child.kill('SIGTERM');
      await s.exited;
      expect(rawControls(s.stdout())).toEqual([]);
      expect(s.stdout()).not.toMatch(/^FORGED/m);
      if (format === 'json') for (const line of s.stdout().trim().split('\n')) expect(() => JSON.parse(line)).not.toThrow();
    }
  });
});
