/// <reference lib="dom" />
// The status page's actions and a routine's page in a real browser (SPEC §11): Debian's
// Chromium, driven by playwright-core, against a running scheduler with `http.actions` and a
// token. The page asks for the token and sends it as a header; a routine's page lists its fires
// and shows a run's output escaped; "Run now" fires it with the records and busy rule of
// `routine run`; pause and resume act as the CLI does; a page of another origin cannot act.

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { axeEveryMode, chromiumMissing, openBrowser } from '../helpers/browser.js';
import { eventually, runCli, startCli } from '../helpers/cli.js';
import { httpGet } from '../helpers/http.js';
import { testProject } from '../helpers/testdir.js';

const ROOT = resolve(import.meta.dirname, '../..');
const ARTIFACTS = join(ROOT, 'test-artifacts');
const TOKEN = 'e2e-token-0123456789abcdef0123';
const missing = chromiumMissing();
if (missing) console.warn(`status actions browser test skipped: ${missing}`);

interface Entry {
  result: string;
  trigger?: string;
  run_id: string | null;
}

describe.skipIf(missing !== null)('status page actions in Chromium', () => {
  it("asks for the token, shows a routine's fires and output, runs, pauses and resumes it as the CLI does; another origin cannot", async () => {
    const project = testProject({
      project: 'shop',
      http: { actions: true },
      routines: [
        // due only once a year: every fire here is one the test asked for
        { id: 'hello', schedule: '0 0 1 1 *', action: 'command', run: "printf '<b>bold</b> & done\\n'" },
        { id: 'other', schedule: '0 0 1 1 *', action: 'command', run: 'true' },
      ],
    });
    const env = { ROUTINELY_HTTP_TOKEN: TOKEN };
    const history = async (): Promise<Entry[]> =>
      JSON.parse((await runCli(['routine', 'history', 'hello', '--json'], { cwd: project })).stdout) as Entry[];

    // actions without the token are refused before anything starts
    const refused = await runCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(
      /routinely\.json: http\.actions: the actions need ROUTINELY_HTTP_TOKEN .*also on loopback/,
    );

    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0', '--shutdown-timeout', '2'], {
      cwd: project,
      env,
      timeoutMs: 150_000,
    });
    const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+) \(token required\)/))[1]!;
    const context = await openBrowser();
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(e.message));

    // without the token the page has no data and asks for it
    await page.goto(url);
    await expect.poll(() => page.locator('#token-says').textContent()).toBe('This server asks for its token.');
    expect(await page.getByRole('rowheader').count()).toBe(0);
    await page.getByLabel('Token of this server (ROUTINELY_HTTP_TOKEN)').fill(TOKEN);
    await page.getByRole('button', { name: 'Use it' }).click();
    await expect.poll(() => page.getByRole('rowheader', { name: /^hello\b/ }).count()).toBe(1);
    expect(await page.locator('#token-form').isHidden()).toBe(true);
    // kept for this tab, never as a cookie
    expect(await page.evaluate(() => sessionStorage.getItem('routinely-token'))).toBe(TOKEN);
    expect(await context.cookies()).toEqual([]);

    // the routine's row opens its page
    await page.getByRole('link', { name: 'hello', exact: true }).click();
    await page.waitForURL(/\/routines\/hello$/);
    await expect.poll(() => page.locator('#fires').textContent()).toContain('No fires recorded yet.');

    // Run now: it starts, its fire appears with its output, recorded as `routine run` records it
    await page.getByRole('button', { name: 'Run now' }).click();
    await expect.poll(() => page.locator('#action-result').textContent()).toMatch(/^run: started hello \(run r-\S+\)$/);
    await expect.poll(() => page.locator('#fires').textContent(), { timeout: 20_000 }).toMatch(/ok.*by hand/);
    await expect
      .poll(() => page.locator('pre.output').textContent(), { timeout: 20_000 })
      .toContain('<b>bold</b> & done');
    expect(await page.locator('pre.output b').count()).toBe(0); // shown, not interpreted
    const ran = await history();
    expect(ran).toHaveLength(1);
    expect(ran[0]).toMatchObject({ result: 'success', trigger: 'manual' });

    // busy: refused with the holder named, nothing recorded (the CLI's default for a manual run)
    const holder = startCli(['lock', 'run', '--', 'sleep', '60'], { cwd: project });
    await expect
      .poll(async () => JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project })).stdout).state, {
        timeout: 20_000,
      })
      .toBe('held');
    await page.getByRole('button', { name: 'Run now' }).click();
    await expect
      .poll(() => page.locator('#action-result').textContent())
      .toMatch(/^run: exec busy: held by pid \d+ .*\(nothing recorded\)$/);
    holder.child.kill('SIGTERM');
    await holder.exited;
    expect(await history()).toHaveLength(1);

    // pause with a note, then resume: what `routine list` shows
    await page.getByLabel('Pause note').fill('until the vendor answers');
    await page.getByRole('button', { name: 'Pause', exact: true }).click();
    await expect.poll(() => page.locator('#action-result').textContent()).toBe('pause: paused hello');
    const listed = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as {
      id: string;
      paused: boolean;
      paused_note: string | null;
    }[];
    expect(listed.find((r) => r.id === 'hello')).toMatchObject({
      paused: true,
      paused_note: 'until the vendor answers',
    });
    await expect.poll(() => page.locator('#summary').textContent()).toContain('paused: until the vendor answers');

    // the page passes axe in every mode, with a fire, its output and the pause
    const axe = await axeEveryMode(page);
    mkdirSync(ARTIFACTS, { recursive: true });
    writeFileSync(join(ARTIFACTS, 'axe-routine-page.json'), JSON.stringify(axe, null, 2));
    for (const [mode, found] of Object.entries(axe)) expect(found, mode).toEqual([]);
    await page.screenshot({ path: join(ARTIFACTS, 'status-routine.png'), fullPage: true });
    if (process.env.ROUTINELY_UPDATE_DOCS_SCREENSHOT === '1')
      copyFileSync(join(ARTIFACTS, 'status-routine.png'), join(ROOT, 'docs', 'status-routine.png'));

    await page.getByRole('button', { name: 'Resume' }).click();
    await expect.poll(() => page.locator('#action-result').textContent()).toBe('resume: resumed hello');
    expect(s.stdout()).toMatch(/\[http\] run hello: success/);
    expect(s.stdout()).toMatch(/\[http\] pause hello: paused \(until the vendor answers\)/);

    // Another origin: a page served elsewhere on this machine, which even knows the token, gets
    // nothing done: its fetch with the header needs a CORS answer the server never gives, a
    // "simple" POST (no header) is refused for want of the token, and a client that forges an
    // Origin is refused for it.
    const foreign = createServer((_req, res) =>
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end('<!doctype html><title>elsewhere</title><p>elsewhere</p>'),
    );
    await new Promise<void>((r) => foreign.listen(0, '127.0.0.1', () => r()));
    onTestFinished(
      () =>
        new Promise<void>((r) => {
          foreign.close(() => r());
          foreign.closeAllConnections();
        }),
    );
    const evil = await context.newPage();
    await evil.goto(`http://localhost:${(foreign.address() as AddressInfo).port}/`);
    const tried = await evil.evaluate(
      async ([target, token]) => {
        const out: string[] = [];
        try {
          const r = await fetch(`${target}api/routines/hello/run`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: '{}',
          });
          out.push(`cors: ${r.status}`);
        } catch (e) {
          out.push(`cors: ${(e as Error).name}`);
        }
        try {
          // reaches the server, which wants the token; its answer is withheld from the page too
          // (Cross-Origin-Resource-Policy: same-origin)
          await fetch(`${target}api/routines/hello/run`, { method: 'POST', mode: 'no-cors', body: '{}' });
          out.push('simple: answered');
        } catch (e) {
          out.push(`simple: ${(e as Error).name}`);
        }
        return out;
      },
      [url, TOKEN] as const,
    );
    expect(tried).toEqual(['cors: TypeError', 'simple: TypeError']);
    const forged = await httpGet(
      `${url}api/routines/hello/run`,
      { authorization: `Bearer ${TOKEN}`, origin: 'http://localhost:1' },
      'POST',
      '{}',
    );
    expect(forged.status).toBe(403);
    expect(await history()).toHaveLength(1);
    expect(problems).toEqual([]);

    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  }, 180_000);
});

describe('a run started from the HTTP server', () => {
  it("gets the shutdown timeout as the scheduler's own routines do: one that ends within it finishes and is recorded as it ended", async () => {
    const project = testProject({
      http: { actions: true },
      routines: [{ id: 'short', schedule: '0 0 1 1 *', action: 'command', run: 'sleep 1.5' }],
    });
    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0', '--shutdown-timeout', '30'], {
      cwd: project,
      env: { ROUTINELY_HTTP_TOKEN: TOKEN },
      timeoutMs: 60_000,
    });
    const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    expect(
      (await httpGet(`${url}api/routines/short/run`, { authorization: `Bearer ${TOKEN}` }, 'POST', '')).status,
    ).toBe(202);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    const [entry] = JSON.parse((await runCli(['routine', 'history', 'short', '--json'], { cwd: project })).stdout) as {
      result: string;
      trigger: string;
    }[];
    expect(entry).toMatchObject({ result: 'success', trigger: 'manual' });
  }, 90_000);

  it('never runs a routine without a lock beside itself: a second run, or a run while the scheduler fires it, is a 409 that says so', async () => {
    const project = testProject({
      http: { actions: true },
      routines: [
        { id: 'nx', schedule: '0 0 1 1 *', action: 'command', run: 'sleep 30', exclusive: false },
        { id: 'often', schedule: '* * * * * *', action: 'command', run: 'sleep 30', exclusive: false },
      ],
    });
    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0', '--shutdown-timeout', '1'], {
      cwd: project,
      env: { ROUTINELY_HTTP_TOKEN: TOKEN },
      timeoutMs: 60_000,
    });
    const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    const run = (id: string) =>
      httpGet(`${url}api/routines/${id}/run`, { authorization: `Bearer ${TOKEN}` }, 'POST', '');
    expect((await run('nx')).status).toBe(202);
    const second = await run('nx');
    expect(second.status).toBe(409);
    expect(JSON.parse(second.body)).toMatchObject({ state: 'busy', error: 'nx: previous run still running' });
    // the scheduler's own fire of `often` is going: a run from the page is refused the same way
    await s.waitFor(/\[routine\] started often/);
    const beside = await run('often');
    expect(beside.status).toBe(409);
    expect(JSON.parse(beside.body)).toMatchObject({ error: 'often: previous run still running' });
    await s.waitFor(/\[http\] run often: not run, often: previous run still running/);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    const history = JSON.parse(
      (await runCli(['routine', 'history', 'nx', '--json'], { cwd: project })).stdout,
    ) as Entry[];
    expect(history).toHaveLength(1);
  }, 90_000);

  it('that fails before it starts (its task files unreadable) is answered, not left hanging', async () => {
    const project = testProject({
      http: { actions: true },
      exec: { taskDirs: ['tasks'] },
      routines: [{ id: 'auto', schedule: '0 0 1 1 *', action: 'exec-auto' }],
    });
    mkdirSync(join(project, 'tasks'));
    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], {
      cwd: project,
      env: { ROUTINELY_HTTP_TOKEN: TOKEN },
      timeoutMs: 60_000,
    });
    const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    writeFileSync(join(project, 'tasks', 'bad.json'), '{ bad json');
    const r = await httpGet(`${url}api/routines/auto/run`, { authorization: `Bearer ${TOKEN}` }, 'POST', '');
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toMatchObject({ state: 'finished', result: 'failure', routine: 'auto' });
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  }, 90_000);

  it('is stopped and recorded when the scheduler stops past its shutdown timeout, before its lock is released', async () => {
    const project = testProject({
      http: { actions: true },
      routines: [{ id: 'long', schedule: '0 0 1 1 *', action: 'command', run: 'sleep 60' }],
    });
    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0', '--shutdown-timeout', '2'], {
      cwd: project,
      env: { ROUTINELY_HTTP_TOKEN: TOKEN },
      timeoutMs: 60_000,
    });
    const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    const r = await httpGet(`${url}api/routines/long/run`, { authorization: `Bearer ${TOKEN}` }, 'POST', '');
    expect(r.status).toBe(202);
    expect(JSON.parse(r.body)).toMatchObject({ state: 'started', routine: 'long' });
    s.child.kill('SIGTERM');
    // stopping: no run starts from here (one did, and was then stopped and recorded)
    await eventually(
      async () => (await httpGet(`${url}healthz`, { authorization: `Bearer ${TOKEN}` })).status === 503,
      10_000,
      '/healthz 503',
    );
    const late = await httpGet(`${url}api/routines/long/run`, { authorization: `Bearer ${TOKEN}` }, 'POST', '');
    expect([late.status, late.body]).toEqual([
      503,
      expect.stringMatching(/not started: routinely scheduler is stopping/),
    ]);
    expect((await s.exited).code).toBe(0);
    const [entry] = JSON.parse((await runCli(['routine', 'history', 'long', '--json'], { cwd: project })).stdout) as {
      result: string;
      reason: string;
      trigger: string;
    }[];
    expect(entry).toMatchObject({
      result: 'failure',
      trigger: 'manual',
      reason: expect.stringMatching(/stopped: routinely scheduler is stopping/),
    });
    expect(JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project })).stdout).state).toBe('free');
  }, 90_000);

  it('serve stopped while a run it started goes on: the run ends within the shutdown timeout and is recorded as it ended (it was stopped at once)', async () => {
    const project = testProject({
      http: { actions: true },
      routines: [
        { id: 'short', schedule: '0 0 1 1 *', action: 'command', run: 'sleep 2; echo done > done' },
        { id: 'other', schedule: '0 0 1 1 *', action: 'command', run: 'true', lock: 'other' },
      ],
    });
    const s = startCli(['serve', '--http', '127.0.0.1:0'], {
      cwd: project,
      env: { ROUTINELY_HTTP_TOKEN: TOKEN },
      timeoutMs: 60_000,
    });
    const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    const r = await httpGet(`${url}api/routines/short/run`, { authorization: `Bearer ${TOKEN}` }, 'POST', '');
    expect(JSON.parse(r.body)).toMatchObject({ state: 'started', routine: 'short' });
    s.child.kill('SIGTERM');
    // draining: /healthz says so, and no run starts from here (one did, and was cut off)
    await eventually(
      async () => (await httpGet(`${url}healthz`, { authorization: `Bearer ${TOKEN}` })).status === 503,
      10_000,
      '/healthz 503',
    );
    const late = await httpGet(`${url}api/routines/other/run`, { authorization: `Bearer ${TOKEN}` }, 'POST', '');
    expect(late.status).toBe(503);
    expect(late.body).toMatch(/not started: routinely serve is stopping/);
    s.child.kill('SIGTERM'); // a second signal while it drains changes nothing
    expect((await s.exited).code).toBe(0);
    expect(JSON.parse((await runCli(['routine', 'history', 'other', '--json'], { cwd: project })).stdout)).toEqual([]);
    const [entry] = JSON.parse((await runCli(['routine', 'history', 'short', '--json'], { cwd: project })).stdout) as {
      result: string;
      trigger: string;
    }[];
    expect(entry).toMatchObject({ result: 'success', trigger: 'manual' });
    expect(readFileSync(join(project, 'done'), 'utf8')).toBe('done\n');
  }, 90_000);
});
