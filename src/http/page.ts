// The status page `GET /` (SPEC §11): one server-rendered HTML document with its style and a
// small script inline (no build step, nothing from another host; the Content-Security-Policy
// allows exactly these two by hash), refreshing its four live parts from /api/* every 5 s with
// the same renderer the server used (view.ts). Landmarks, table headers with scope, a skip link
// and a button to pause the refresh make it usable by keyboard and screen reader.

import { createHash } from 'node:crypto';
import { PAGE_STYLE } from './page-style.js';
import { renderParts, type PageData } from './view.js';

export const REFRESH_MS = 5000;

/** The browser side: fetch, render, swap; say so when a refresh fails; pause on request. */
const PAGE_SCRIPT = `"use strict";
(() => {
  const renderParts = ${renderParts.toString()};
  const parts = ['status', 'routines', 'lock', 'runs'];
  const notice = document.getElementById('notice');
  const button = document.getElementById('pause');
  const refreshing = document.getElementById('refreshing');
  // the controls exist only where they work: without JavaScript the page is a snapshot
  for (const el of document.querySelectorAll('.js-only')) el.hidden = false;
  let paused = false;
  let busy = false;
  let lastGood = Date.now();
  const esc = (t) => String(t).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
  const get = async (path) => {
    const res = await fetch(path, { headers: { accept: 'application/json' }, cache: 'no-store', credentials: 'same-origin' });
    if (!res.ok) throw new Error(path + ' answered ' + res.status);
    return res.json();
  };
  const refresh = async () => {
    if (paused || busy) return;
    busy = true;
    try {
      const [status, routines, recent, lock, runs] = await Promise.all(['/api/status', '/api/routines', '/api/history', '/api/lock', '/api/runs'].map(get));
      const html = renderParts({ status, routines, recent, lock, runs }, Date.parse(status.now));
      for (const id of parts) {
        const el = document.getElementById(id);
        if (el && el.innerHTML !== html[id]) el.innerHTML = html[id];
      }
      document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
      lastGood = Date.now();
      if (notice.textContent) notice.textContent = '';
    } catch (err) {
      notice.textContent = 'Refresh failed (' + err.message + '); showing older data, retrying.';
      // a scheduler that stopped, or a server that does not answer: its last word was "healthy",
      // which is no longer known
      const status = document.getElementById('status');
      const since = new Date(lastGood).toISOString().slice(11, 19);
      if (status) status.innerHTML = '<p class="health unknown"><span class="badge b-muted">UNKNOWN</span> No answer since ' + esc(since) + ' UTC (' + esc(err.message) + '); the rest of the page shows the data of then.</p>';
    } finally {
      busy = false;
    }
  };
  button.addEventListener('click', () => {
    paused = !paused;
    button.setAttribute('aria-pressed', String(paused));
    button.textContent = paused ? 'Resume auto-refresh' : 'Pause auto-refresh';
    refreshing.textContent = paused ? 'Paused: the data stays as it is.' : 'Refreshes every ${REFRESH_MS / 1000} s.';
    if (!paused) void refresh();
  });
  setInterval(refresh, ${REFRESH_MS});
})();
`;

if (PAGE_SCRIPT.includes('</script') || PAGE_STYLE.includes('</style')) throw new Error('the inline page script or style would end its element early');

const sha256 = (s: string): string => `'sha256-${createHash('sha256').update(s).digest('base64')}'`;

/** Only the inline style and script of this page run; fetches go to this server only. */
export const PAGE_CSP = [
  "default-src 'none'",
  `script-src ${sha256(PAGE_SCRIPT)}`,
  `style-src ${sha256(PAGE_STYLE)}`,
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** The page shell's one string from state (the project name), escaped as view.ts escapes. */
const escText = (s: string): string =>
  s
    .replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c)
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);

export function renderPage(data: PageData, nowMs: number): string {
  const p = renderParts(data, nowMs);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escText(data.status.project)} · routinely status</title>
<style>${PAGE_STYLE}</style>
</head>
<body>
<a class="visually-hidden" href="#routines-title" id="skip">Skip to routines</a>
<header>
<div class="wrap">
<h1>routinely · ${escText(data.status.project)}</h1>
<nav aria-label="Sections"><ul>
<li><a href="#routines-title">Routines</a></li><li><a href="#lock-title">Exec lock</a></li><li><a href="#runs-title">Exec runs</a></li><li><a href="/metrics">Metrics</a></li>
</ul></nav>
</div>
</header>
<main class="wrap">
<section aria-label="Scheduler status"><div id="status">${p.status}</div>
<div class="controls"><span class="js-only" hidden><button type="button" id="pause" aria-pressed="false" aria-controls="status routines lock runs">Pause auto-refresh</button>
<span class="muted" id="refreshing">Refreshes every ${REFRESH_MS / 1000} s.</span></span>
<p id="notice" role="status"></p></div>
</section>
<section aria-labelledby="routines-title">
<h2 id="routines-title" tabindex="-1">Routines</h2>
<ul class="legend" aria-label="Result strip legend">
<li><span class="r r-success" aria-hidden="true">✓</span> ✓: ok</li>
<li><span class="r r-failure" aria-hidden="true">F</span> F: failed</li>
<li><span class="r r-skipped" aria-hidden="true">S</span> S: skipped (exec busy or previous run still going)</li>
<li>oldest first, newest last</li>
</ul>
<div class="table-wrap" tabindex="0" role="region" aria-label="Routines table, scrolls sideways">
<table role="table" aria-labelledby="routines-title">
<thead role="rowgroup"><tr role="row">
<th scope="col" role="columnheader">Routine</th><th scope="col" role="columnheader">Last 30 results</th><th scope="col" role="columnheader">Last result</th>
<th scope="col" role="columnheader">Next run</th><th scope="col" role="columnheader">Last run</th><th scope="col" role="columnheader">State</th>
<th scope="col" role="columnheader">OK / failed / skipped</th>
</tr></thead>
<tbody id="routines" role="rowgroup">${p.routines}</tbody>
</table>
</div>
</section>
<section aria-labelledby="lock-title">
<h2 id="lock-title" tabindex="-1">Exec lock</h2>
<dl class="lock" id="lock">${p.lock}</dl>
</section>
<section aria-labelledby="runs-title">
<h2 id="runs-title" tabindex="-1">Recent exec runs</h2>
<div class="table-wrap" tabindex="0" role="region" aria-label="Exec runs table, scrolls sideways">
<table role="table" aria-labelledby="runs-title">
<thead role="rowgroup"><tr role="row">
<th scope="col" role="columnheader">Run</th><th scope="col" role="columnheader">Status</th><th scope="col" role="columnheader">Started</th>
<th scope="col" role="columnheader">Tasks</th><th scope="col" role="columnheader">By</th><th scope="col" role="columnheader">Why</th>
</tr></thead>
<tbody id="runs" role="rowgroup">${p.runs}</tbody>
</table>
</div>
</section>
</main>
<footer class="wrap">routinely · read-only · <a href="/metrics">/metrics</a> · <a href="/healthz">/healthz</a> · <a href="/api/routines">/api/routines</a> · <a href="/api/lock">/api/lock</a> · <a href="/api/runs">/api/runs</a></footer>
<script>${PAGE_SCRIPT}</script>
</body>
</html>
`;
}
