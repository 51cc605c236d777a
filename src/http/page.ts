// The status pages (SPEC §11): `GET /` (every routine) and `GET /routines/ID` (one routine's
// fires and the output of a run), each one server-rendered HTML document with its style and one
// small script inline (no build step, nothing from another host; the Content-Security-Policy
// allows exactly these two by hash). The script refreshes the live parts from /api/* every 5 s
// with the renderers the server used (view.ts), sends the token when the server asks for one
// (pasted once, kept in sessionStorage, sent as a header: never a cookie), and carries out the
// actions when the server takes them. Landmarks, table headers with scope, a skip link and a
// button to pause the refresh make it usable by keyboard and screen reader.

import { createHash } from 'node:crypto';
import { PAGE_STYLE } from './page-style.js';
import { PAGE_SCRIPT, REFRESH_MS } from './page-script.js';
import { renderDetail, renderParts, viewKit, type DetailData, type PageData } from './view.js';

if (PAGE_SCRIPT.includes('</script') || PAGE_STYLE.includes('</style'))
  throw new Error('the inline page script or style would end its element early');

const sha256 = (s: string): string => `'sha256-${createHash('sha256').update(s).digest('base64')}'`;

/** Only the inline style and script of these pages run; fetches go to this server only. */
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

const { esc } = viewKit(0);

interface Frame {
  title: string;
  /** The project's name, or null in a shell (no data was read). */
  project: string | null;
  routine: string | null;
  /** Served without data to a request without the token: the script fetches it with the token. */
  shell: boolean;
  /** Whether the server asks for a token (the page then offers the field). */
  tokenRequired: boolean;
  status: string;
  main: string;
  skipTo: string;
  /** When the data was read (a shell has none): said without JavaScript, which never
   * refreshes the page (SPEC §11: the snapshot says when it was taken). */
  takenAt: number | null;
}

function frame(f: Frame): string {
  const attrs = `${f.routine ? ` data-routine="${esc(f.routine)}"` : ''}${f.shell ? ' data-shell="1"' : ''}`;
  const tokenForm = f.tokenRequired
    ? `<form id="token-form" class="token" hidden><p id="token-says" role="status"></p>` +
      `<label for="token">Token of this server (ROUTINELY_HTTP_TOKEN)</label> <input id="token" type="password" autocomplete="off" spellcheck="false" size="34"> ` +
      `<button type="submit">Use it</button> <span class="muted">kept in this tab only, sent as a header</span></form>`
    : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${esc(f.title)}</title>
<style>${PAGE_STYLE}</style>
</head>
<body${attrs}>
<a class="visually-hidden" href="#${f.skipTo}" id="skip">Skip to ${f.skipTo === 'routines-title' ? 'routines' : 'fires'}</a>
<header>
<div class="wrap">
<h1>routinely${f.project !== null ? ` · ${esc(f.project)}` : ''}</h1>
<nav aria-label="Sections"><ul>
<li><a href="/#routines-title">Routines</a></li><li><a href="/#lock-title">Exec lock</a></li><li><a href="/#runs-title">Exec runs</a></li><li><a href="/metrics">Metrics</a></li>
</ul></nav>
</div>
</header>
<main class="wrap">
<section aria-label="Scheduler status">${f.takenAt !== null ? `<p id="snapshot" class="notice">A snapshot taken at <time datetime="${new Date(f.takenAt).toISOString()}">${new Date(f.takenAt).toISOString().replace('T', ' ').slice(0, 19)} UTC</time>: without JavaScript this page does not refresh itself, and its times and states are those of then. Reload it to see them now.</p>` : ''}<div id="status">${f.status}</div>
<div class="controls"><span class="js-only" hidden><button type="button" id="pause" aria-pressed="false" aria-controls="status">Pause auto-refresh</button>
<span class="muted" id="refreshing">Refreshes every ${REFRESH_MS / 1000} s.</span></span>
<p id="notice" role="status"></p></div>
${tokenForm}
</section>
${f.main}
</main>
<footer class="wrap">routinely · <a href="/metrics">/metrics</a> · <a href="/healthz">/healthz</a> · <a href="/api/routines">/api/routines</a> · <a href="/api/lock">/api/lock</a> · <a href="/api/runs">/api/runs</a></footer>
<script>${PAGE_SCRIPT}</script>
</body>
</html>
`;
}

const SHELL_TEXT =
  '<p class="health unknown"><span class="badge b-muted">TOKEN</span> This server asks for its token before it shows anything. ' +
  'The page sends it from its script; without JavaScript, ask the API with <code>curl -H "Authorization: Bearer $ROUTINELY_HTTP_TOKEN"</code>.</p>';

function mainSections(p: { routines: string; lock: string; runs: string }): string {
  return `<section aria-labelledby="routines-title">
<h2 id="routines-title" tabindex="-1">Routines</h2>
<ul class="legend" aria-label="Result strip legend">
<li><span class="r r-success" aria-hidden="true">✓</span> ✓: ok</li>
<li><span class="r r-failure" aria-hidden="true">F</span> F: failed</li>
<li><span class="r r-skipped" aria-hidden="true">S</span> S: skipped (its lock busy, or its previous run still going)</li>
<li>oldest first, newest last; a routine's name opens its fires and output</li>
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
</section>`;
}

/** `GET /`: every routine, the exec lock, recent exec runs. */
export function renderPage(data: PageData, nowMs: number, o: { tokenRequired?: boolean } = {}): string {
  const p = renderParts(data, nowMs);
  return frame({
    title: `${data.status.project} · routinely status`,
    project: data.status.project,
    routine: null,
    shell: false,
    tokenRequired: o.tokenRequired === true,
    status: p.status,
    main: mainSections(p),
    skipTo: 'routines-title',
    takenAt: nowMs,
  });
}

function routineSections(
  id: string,
  p: { summary: string; fires: string; output: string; pager: string },
  actions: boolean,
  stoppable = true,
): string {
  const buttons = actions
    ? `<section aria-labelledby="actions-title" class="js-only" hidden>
<h2 id="actions-title">Actions</h2>
<div class="controls"><button type="button" data-action="run">Run now</button>
<label for="pause-note">Pause note</label> <input id="pause-note" type="text" maxlength="500" size="30">
<button type="button" data-action="pause">Pause</button> <button type="button" data-action="resume">Resume</button>${stoppable ? ' <button type="button" data-action="stop">Stop the running fire</button>' : ''}</div>
<p id="action-result" role="status"></p>
<p class="muted">As <code>routinely routine run ${esc(id)}</code>, <code>pause</code>, <code>resume</code>${stoppable ? ' and <code>stop</code>' : ''} do: the routine's own busy rule, the same records${stoppable ? " (a stop: SIGTERM to the fire's process group, SIGKILL after 10 s, recorded as stopped by hand from this address)" : ''}.</p>
</section>`
    : '';
  return `<section aria-labelledby="routine-title">
<h2 id="routine-title">Routine ${esc(id)}</h2>
<dl class="lock" id="summary">${p.summary}</dl>
</section>
${buttons}
<section aria-labelledby="fires-title">
<h2 id="fires-title" tabindex="-1">Recent fires</h2>
<div class="table-wrap" tabindex="0" role="region" aria-label="Fires table, scrolls sideways">
<table role="table" aria-labelledby="fires-title">
<thead role="rowgroup"><tr role="row">
<th scope="col" role="columnheader">Scheduled</th><th scope="col" role="columnheader">Result</th><th scope="col" role="columnheader">Reason</th>
<th scope="col" role="columnheader">Started late</th><th scope="col" role="columnheader">Took</th><th scope="col" role="columnheader">Trigger</th>
<th scope="col" role="columnheader">Run</th>
</tr></thead>
<tbody id="fires" role="rowgroup">${p.fires}</tbody>
</table>
</div>
<div id="pager">${p.pager}</div>
</section>
<section aria-labelledby="output-title">
<h2 id="output-title">Output</h2>
<div id="output">${p.output}</div>
</section>`;
}

/** `GET /routines/ID`: one routine, its newest fires, one run's output. */
export function renderRoutinePage(data: DetailData, nowMs: number, o: { tokenRequired?: boolean } = {}): string {
  const p = renderDetail(data, nowMs);
  return frame({
    title: `${data.routine.id} · ${data.status.project} · routinely`,
    project: data.status.project,
    routine: data.routine.id,
    shell: false,
    tokenRequired: o.tokenRequired === true,
    status: p.status,
    // (a routine the config no longer has, listed while a fire of it runs on: its fire can be stopped)
    main: routineSections(
      data.routine.id,
      p,
      data.actions,
      data.routine.action === 'command' || data.routine.removed === true,
    ),
    skipTo: 'fires-title',
    takenAt: nowMs,
  });
}

/** Either page without data, for a request without the token: the script asks for the token
 * and fetches the data with it. A routine's page offers its buttons only if `actions`. */
export function renderShell(routine: string | null, actions: boolean): string {
  const empty = '<tr role="row"><td role="cell" class="muted">Needs the token.</td></tr>';
  const main = routine
    ? routineSections(routine, { summary: '', fires: empty, output: '', pager: '' }, actions)
    : mainSections({ routines: empty, lock: '', runs: empty });
  return frame({
    title: 'routinely status',
    project: null,
    routine,
    shell: true,
    tokenRequired: true,
    status: SHELL_TEXT,
    main,
    skipTo: routine ? 'fires-title' : 'routines-title',
    takenAt: null,
  });
}
