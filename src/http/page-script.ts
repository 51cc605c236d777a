// The status pages' one script (SPEC §11), inlined in both pages and allowed by its hash
// (page.ts): it refreshes the live parts from /api/* every REFRESH_MS with the renderers the
// server used (view.ts, whose source it carries), sends the token when the server asks for one
// (pasted once, kept in sessionStorage, sent as a header: never a cookie), and carries out the
// actions of a routine's page.

import { humanDuration } from '../duration.js';
import { holderDoing } from '../lock/stale.js';
import { zoneFormat } from '../zone-time.js';
import { renderDetail, renderParts, viewKit } from './view.js';

export const REFRESH_MS = 5000;
/** Where the page keeps the pasted token: this tab only, gone when it closes. */
const TOKEN_KEY = 'routinely-token';

/** The self-contained helpers the renderers call, inlined before them under their own names. */
export const INLINED = [humanDuration, zoneFormat, holderDoing];

/** The browser side: fetch, render, swap; the token; the actions; say so when a refresh fails. */
export const PAGE_SCRIPT = `"use strict";
(() => {
  ${INLINED.map((f) => `const ${f.name} = ${f.toString()};`).join('\n  ')}
  const ${viewKit.name} = ${viewKit.toString()};
  const renderParts = ${renderParts.toString()};
  const renderDetail = ${renderDetail.toString()};
  const body = document.body;
  const routine = body.dataset.routine || null;
  const parts = routine ? ['status', 'summary', 'fires', 'output', 'pager'] : ['status', 'routines', 'lock', 'runs'];
  const notice = document.getElementById('notice');
  const button = document.getElementById('pause');
  const refreshing = document.getElementById('refreshing');
  const form = document.getElementById('token-form');
  const field = document.getElementById('token');
  const tokenSays = document.getElementById('token-says');
  // the controls exist only where they work: without JavaScript the page is a snapshot
  for (const el of document.querySelectorAll('.js-only')) el.hidden = false;
  // the page refreshes itself from here on: it is no snapshot
  const snapshot = document.getElementById('snapshot');
  if (snapshot) snapshot.remove();
  let paused = false;
  let busy = false;
  let lastGood = Date.now();
  let token = sessionStorage.getItem('${TOKEN_KEY}');
  // the one HTML escaper: the views' own (control characters shown, not interpreted)
  const { esc } = ${viewKit.name}(Date.now());
  const headers = (extra) => Object.assign({ accept: 'application/json' }, token ? { authorization: 'Bearer ' + token } : {}, extra || {});
  const askToken = (why) => {
    if (!form) return;
    form.hidden = false;
    tokenSays.textContent = why;
  };
  const get = async (path) => {
    const res = await fetch(path, { headers: headers(), cache: 'no-store', credentials: 'omit' });
    if (res.status === 401) {
      askToken(token ? 'The server refused this token; paste the right one.' : 'This server asks for its token.');
      throw new Error('the token is ' + (token ? 'wrong' : 'missing'));
    }
    if (!res.ok) throw new Error(path + ' answered ' + res.status);
    return res.json();
  };
  // the run and the page of fires this page shows (checked by the server)
  const shown = new URLSearchParams(location.search);
  const query = ['run', 'page'].filter((k) => shown.get(k)).map((k) => k + '=' + encodeURIComponent(shown.get(k))).join('&');
  const read = async () => {
    if (routine) {
      const [status, detail] = await Promise.all([get('/api/status'), get('/api/routines/' + encodeURIComponent(routine) + (query ? '?' + query : ''))]);
      return [status, renderDetail(Object.assign({ status }, detail), Date.parse(status.now))];
    }
    const [status, routines, recent, lock, runs] = await Promise.all(['/api/status', '/api/routines', '/api/history', '/api/lock', '/api/runs'].map(get));
    return [status, renderParts({ status, routines, recent, lock, runs }, Date.parse(status.now))];
  };
  const refresh = async (force) => {
    if ((paused && !force) || busy) return;
    busy = true;
    try {
      const [status, html] = await read();
      // a page served without data learns the project's name with its first data
      const title = 'routinely · ' + status.project;
      const h1 = document.querySelector('h1');
      if (h1 && h1.textContent !== title) h1.textContent = title;
      for (const id of parts) {
        const el = document.getElementById(id);
        if (el && el.innerHTML !== html[id]) el.innerHTML = html[id];
      }
      body.dataset.refreshes = String(Number(body.dataset.refreshes || 0) + 1);
      lastGood = Date.now();
      if (notice.textContent) notice.textContent = '';
      if (body.dataset.shell) delete body.dataset.shell;
    } catch (err) {
      notice.textContent = 'Refresh failed (' + err.message + ')' + (body.dataset.shell ? '.' : '; showing older data, retrying.');
      // a scheduler that stopped, or a server that does not answer: its last word was "healthy",
      // which is no longer known
      const status = document.getElementById('status');
      const since = new Date(lastGood).toISOString().slice(11, 19);
      if (status && !body.dataset.shell) status.innerHTML = '<p class="health unknown"><span class="badge b-muted">UNKNOWN</span> No answer since ' + esc(since) + ' UTC (' + esc(err.message) + '); the rest of the page shows the data of then.</p>';
    } finally {
      busy = false;
    }
  };
  if (form) {
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const t = field.value.trim();
      field.value = '';
      if (!t) return;
      token = t;
      sessionStorage.setItem('${TOKEN_KEY}', t);
      form.hidden = true;
      void refresh(true);
    });
  }
  if (body.dataset.shell) {
    if (token) void refresh(true);
    else askToken('This server asks for its token.');
  }
  button.addEventListener('click', () => {
    paused = !paused;
    button.setAttribute('aria-pressed', String(paused));
    button.textContent = paused ? 'Resume auto-refresh' : 'Pause auto-refresh';
    refreshing.textContent = paused ? 'Paused: the data stays as it is.' : 'Refreshes every ${REFRESH_MS / 1000} s.';
    if (!paused) void refresh();
  });
  // the actions of a routine's page: POST with the token as a header, never a cookie
  const said = document.getElementById('action-result');
  const act = async (what, payload) => {
    if (!token) {
      askToken('The actions need the token of this server.');
      return;
    }
    said.textContent = what + ': sending…';
    try {
      const res = await fetch('/api/routines/' + encodeURIComponent(routine) + '/' + what, {
        method: 'POST', headers: headers({ 'content-type': 'application/json' }), body: JSON.stringify(payload || {}), cache: 'no-store', credentials: 'omit',
      });
      const answer = await res.json().catch(() => ({}));
      if (res.status === 401) askToken('The server refused this token; paste the right one.');
      said.textContent = what + ': ' + (answer.message || answer.error || res.status);
    } catch (err) {
      said.textContent = what + ' failed: ' + err.message;
    }
    void refresh(true);
  };
  for (const b of document.querySelectorAll('[data-action]')) {
    b.addEventListener('click', () => {
      const what = b.dataset.action;
      const note = document.getElementById('pause-note');
      void act(what, what === 'pause' && note && note.value.trim() ? { note: note.value.trim() } : {});
    });
  }
  setInterval(() => void refresh(), ${REFRESH_MS});
})();
`;
