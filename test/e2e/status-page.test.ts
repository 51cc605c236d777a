/// <reference lib="dom" />
// The status page in a real browser (SPEC §11): Debian's Chromium, driven by playwright-core,
// against a running scheduler. Rows, the result strip with its letters, the lock holder, one
// auto-refresh showing a new fire without a reload, keyboard use, nothing from another host, and
// screenshots at 1280 px and phone width: test-artifacts/ always, docs/status-page.png (the
// README's picture) when ROUTINELY_UPDATE_DOCS_SCREENSHOT=1.

import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RoutineStateFile } from '../../src/state/routine-state.js';
import { axeEveryMode, chromiumMissing, openBrowser } from '../helpers/browser.js';
import { eventually, runCli, startCli } from '../helpers/cli.js';
import { routineStateOf } from '../helpers/state.js';
import { testProject } from '../helpers/testdir.js';

const ROOT = resolve(import.meta.dirname, '../..');
const ARTIFACTS = join(ROOT, 'test-artifacts');
const missing = chromiumMissing();
if (missing) console.warn(`status page browser test skipped: ${missing}`);

const cmd = (id: string, schedule: string, run: string, extra: object = {}) => ({
  id,
  schedule,
  action: 'command',
  run,
  ...extra,
});
const stateOf = (dir: string): RoutineStateFile['routines'] => routineStateOf(dir).routines;

describe.skipIf(missing !== null)('status page in Chromium', () => {
  it('shows routines with their strips, the lock holder and runs; refreshes itself; works by keyboard and on a phone', async () => {
    const project = testProject({
      project: 'shop',
      exec: {
        tasks: [
          { id: 'build', run: 'true' },
          { id: 'test', run: 'exit 1', dependsOn: ['build'] },
          { id: 'docs', run: 'true', dependsOn: ['test'] },
        ],
      },
      routines: [
        cmd('heartbeat', '* * * * * *', 'true'),
        // its 2nd, 5th, 8th… run fails
        cmd(
          'flaky',
          '*/2 * * * * *',
          'n=$(cat .flaky 2>/dev/null || echo 0); echo $((n + 1)) > .flaky; test $((n % 3)) -ne 1',
        ),
        cmd('sync', '*/3 * * * * *', 'sleep 0.5'),
        // holds the exec lock for a while once resumed: the others' ticks meet it and skip
        cmd('deploy', '*/5 * * * * *', 'sleep 60'),
        { id: 'auto', schedule: '@hourly', action: 'exec-auto' },
        cmd('backup', '0 3 * * *', 'true', { timezone: 'Europe/Berlin' }),
        cmd('cleanup', '@weekly', 'true', { enabled: false }),
      ],
    });
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(1); // a FAILED run, with why
    expect(
      (await runCli(['routine', 'pause', 'deploy', '--note', 'until the others ran'], { cwd: project })).code,
    ).toBe(0);
    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0', '--shutdown-timeout', '2'], {
      cwd: project,
      timeoutMs: 120_000,
    });
    const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    const ran = (): boolean => {
      const st = stateOf(project);
      return (
        (st.heartbeat?.counts.success ?? 0) >= 3 &&
        (st.flaky?.counts.failure ?? 0) >= 1 &&
        (st.sync?.counts.success ?? 0) >= 1
      );
    };
    await eventually(ran, 60_000, 'successes and a failure');
    expect(
      (await runCli(['routine', 'pause', 'sync', '--note', 'waiting for the new API key'], { cwd: project })).code,
    ).toBe(0);
    expect((await runCli(['routine', 'resume', 'deploy'], { cwd: project })).code).toBe(0);
    await s.waitFor(/\[routine\] started deploy/, 30_000);
    const skipsBefore = stateOf(project).heartbeat?.counts.skipped ?? 0;
    await eventually(() => (stateOf(project).heartbeat?.counts.skipped ?? 0) > skipsBefore, 20_000, 'a busy skip');
    const held = JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project })).stdout) as {
      record: { owner: { pid: number; routine: string } };
    };
    expect(held.record.owner.routine).toBe('deploy');

    const context = await openBrowser();
    const page = await context.newPage();
    const requests: string[] = [];
    const problems: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    page.on('console', (m) => m.type() === 'error' && problems.push(m.text()));
    page.on('pageerror', (e) => problems.push(e.message));
    await page.goto(url);

    // one row per routine, with a header cell naming it
    const routines = page.getByRole('table', { name: 'Routines' });
    await expect.poll(() => routines.getByRole('rowheader').count()).toBe(7);
    expect(await routines.getByRole('columnheader').allTextContents()).toEqual([
      'Routine',
      'Last 30 results',
      'Last result',
      'Next run',
      'Last run',
      'State',
      'OK / failed / skipped',
    ]);
    const row = (id: string) =>
      routines.getByRole('row').filter({ has: page.getByRole('rowheader', { name: new RegExp(`^${id}\\b`) }) });
    // the strip: a letter for every result, each kind with its own class (colour and shape)
    const strip = await row('heartbeat')
      .locator('.strip li')
      .evaluateAll((els) => els.map((e) => [e.textContent, e.className]));
    expect(strip.length).toBeGreaterThanOrEqual(3);
    expect(strip).toContainEqual(['✓', 'r r-success']);
    expect(strip).toContainEqual(['S', 'r r-skipped']);
    expect(await row('flaky').locator('.strip li.r-failure').first().textContent()).toBe('F');
    expect(await row('heartbeat').locator('.visually-hidden').textContent()).toMatch(
      /^Last \d+ results, oldest first: \d+ ok, 0 failed, \d+ skipped; newest skipped\.$/,
    );
    await expect.poll(() => row('sync').textContent()).toContain('paused: waiting for the new API key');
    expect(await row('deploy').textContent()).toMatch(/running [\d.]+s/);
    expect(await row('cleanup').textContent()).toContain('disabled');
    expect(await row('backup').textContent()).toContain('Europe/Berlin');
    // the exec lock's holder (the deploy routine) with its heartbeat age
    const lock = page.locator('#lock');
    expect(await lock.textContent()).toContain(`pid ${held.record.owner.pid} on`);
    expect(await lock.textContent()).toMatch(/Doing\s*routine deploy, run r-/);
    expect(await lock.textContent()).toMatch(/Heartbeat\s*[\d.]+[smh]/);
    // recent exec runs with status and why
    const runs = page.getByRole('table', { name: 'Recent exec runs' });
    expect(await runs.textContent()).toMatch(
      /FAILED.*TASK_FAILED 1 of 3 tasks failed: test \(exit 1\); 1 skipped \(dependency failed\)/,
    );

    // one auto-refresh shows a new fire, without reloading the page
    await page.evaluate(() => Object.assign(window, { notReloaded: true }));
    const countsBefore = await row('heartbeat').locator('td.num').textContent();
    await page.waitForFunction(
      (before) =>
        Number(document.body.dataset.refreshes ?? 0) >= 1 &&
        document.querySelector('#routines tr th .id')?.closest('tr')?.querySelector('td.num')?.textContent !== before,
      countsBefore,
      { timeout: 30_000 },
    );
    expect(await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded)).toBe(true);

    // keyboard: the skip link first, and it moves focus to the routines; the pause button toggles
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to routines');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe('routines-title');
    const pause = page.getByRole('button', { name: 'Pause auto-refresh' });
    await pause.focus();
    await page.keyboard.press('Enter');
    expect(await page.getByRole('button', { name: 'Resume auto-refresh' }).getAttribute('aria-pressed')).toBe('true');
    await page.keyboard.press('Enter');
    expect(await pause.getAttribute('aria-pressed')).toBe('false');

    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    mkdirSync(ARTIFACTS, { recursive: true });
    // axe-core: no violation at all (SPEC §11 asks for no serious or critical one), light and
    // dark, desktop and phone; the findings are kept in test-artifacts/ for the record
    const axe = await axeEveryMode(page);
    writeFileSync(join(ARTIFACTS, 'axe-status-page.json'), JSON.stringify(axe, null, 2));
    for (const [mode, found] of Object.entries(axe)) expect(found, mode).toEqual([]);
    await page.screenshot({ path: join(ARTIFACTS, 'status-page.png'), fullPage: true });
    // phone width: tables become cards, nothing scrolls sideways, the rows keep their headers
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    expect(await page.getByRole('rowheader', { name: /^heartbeat\b/ }).isVisible()).toBe(true);
    await page.screenshot({ path: join(ARTIFACTS, 'status-page-phone.png'), fullPage: true });
    if (process.env.ROUTINELY_UPDATE_DOCS_SCREENSHOT === '1')
      copyFileSync(join(ARTIFACTS, 'status-page.png'), join(ROOT, 'docs', 'status-page.png'));

    // nothing from another host; the inline script ran under the page's CSP without complaint
    const origin = new URL(url).origin;
    expect(requests.filter((r) => !r.startsWith(origin))).toEqual([]);
    expect(requests.some((r) => r.endsWith('/api/routines'))).toBe(true);
    expect(problems).toEqual([]);

    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    // the scheduler is gone: the page no longer says "healthy", it says it does not know since when
    await page.setViewportSize({ width: 1280, height: 900 });
    await expect
      .poll(() => page.locator('#status').textContent(), { timeout: 20_000 })
      .toMatch(/UNKNOWN No answer since \d\d:\d\d:\d\d UTC/);
    expect(await page.locator('#status .b-success').count()).toBe(0);
  }, 180_000); // a browser and a scheduler with many routines on a loaded 2-core machine

  it('serve watching a project with no scheduler: no green, no countdown, with JavaScript or without (the snapshot says when it was taken); a scheduler started, the page turns green by itself', async () => {
    const project = testProject({
      project: 'shop',
      routines: [cmd('tick', '* * * * * *', 'true'), cmd('nightly', '0 3 * * *', 'true')],
    });
    expect((await runCli(['routine', 'run', 'tick'], { cwd: project })).code).toBe(0);
    const serve = startCli(['serve', '--http', '127.0.0.1:0'], { cwd: project, timeoutMs: 100_000 });
    const url = (await serve.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    const look = async (p: import('playwright-core').Page) =>
      p.evaluate(() => ({
        status: document.getElementById('status')!.innerText,
        green: document.querySelectorAll('#status .b-success').length,
        next: Array.from(document.querySelectorAll('td[data-label="Next run"]'))
          .map((td) => (td as HTMLElement).innerText)
          .join(' | '),
        snapshot: document.getElementById('snapshot')?.innerText ?? null,
        refreshes: Number(document.body.dataset.refreshes || 0),
      }));
    const page = await (await openBrowser()).newPage();
    await page.goto(url);
    await page.waitForFunction(() => Number(document.body.dataset.refreshes || 0) >= 1, undefined, { timeout: 20_000 });
    let seen = await look(page);
    expect(seen.green, seen.status).toBe(0);
    expect(seen.status).toMatch(/NO SCHEDULER/);
    expect(seen.status).not.toMatch(/healthy/);
    expect(seen.next).toMatch(/none: no scheduler runs/);
    expect(seen.next).not.toMatch(/\bin \d/);
    expect(seen.snapshot, 'with JavaScript the page refreshes: no snapshot note').toBeNull();
    // without JavaScript: the same truth, and when it was read
    const still = await (await openBrowser(undefined, false)).newPage();
    await still.goto(url);
    const snap = await look(still);
    expect(snap.green).toBe(0);
    expect(snap.status).toMatch(/NO SCHEDULER/);
    expect(snap.next).not.toMatch(/\bin \d/);
    expect(snap.snapshot).toMatch(
      /^A snapshot taken at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: without JavaScript this page does not refresh itself/,
    );
    // a scheduler starts: the open page says so by itself, countdowns and all
    const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 60_000 });
    await s.waitFor(/\[scheduler\] started/);
    await page.waitForFunction(() => document.querySelectorAll('#status .b-success').length === 1, undefined, {
      timeout: 20_000,
    });
    seen = await look(page);
    expect(seen.status).toMatch(/a scheduler is running/);
    expect(seen.next).toMatch(/\bin \d/);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    await page.waitForFunction(() => document.getElementById('status')!.innerText.includes('NO SCHEDULER'), undefined, {
      timeout: 20_000,
    });
    serve.child.kill('SIGTERM');
    await serve.exited;
  });

  it("a routine's page: the whole kept history a page at a time, a chart of its durations, the output of a running fire as it grows", async () => {
    const project = testProject({
      routines: [
        cmd('many', '0 0 1 1 *', 'echo ran'),
        cmd('slowly', '0 0 1 1 *', 'echo first line; sleep 2; echo second line; sleep 60', { exclusive: false }),
      ],
    });
    for (let i = 0; i < 55; i++) expect((await runCli(['routine', 'run', 'many'], { cwd: project })).code).toBe(0);
    const serve = startCli(['serve', '--http', '127.0.0.1:0'], { cwd: project, timeoutMs: 100_000 });
    const url = (await serve.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    const page = await (await openBrowser()).newPage();
    await page.goto(`${url}routines/many`);
    const text = async (id: string): Promise<string> => page.evaluate((i) => document.getElementById(i)!.innerText, id);
    expect(await text('pager')).toMatch(/fires 1–50 of 55 kept \(page 1 of 2\)/);
    expect(await page.locator('#fires tr').count()).toBe(50);
    expect(await page.locator('svg.chart rect').count()).toBe(30);
    expect(await page.locator('svg.chart').getAttribute('aria-label')).toMatch(
      /^Durations of the last 30 fires that ran, oldest first: median /,
    );
    await page.click('text=Older fires →');
    await page.waitForURL(/\?page=2/);
    expect(await page.locator('#fires tr').count()).toBe(5);
    expect(await text('pager')).toMatch(/fires 51–55 of 55 kept \(page 2 of 2\)/);
    // a fire running now: its output on its page, growing without a reload
    const run = startCli(['routine', 'run', 'slowly'], { cwd: project, timeoutMs: 90_000 });
    await run.waitFor(/first line/);
    await page.goto(`${url}routines/slowly`);
    expect(await text('output')).toMatch(/is running: its output so far/);
    expect(await text('output')).toMatch(/first line/);
    await page.waitForFunction(() => document.getElementById('output')!.innerText.includes('second line'), undefined, {
      timeout: 20_000,
    });
    expect(await page.evaluate(() => location.pathname + location.search)).toBe('/routines/slowly');
    expect((await runCli(['routine', 'stop', 'slowly'], { cwd: project })).code).toBe(0);
    await run.exited;
    await page.waitForFunction(() => !document.getElementById('output')!.innerText.includes('is running'), undefined, {
      timeout: 20_000,
    });
    expect(await text('fires')).toMatch(/stopped by hand \(cli, pid \d+\)/);
    serve.child.kill('SIGTERM');
    await serve.exited;
  });

  it('100 routines and a 200-character pause note fit 1280 px and a phone: nothing cut off, nothing scrolls sideways', async () => {
    const routines = Array.from({ length: 100 }, (_, i) =>
      cmd(`routine-with-a-long-name-${String(i).padStart(3, '0')}`, '0 0 1 1 *', 'true', {
        timezone: 'America/Argentina/Buenos_Aires',
      }),
    );
    const project = testProject({ routines });
    const note =
      'waiting for the vendor to rotate the API key and for the new firewall rules to be deployed on every host; ask ops in #infra before resuming this routine, it writes to the billing database'.padEnd(
        200,
        '.',
      );
    expect(
      (await runCli(['routine', 'pause', 'routine-with-a-long-name-000', '--note', note], { cwd: project })).code,
    ).toBe(0);
    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, timeoutMs: 120_000 });
    const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    const context = await openBrowser({ width: 1280, height: 900 });
    const page = await context.newPage();
    await page.goto(url);
    const overflow = () =>
      page.evaluate(() => {
        // the routines table and its box: missing, the widths below would compare nothing
        const wrap = document.querySelector('#routines')?.closest('.table-wrap');
        const table = wrap?.querySelector('table');
        if (!wrap || !table)
          throw new Error(`no routines table in its .table-wrap: ${document.body.innerHTML.slice(0, 500)}`);
        return {
          doc: document.documentElement.scrollWidth,
          view: window.innerWidth,
          table: table.scrollWidth,
          box: wrap.clientWidth,
          rows: document.querySelectorAll('#routines > tr').length,
        };
      });
    const wide = await overflow();
    expect(wide.rows, JSON.stringify(wide)).toBe(100);
    expect(wide.box, JSON.stringify(wide)).toBeGreaterThan(0);
    expect(wide.doc, JSON.stringify(wide)).toBeLessThanOrEqual(wide.view);
    expect(wide.table, JSON.stringify(wide)).toBeLessThanOrEqual(wide.box);
    expect(await page.getByText(note.slice(0, 60)).count()).toBeGreaterThan(0); // the whole note is there, wrapped
    await page.setViewportSize({ width: 390, height: 844 });
    const phone = await overflow();
    expect(phone.doc, JSON.stringify(phone)).toBeLessThanOrEqual(390);
    const axe = await axeEveryMode(page);
    mkdirSync(ARTIFACTS, { recursive: true });
    writeFileSync(join(ARTIFACTS, 'axe-100-routines.json'), JSON.stringify(axe, null, 2));
    for (const [mode, found] of Object.entries(axe)) expect(found, mode).toEqual([]);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  }, 180_000);
});
