// The phases of fires in every view (issue 48): the scenarios of test/e2e/routine-phases.test.ts
// (file backend) and test/e2e/pg-phases.test.ts (PostgreSQL), one file each so they run side
// by side (most of their time is waiting for a tick).

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { chromiumMissing, openBrowser } from './browser.js';
import { eventually, runCli, startCli, type Spawned } from './cli.js';
import { freshDatabase } from './pg-test.js';
import type { TestCluster } from './postgres.js';
import { testProject } from './testdir.js';

interface Row {
  id: string;
  phase: 'delayed' | 'queued' | 'waiting' | 'running' | null;
  phase_since: string | null;
  waiting_for: { behind: string } | { lock: string; holder: string } | { until: string; why: string } | null;
  running_since: string | null;
}

/** Runs until the file `go` exists in the project. */
const untilGo = 'while [ ! -e go ]; do sleep 0.05; done';

/** The tests, on the file backend or (with `cluster`) on PostgreSQL. */
export function phaseTests(cluster: TestCluster | null): void {
  const backend = cluster ? 'postgres' : 'file';
  describe(`the phase of a fire before it runs, ${backend} backend`, () => {
    it(
      'queued behind the routine that holds its lock, waiting for a lock held from outside, running: the same in routine list, --json, /api/routines and the page, from the moment the scheduler says it; none once it ran',
      { timeout: 120_000 },
      async () => {
        const url = backend === 'postgres' ? await freshDatabase(cluster!) : null;
        const project = testProject({
          project: 'app',
          ...(url ? { backend: { type: 'postgres' } } : {}),
          routines: [
            // both due at the same moments on one lock: one runs until `go`, the other queues behind it
            { id: 'first', schedule: '*/30 * * * * *', action: 'command', run: untilGo, lock: 'db' },
            { id: 'second', schedule: '*/30 * * * * *', action: 'command', run: 'true', lock: 'db' },
            // its lock held by `lock run` from outside: it waits (until shortly before its next tick)
            { id: 'report', schedule: '*/30 * * * * *', action: 'command', run: 'true', lock: 'cache', ifBusy: 'wait' },
          ],
        });
        const env = url ? { ROUTINELY_DATABASE_URL: url } : {};
        const opts = { cwd: project, env };
        const holder = startCli(['lock', 'run', '--lock', 'cache', '--', 'sh', '-c', `echo holding; ${untilGo}`], {
          ...opts,
          timeoutMs: 110_000,
        });
        await holder.waitFor(/holding/);
        const s: Spawned = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { ...opts, timeoutMs: 110_000 });
        const base = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/, 60_000))[1]!;
        // the next tick: one of first and second runs, the other queues behind it; report waits
        const queued = (await s.waitFor(/\[routine\] queued (first|second): behind (first|second)/, 60_000)).slice(1);
        await s.waitFor(/\[routine\] waiting report: cache busy \(held by lock run /, 30_000);
        const [behindId, runningId] = queued as [string, string];
        expect(behindId).not.toBe(runningId);

        const rows = async (): Promise<Record<string, Row>> => {
          const r = await runCli(['routine', 'list', '--json'], opts);
          expect(r.code, r.stderr).toBe(0);
          return Object.fromEntries((JSON.parse(r.stdout) as Row[]).map((x) => [x.id, x]));
        };
        const expected = (list: Record<string, Row>): void => {
          expect(list[runningId]).toMatchObject({ phase: 'running', waiting_for: null });
          expect(list[runningId]!.running_since).toBe(list[runningId]!.phase_since);
          expect(list[behindId]).toMatchObject({
            phase: 'queued',
            waiting_for: { behind: runningId },
            running_since: null,
          });
          expect(list.report).toMatchObject({
            phase: 'waiting',
            waiting_for: { lock: 'cache', holder: expect.stringMatching(/^lock run /) },
            running_since: null,
          });
          for (const id of [behindId, 'report'])
            expect(Number.isFinite(Date.parse(list[id]!.phase_since!)), id).toBe(true);
        };
        // right after the scheduler said it (a database board is written a moment after the line)
        if (backend === 'file') expected(await rows());
        else
          await eventually(
            async () => (await rows())[behindId]?.phase === 'queued' && (await rows()).report?.phase === 'waiting',
            10_000,
            'the phases in the database',
          );
        expected(await rows());

        // the text: the last-result column says where each fire is
        const text = await runCli(['routine', 'list'], opts);
        expect(text.stdout).toMatch(new RegExp(`^${behindId} .*queued (\\S+ )?behind ${runningId}`, 'm'));
        expect(text.stdout).toMatch(/^report .*waiting( \S+)?: cache busy/m);
        expect(text.stdout).toMatch(new RegExp(`^${runningId} .*running `, 'm'));

        // the server's API and page say the same
        const api = Object.fromEntries(
          ((await (await fetch(`${base}api/routines`)).json()) as Row[]).map((x) => [x.id, x]),
        );
        expected(api);
        const page = await (await fetch(`${base}`)).text();
        expect(page).toMatch(new RegExp(`class="badge b-queued">queued [^<]* behind ${runningId}<`));
        expect(page).toMatch(/class="badge b-waiting" title="held by lock run [^"]*">waiting [^<]*: cache busy</);
        const detail = await (await fetch(`${base}routines/report`)).text();
        expect(detail).toMatch(/b-waiting[^>]*>waiting [^<]*: cache busy</);

        // and in a real browser: the rows as rendered, and again once the page refreshed itself from
        // /api (the queued fire stays queued until `go`; the waiting one may give up before its next tick)
        if (backend === 'file' && !chromiumMissing()) {
          const browser = await openBrowser();
          const page = await browser.newPage();
          await page.goto(base);
          const rowText = (id: string) =>
            page
              .locator('#routines tr', { has: page.locator(`.id:text-is("${id}")`) })
              .first()
              .innerText();
          expect(await rowText(behindId)).toMatch(new RegExp(`queued \\S+ behind ${runningId}`));
          expect(await rowText('report')).toMatch(/waiting \S+: cache busy/);
          await page.waitForFunction(() => Number(document.body.dataset.refreshes || 0) >= 1, undefined, {
            timeout: 20_000,
          });
          expect(await rowText(behindId)).toMatch(new RegExp(`queued \\S+ behind ${runningId}`));
          expect(await rowText(runningId)).toMatch(/running/);
        }

        // the holder lets go: report runs; first ends: second runs — none is queued or waiting then
        writeFileSync(join(project, 'go'), '');
        expect((await holder.exited).code).toBe(0);
        await eventually(
          async () => {
            const l = await rows();
            return ['first', 'second', 'report'].every(
              (id) =>
                l[id]!.phase === null &&
                (l as Record<string, Row & { last_result: string | null }>)[id]!.last_result === 'success',
            );
          },
          30_000,
          'every fire ran',
          () => s.stdout(),
        );
        const after = await rows();
        for (const id of ['first', 'second', 'report'])
          expect(after[id]).toMatchObject({ phase: null, phase_since: null, waiting_for: null, running_since: null });
        const textAfter = (await runCli(['routine', 'list'], opts)).stdout;
        expect(textAfter).not.toMatch(/queued|waiting/);

        s.child.kill('SIGTERM');
        expect((await s.exited).code).toBe(0);
      },
    );

    it(
      "a retry's back-off: delayed, until when and which attempt, the same in routine list, --json, /api/routines and the page; none once the scheduler stopped",
      { timeout: 120_000 },
      async () => {
        const url = backend === 'postgres' ? await freshDatabase(cluster!) : null;
        const project = testProject({
          project: 'app',
          ...(url ? { backend: { type: 'postgres' } } : {}),
          routines: [
            {
              id: 'flaky',
              schedule: '*/30 * * * * *',
              action: 'command',
              run: 'exit 1',
              retry: { attempts: 1, backoffSeconds: 20 },
            },
          ],
        });
        const env = url ? { ROUTINELY_DATABASE_URL: url } : {};
        const opts = { cwd: project, env };
        const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { ...opts, timeoutMs: 110_000 });
        const base = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/, 60_000))[1]!;
        await s.waitFor(/\[routine\] retrying flaky in \d+\.\ds \(attempt 2 of 2\)/, 60_000);
        const row = async (): Promise<Row & { failing: boolean }> =>
          (
            JSON.parse((await runCli(['routine', 'list', '--json'], opts)).stdout) as (Row & { failing: boolean })[]
          )[0]!;
        // right after the scheduler said it (a database board is written a moment after the line)
        if (backend === 'postgres')
          await eventually(async () => (await row()).phase === 'delayed', 10_000, 'the phase in the database');
        const listed = await row();
        expect(listed).toMatchObject({
          phase: 'delayed',
          failing: true,
          running_since: null,
          waiting_for: { why: 'retry', attempt: 2, of: 2, until: expect.any(String) },
        });
        const until = Date.parse((listed.waiting_for as { until: string }).until);
        // 20 s and up to a fifth more, from the failed attempt
        expect(until - Date.parse(listed.phase_since!)).toBeGreaterThanOrEqual(20_000);
        expect(until - Date.parse(listed.phase_since!)).toBeLessThanOrEqual(24_100);
        // the text says when it fires, beside the failure
        expect((await runCli(['routine', 'list'], opts)).stdout).toMatch(/^flaky .* retry 2 of 2 in \d+s +failing /m);
        const api = ((await (await fetch(`${base}api/routines`)).json()) as Row[])[0]!;
        expect(api).toMatchObject({
          phase: 'delayed',
          waiting_for: listed.waiting_for,
          phase_since: listed.phase_since,
        });
        expect(await (await fetch(base)).text()).toMatch(/class="badge b-queued">retry 2 of 2 in [^<]+</);
        s.child.kill('SIGTERM');
        expect((await s.exited).code).toBe(0);
        expect(await row()).toMatchObject({ phase: null, waiting_for: null });
        expect((await runCli(['routine', 'list'], opts)).stdout).not.toMatch(/retry/);
      },
    );

    it(
      'the board of a scheduler SIGKILLed while a fire waits is not believed: no view shows it waiting',
      { timeout: 120_000 },
      async () => {
        const url = backend === 'postgres' ? await freshDatabase(cluster!) : null;
        const project = testProject({
          project: 'app',
          ...(url ? { backend: { type: 'postgres' } } : {}),
          routines: [
            { id: 'report', schedule: '*/30 * * * * *', action: 'command', run: 'true', lock: 'cache', ifBusy: 'wait' },
          ],
        });
        const env = url ? { ROUTINELY_DATABASE_URL: url } : {};
        const opts = { cwd: project, env };
        const holder = startCli(['lock', 'run', '--lock', 'cache', '--', 'sh', '-c', `echo holding; ${untilGo}`], {
          ...opts,
          timeoutMs: 110_000,
        });
        await holder.waitFor(/holding/);
        const s = startCli(['scheduler', 'start'], { ...opts, timeoutMs: 110_000 });
        await s.waitFor(/\[routine\] waiting report: cache busy/, 60_000);
        const phaseOf = async (): Promise<Row['phase']> =>
          (JSON.parse((await runCli(['routine', 'list', '--json'], opts)).stdout) as Row[])[0]!.phase;
        await eventually(async () => (await phaseOf()) === 'waiting', 10_000, 'waiting shown');
        s.child.kill('SIGKILL');
        await s.exited;
        // its process is gone: its board is not believed (with a database, before its lease runs out)
        expect(await phaseOf()).toBe(null);
        expect((await runCli(['routine', 'list'], opts)).stdout).not.toMatch(/waiting/);
        writeFileSync(join(project, 'go'), '');
        expect((await holder.exited).code).toBe(0);
      },
    );

    it(
      'a routine paused while its tick is queued: no view shows the tick queued, and at its turn it is dropped, said in the log',
      { timeout: 120_000 },
      async () => {
        const url = backend === 'postgres' ? await freshDatabase(cluster!) : null;
        const project = testProject({
          project: 'app',
          ...(url ? { backend: { type: 'postgres' } } : {}),
          routines: [
            { id: 'first', schedule: '*/30 * * * * *', action: 'command', run: untilGo, lock: 'db' },
            { id: 'second', schedule: '*/30 * * * * *', action: 'command', run: 'true', lock: 'db' },
          ],
        });
        const env = url ? { ROUTINELY_DATABASE_URL: url } : {};
        const opts = { cwd: project, env };
        const s = startCli(['scheduler', 'start'], { ...opts, timeoutMs: 110_000 });
        const [behindId] = (await s.waitFor(/\[routine\] queued (first|second): behind (first|second)/, 60_000)).slice(
          1,
        ) as [string, string];
        expect((await runCli(['routine', 'pause', behindId], opts)).code).toBe(0);
        const row = async (): Promise<Row> =>
          (JSON.parse((await runCli(['routine', 'list', '--json'], opts)).stdout) as Row[]).find(
            (r) => r.id === behindId,
          )!;
        expect(await row()).toMatchObject({ phase: null, waiting_for: null });
        expect((await runCli(['routine', 'list'], opts)).stdout).not.toMatch(/queued/);
        writeFileSync(join(project, 'go'), '');
        await s.waitFor(
          new RegExp(`${behindId}: its tick of \\S+ is not fired: the routine was paused while it waited for its turn`),
          30_000,
        );
        const history = (await runCli(['routine', 'history', behindId, '--json'], opts)).stdout;
        expect(JSON.parse(history)).toEqual([]);
        s.child.kill('SIGTERM');
        expect((await s.exited).code).toBe(0);
      },
    );

    it(
      'a manual routine run waiting for its lock (--if-busy wait) is waiting in routine list, --json, /api/routines and the page, with no scheduler and with one; a SIGKILLed one is not; none once it ran',
      { timeout: 120_000 },
      async () => {
        const url = backend === 'postgres' ? await freshDatabase(cluster!) : null;
        const project = testProject({
          project: 'app',
          ...(url ? { backend: { type: 'postgres' } } : {}),
          routines: [
            { id: 'report', schedule: '0 3 * * *', action: 'command', run: 'true', lock: 'cache' },
            { id: 'other', schedule: '0 4 * * *', action: 'command', run: 'true', lock: 'cache' },
            // a run from the page waits (its busy rule), in the scheduler's own process
            { id: 'paged', schedule: '0 5 * * *', action: 'command', run: 'true', lock: 'cache', ifBusy: 'wait' },
          ],
          http: { actions: true },
        });
        const token = 'phases-token-0123456789abcdef';
        const auth = { headers: { authorization: `Bearer ${token}` } };
        const env = { ROUTINELY_HTTP_TOKEN: token, ...(url ? { ROUTINELY_DATABASE_URL: url } : {}) };
        const opts = { cwd: project, env };
        const rows = async (): Promise<Record<string, Row>> => {
          const r = await runCli(['routine', 'list', '--json'], opts);
          expect(r.code, r.stderr).toBe(0);
          return Object.fromEntries((JSON.parse(r.stdout) as Row[]).map((x) => [x.id, x]));
        };
        // the list cache exists (the file backend's quick path answers from it)
        expect((await rows()).report).toMatchObject({ phase: null, waiting_for: null });
        const holder = startCli(['lock', 'run', '--lock', 'cache', '--', 'sh', '-c', `echo holding; ${untilGo}`], {
          ...opts,
          timeoutMs: 110_000,
        });
        await holder.waitFor(/holding/);
        const manual = (): Spawned =>
          startCli(['routine', 'run', 'report', '--if-busy', 'wait'], { ...opts, timeoutMs: 110_000 });
        const killed = manual();
        await killed.waitFor(/waiting for the cache lock, held by /);
        const waiting = (list: Record<string, Row>): void => {
          expect(list.report).toMatchObject({
            phase: 'waiting',
            waiting_for: { lock: 'cache', holder: expect.stringMatching(/^lock run since \d\d:\d\d:\d\d$/) },
            running_since: null,
          });
          expect(Number.isFinite(Date.parse(list.report!.phase_since!))).toBe(true);
          expect(list.other).toMatchObject({ phase: null, waiting_for: null });
        };
        // no scheduler: the moment it said it waits
        waiting(await rows());
        expect((await runCli(['routine', 'list'], opts)).stdout).toMatch(/^report .*waiting( \S+)?: cache busy/m);
        // SIGKILLed, it waits no more: no view says it does
        killed.child.kill('SIGKILL');
        await killed.exited;
        expect((await rows()).report).toMatchObject({ phase: null, waiting_for: null });
        expect((await runCli(['routine', 'list'], opts)).stdout).not.toMatch(/waiting/);

        // with a scheduler: its API and page say it too
        const s: Spawned = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { ...opts, timeoutMs: 110_000 });
        const base = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/, 60_000))[1]!;
        const waiter = manual();
        await waiter.waitFor(/waiting for the cache lock, held by /);
        waiting(await rows());
        waiting(
          Object.fromEntries(
            ((await (await fetch(`${base}api/routines`, auth)).json()) as Row[]).map((x) => [x.id, x]),
          ),
        );
        expect(await (await fetch(`${base}`, auth)).text()).toMatch(
          /class="badge b-waiting" title="held by lock run [^"]*">waiting [^<]*: cache busy</,
        );
        // a run from the page that waits: in the scheduler's own process, its server shows it too
        const run = await fetch(`${base}api/routines/paged/run`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: '{}',
        });
        expect(run.status).toBe(202);
        expect(await run.json()).toMatchObject({ state: 'waiting' });
        const paged = (list: Record<string, Row>): void =>
          void expect(list.paged).toMatchObject({
            phase: 'waiting',
            waiting_for: { lock: 'cache', holder: expect.stringMatching(/^lock run since /) },
          });
        paged(await rows());
        paged(
          Object.fromEntries(
            (
              (await (
                await fetch(`${base}api/routines`, { headers: { authorization: `Bearer ${token}` } })
              ).json()) as Row[]
            ).map((x) => [x.id, x]),
          ),
        );

        // the holder lets go: it runs, and is waiting no more
        writeFileSync(join(project, 'go'), '');
        expect((await holder.exited).code).toBe(0);
        expect((await waiter.exited).code, waiter.stderr()).toBe(0);
        await eventually(async () => (await rows()).paged?.phase === null, 30_000, 'the run from the page ran');
        const after = (await rows()) as Record<string, Row & { last_result: string | null }>;
        for (const id of ['report', 'paged']) {
          expect(after[id], id).toMatchObject({ phase: null, waiting_for: null });
          expect(after[id]!.last_result, id).toBe('success');
        }
        s.child.kill('SIGTERM');
        expect((await s.exited).code).toBe(0);
      },
    );
  });
}
