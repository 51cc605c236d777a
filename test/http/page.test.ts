// The status page (SPEC §11): rows, strip letters, lock holder, runs; every string escaped; one
// renderer for the server and the browser; an inline script and style allowed by hash only.

import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { PAGE_CSP, renderPage } from '../../src/http/page.js';
import { INLINED } from '../../src/http/page-script.js';
import { renderDetail, renderParts, viewKit, type DetailData, type PageData } from '../../src/http/view.js';
import { NOW, heldLock, pageData, row, run } from './fixtures.js';

describe('renderParts', () => {
  it('a skip is never shown as a run: the last run is the last success or failure, the skip a tick apart', () => {
    const p = renderParts(
      pageData({
        routines: [
          row({
            last_result: 'skipped',
            last_reason: 'exec busy',
            last_finished_at: new Date(NOW - 33_000).toISOString(),
            last_duration_ms: 0,
            last_success_at: new Date(NOW - 3_600_000).toISOString(),
            last_failure_at: null,
          }),
        ],
      }),
      NOW,
    );
    expect(p.routines).not.toContain('took 0.0s');
    expect(p.routines).toMatch(/1h0m ago|60m ago|1h ago/);
    expect(p.routines).toContain('last tick skipped 33s ago');
  });

  it('a row per routine with its strip (letter and class per result), state and counts', () => {
    const p = renderParts(
      pageData({
        routines: [
          row(),
          row({
            id: 'nightly',
            schedule: '0 3 * * *',
            timezone: 'Europe/Berlin',
            next_run_at: '2026-11-30T02:00:00.000Z',
            last_result: null,
            last_finished_at: null,
          }),
        ],
      }),
      NOW,
    );
    expect(p.routines.match(/<tr role="row">/g)).toHaveLength(2);
    // the name opens the routine's page
    expect(p.routines).toContain('<th scope="row" role="rowheader"><a class="id" href="/routines/tick">tick</a>');
    expect(p.routines).toContain(
      '<li class="r r-success" title="ok · 2026-11-29 19:00:27 UTC">✓</li><li class="r r-failure" title="failed: exit code 3 · 2026-11-29 19:00:28 UTC">F</li><li class="r r-skipped" title="skipped: exec busy · 2026-11-29 19:00:29 UTC">S</li>',
    );
    expect(p.routines).toContain('Last 3 results, oldest first: 1 ok, 1 failed, 1 skipped; newest skipped.');
    expect(p.routines).toContain('running 12s'); // the exec lock is held for routine tick
    expect(p.routines).toContain('1 skip in a row');
    expect(p.routines).toContain('3 / 1 / 2');
    expect(p.routines).toContain('2026-11-30 03:00:00 Europe/Berlin'); // next run in the routine's zone
    expect(p.routines).toContain('never ran');
  });

  it('serve watching a project with no scheduler running: no green, no countdown to runs nobody starts; with one running, as usual', () => {
    const watching = (up: boolean): PageData => {
      const d = pageData({ routines: [row({ next_run_at: new Date(NOW + 9_100).toISOString() })] });
      return { ...d, status: { ...d.status, mode: 'serve', scheduler_up: up } };
    };
    const idle = renderParts(watching(false), NOW);
    expect(idle.status).toContain('<span class="badge b-failure">NO SCHEDULER</span>');
    expect(idle.status).toContain('no scheduler is running for this project, so nothing fires');
    expect(idle.status).not.toContain('b-success');
    expect(idle.status).not.toContain('healthy');
    expect(idle.routines).toMatch(
      /data-label="Next run"><span class="muted">none: no scheduler runs<\/span><span class="sub">would be <time [^>]*>2026-11-29 19:00:39/,
    );
    expect(idle.routines).not.toMatch(/in 9\.1s|in 9s/);
    const idleData = watching(false);
    const idleDetail: DetailData = {
      status: idleData.status,
      routine: idleData.routines[0]!,
      actions: false,
      fires: [],
      output: null,
      page: { number: 1, pages: 1, total: 0, size: 50 },
      ran: [],
      running: null,
    };
    const detail = renderDetail(idleDetail, NOW);
    expect(detail.summary).toContain('<span class="badge b-failure">no scheduler</span>');
    expect(detail.summary).toContain('none: no scheduler runs (would be 2026-11-29 19:00:39');
    const seen = renderParts(watching(true), NOW);
    expect(seen.status).toContain('<span class="badge b-success">OK</span>');
    expect(seen.status).toContain('a scheduler is running');
    expect(seen.routines).toMatch(/in 9\.1s|in 9s/);
  });

  it('the page without JavaScript says it is a snapshot and when it was taken; the script takes that away', () => {
    const html = renderPage(pageData(), NOW);
    expect(html).toContain(
      '<p id="snapshot" class="notice">A snapshot taken at <time datetime="2026-11-29T19:00:30.000Z">2026-11-29 19:00:30 UTC</time>: without JavaScript this page does not refresh itself',
    );
    expect(html.indexOf('id="snapshot"')).toBeLessThan(html.indexOf('id="status"'));
  });

  it('paused, disabled, starved (when the row says so), repeated failures', () => {
    const p = renderParts(
      pageData({
        routines: [
          row({ id: 'p', paused: true, paused_note: 'deploy freeze' }),
          row({ id: 'd', enabled: false, next_run_at: null }),
          row({ id: 's', starved: true, consecutive_skips: 4 }),
          row({ id: 'f', last_result: 'failure', consecutive_failures: 3, last_reason: 'exit code 2' }),
        ],
      }),
      NOW,
    );
    expect(p.routines).toContain('paused: deploy freeze');
    expect(p.routines).toMatch(/data-label="Next run"><span class="muted">disabled/);
    expect(p.routines).toContain('starved (4 skips in a row)');
    expect(p.routines).toContain('failed ×3</span> <span class="reason">exit code 2</span>');
  });

  it('the lock holder with heartbeat age; free and stale locks', () => {
    const held = renderParts(pageData(), NOW).lock;
    expect(held).toContain('<dd>pid 4711 on build-01</dd>');
    expect(held).toContain('<dd>routine tick, run r-20261129T190018Z-ab12</dd>');
    expect(held).toContain('<dt>Heartbeat</dt><dd>1.5s ago</dd>');
    expect(held).toContain('<dt>Expires</dt><dd>in 59s</dd>');
    const free = renderParts(
      pageData({ lock: { ...heldLock(), state: 'free', record: null, heartbeat_age_s: null, expires_in_s: null } }),
      NOW,
    ).lock;
    expect(free).toContain('free');
    expect(free).not.toContain('Holder');
    const stale = renderParts(
      pageData({ lock: { ...heldLock(), state: 'stale', why: 'owner pid 4711 is dead' } }),
      NOW,
    ).lock;
    expect(stale).toContain('<dt>Why stale</dt><dd>owner pid 4711 is dead</dd>');
  });

  it('recent exec runs with status and why', () => {
    const p = renderParts(
      pageData({
        runs: [
          run(),
          run({
            run_id: 'r-20261129T185900Z-0001',
            status: 'SUCCEEDED',
            why_code: undefined,
            why: undefined,
            routine: 'auto',
          }),
        ],
      }),
      NOW,
    );
    expect(p.runs).toContain('<code>TASK_FAILED</code> 1 of 2 tasks failed: test (exit 1)');
    expect(p.runs).toContain('1/2 succeeded');
    expect(p.runs).toContain('routine auto');
    expect(renderParts(pageData({ runs: [] }), NOW).runs).toContain('No exec runs yet.');
    const unreadable = renderParts(
      pageData({ runs: [{ run_id: 'r-20261129T185800Z-dead', status: 'UNREADABLE', why: 'run.json is corrupt <x>' }] }),
      NOW,
    ).runs;
    expect(unreadable).toContain('UNREADABLE');
    expect(unreadable).toContain('run.json is corrupt &lt;x&gt;');
  });

  it('escapes every string from state, and control characters', () => {
    const evil = '<img src=x onerror=alert(1)>"\'&\u0007';
    const d: PageData = pageData({
      routines: [row({ paused: true, paused_note: evil, last_reason: evil, last_result: 'failure' })],
      recent: {
        tick: {
          results: [{ result: '<b>' as never, scheduled_at: evil, finished_at: evil, reason: evil, run_id: null }],
          trailing_skips: 0,
        },
      },
      lock: heldLock({
        record: {
          ...heldLock().record!,
          owner: { ...heldLock().record!.owner, host: evil, command: evil, routine: evil },
        },
      }),
      runs: [run({ why: evil, command: evil, run_id: evil })],
    });
    d.status.project = evil;
    const html = renderPage(d, NOW);
    expect(html).not.toContain('<img');
    expect(html).not.toContain('<b>');
    expect(html).not.toContain('\u0007');
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;\\x07');
    expect(html).toContain('class="r r-unknown"');
  });

  it('is self-contained: its source and the kit alone render the same in a fresh scope (the browser runs them)', () => {
    // the renderers call the helpers the page's script inlines (INLINED) under their names; under
    // vitest an import is spelled __vite_ssr_import_N__.name: each such object gets the helpers
    const sources = [viewKit, renderParts, renderDetail].map(String).join('\n');
    const names = INLINED.map((f) => f.name);
    const imports = [...new Set(sources.match(/__vite_ssr_import_\d+__/g) ?? [])]
      .map((n) => `const ${n} = { ${names.join(', ')} };`)
      .join(' ');
    const helpers = INLINED.map((f) => `const ${f.name} = ${f.toString()};`).join(' ');
    const kit = `${helpers} ${imports} const ${viewKit.name} = ${viewKit.toString()};`;
    const outside = new RegExp(`__vite_ssr_import_\\d+__\\.(${names.join('|')})\\b`, 'g');
    expect(sources.replace(outside, '')).not.toMatch(/__vite_ssr_import/);
    const fresh = new Function(`${kit} return (${renderParts.toString()})`)() as typeof renderParts;
    expect(fresh(pageData(), NOW)).toEqual(renderParts(pageData(), NOW));
    const d = pageData();
    const fire = (i: number, result: 'success' | 'failure' | 'skipped', took: number) => ({
      scheduled_at: new Date(NOW - i * 60_000).toISOString(),
      started_at: new Date(NOW - i * 60_000).toISOString(),
      finished_at: new Date(NOW - i * 60_000 + took).toISOString(),
      result,
      reason: null,
      exit_code: result === 'failure' ? 1 : 0,
      run_id: result === 'skipped' ? null : `r-${i}`,
      trigger: 'manual' as const,
      by: 'http, 127.0.0.1',
    });
    const detail: DetailData = {
      status: d.status,
      routine: d.routines[0]!,
      actions: true,
      fires: [fire(1, 'success', 1200), fire(2, 'skipped', 0), fire(3, 'failure', 300)],
      output: {
        run_id: 'r-1',
        text: 'hello <b>\n',
        lines: 200,
        cut_lines: false,
        notices: ['a run shown here printed more than retention.runLogBytes'],
      },
      page: { number: 2, pages: 3, total: 130, size: 50 },
      ran: [fire(1, 'success', 1200), fire(3, 'failure', 300)],
      running: { run_id: 'r-1', started_at: new Date(NOW - 5000).toISOString() },
    };
    const freshDetail = new Function(`${kit} return (${renderDetail.toString()})`)() as typeof renderDetail;
    expect(freshDetail(detail, NOW)).toEqual(renderDetail(detail, NOW));
    expect(renderDetail(detail, NOW).output).toContain('hello &lt;b&gt;');
    const p = renderDetail(detail, NOW);
    // the kept history a page at a time, by links that work without JavaScript
    expect(p.pager).toContain('<a href="/routines/tick?page=1#fires-title">← Newer fires</a>');
    expect(p.pager).toContain('fires 51–100 of 130 kept (page 2 of 3)');
    expect(p.pager).toContain('<a href="/routines/tick?page=3#fires-title">Older fires →</a>');
    // a chart of the durations of the fires that ran, oldest left, with words for a screen reader
    expect(p.summary.match(/<rect class="bar bar-(success|failure)"/g)).toEqual([
      '<rect class="bar bar-failure"',
      '<rect class="bar bar-success"',
    ]);
    expect(p.summary).toContain(
      'aria-label="Durations of the last 2 fires that ran, oldest first: median 1.2s, longest 1.2s."',
    );
    // the running fire's output, as it grows; who started each manual fire
    expect(p.output).toContain('<strong>is running</strong>: its output so far');
    expect(p.summary).toContain('Running now');
    expect(p.fires).toContain('by hand (http, 127.0.0.1)');
    // a fire lost with its process ran for a time nobody knows: no duration (not "0.0s")
    const lost = {
      ...fire(4, 'failure', 0),
      reason: 'interrupted: pid 7 on h ended before the outcome was recorded',
    };
    const withLost = renderDetail({ ...detail, fires: [lost] }, NOW).fires;
    expect(withLost).toContain('data-label="Took" class="num"><span class="muted">–</span>');
  });
});

describe('renderPage', () => {
  it('landmarks, headers with scope, a labelled table; inline script and style allowed by their hashes', () => {
    const html = renderPage(pageData(), NOW);
    expect(html).toMatch(/<html lang="en">/);
    for (const tag of ['<header>', '<main class="wrap">', '<nav aria-label="Sections">', '<footer'])
      expect(html).toContain(tag);
    expect(html.match(/<th scope="col"/g)!.length).toBe(13);
    expect(html).toContain('<table role="table" aria-labelledby="routines-title">');
    const script = /<script>([\s\S]*?)<\/script>/.exec(html)![1]!;
    const style = /<style>([\s\S]*?)<\/style>/.exec(html)![1]!;
    const hash = (s: string): string => createHash('sha256').update(s).digest('base64');
    expect(PAGE_CSP).toContain(`script-src 'sha256-${hash(script)}'`);
    expect(PAGE_CSP).toContain(`style-src 'sha256-${hash(style)}'`);
    expect(PAGE_CSP).toContain("default-src 'none'");
    expect(PAGE_CSP).toContain("connect-src 'self'");
    // nothing from another host
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
  });
});

describe('the page without JavaScript', () => {
  it('shows no control that would do nothing: the refresh button and its text are hidden until the script shows them', () => {
    const html = renderPage(pageData(), NOW);
    expect(html).toMatch(/<span class="js-only" hidden><button type="button" id="pause"/);
    expect(html).toMatch(/<span class="muted" id="refreshing">Refreshes every 5 s\.<\/span><\/span>/);
  });
});
