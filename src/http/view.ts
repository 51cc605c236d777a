// The status page's dynamic parts as HTML (SPEC §11), rendered by one function that runs twice:
// on the server for the first response, and in the browser (its source is inlined in the page,
// see page.ts) on every refresh from /api/*. One renderer, so the refreshed page can never drift
// from the served one. It must therefore stay self-contained: no imports, no references to
// anything outside its body but viewKit, humanDuration, zoneFormat and holderDoing, which the
// page inlines beside it
// (types are erased).
// Every string from state is HTML-escaped.
// (Over 300 lines: one self-contained renderer, which may not import helpers.)

import type { LockStatus } from '../lock/status.js';
import type { Health } from './health.js';
import type { FireView, LostFire, RecentResults, RoutineView, RunOutput, RunView, ServerInfo } from './sources.js';
import { humanDuration } from '../duration.js';
import { holderDoing } from '../lock/stale.js';
import { zoneFormat } from '../zone-time.js';

export interface StatusView extends ServerInfo {
  health: Health;
  scheduler_up: boolean;
  /** Server time of the reading (ISO): relative times are computed from it, not the browser's clock. */
  now: string;
}

export interface PageData {
  status: StatusView;
  routines: RoutineView[];
  recent: Record<string, RecentResults>;
  lock: LockStatus;
  runs: RunView[];
}

/** The page's four live regions, each the inner HTML of its container. */
export interface PageParts {
  status: string;
  routines: string;
  lock: string;
  runs: string;
}

/** A routine's page (`/routines/ID`): its row, its newest fires, one run's output. */
export interface DetailData {
  status: StatusView;
  routine: RoutineView;
  /** Newest first. */
  fires: FireView[];
  /** The output of the run asked for, else of the fire running now, else of the newest fire
   * that ran; null when none is logged. */
  output: RunOutput | null;
  /** Whether the server takes actions (the page shows its buttons). */
  actions: boolean;
  /** Which page of the kept history `fires` is (1: the newest), of how many. */
  page?: { number: number; pages: number; total: number; size: number };
  /** The newest fires that ran (success or failure), newest first: the durations chart. */
  ran?: FireView[];
  /** The fire running now, if any. */
  running?: { run_id: string | null; started_at: string } | null;
  /** Fires whose process is gone and that are not recorded yet (shown above the newest). */
  lost?: LostFire[];
}

export interface DetailParts {
  status: string;
  summary: string;
  fires: string;
  output: string;
  pager: string;
}

/** The pieces every view is made of: escaping, spans of time, times with their absolute form
 * on hover, badges and result glyphs. Self-contained like the renderers (see above). */
export function viewKit(nowMs: number) {
  const esc = (v: unknown): string =>
    String(v ?? '')
      .replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c)
      // control characters from records are shown, not interpreted (SPEC §12)
      .replace(
        /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g,
        (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
      );
  const span = humanDuration;
  const ms = (iso: string | null | undefined): number | null => {
    const t = iso ? Date.parse(iso) : NaN;
    return Number.isFinite(t) ? t : null;
  };
  // one formatter per zone and render: making one costs far more than using it (≈ 3 000 times
  // per page with 100 routines)
  const formats = new Map<string, Intl.DateTimeFormat | null>();
  const absolute = (t: number, zone?: string | null): string => {
    const z = zone ?? 'UTC';
    if (!formats.has(z)) {
      try {
        formats.set(z, zoneFormat('sv-SE', z, false));
      } catch {
        formats.set(z, null);
      }
    }
    const f = formats.get(z);
    return f ? `${f.format(new Date(t))} ${z}` : new Date(t).toISOString();
  };
  const time = (t: number, text: string, zone?: string | null): string =>
    `<time datetime="${esc(new Date(t).toISOString())}" title="${esc(absolute(t, zone))}">${esc(text)}</time>`;
  const ago = (iso: string | null | undefined): string => {
    const t = ms(iso);
    if (t === null) return '<span class="muted">never</span>';
    // a time ahead of this clock (recorded before it was stepped back) is said so, not "0s ago"
    return time(t, t > nowMs + 1000 ? `${span(t - nowMs)} in the future` : `${span(nowMs - t)} ago`);
  };
  const badge = (kind: string, text: string): string => `<span class="badge b-${kind}">${esc(text)}</span>`;
  const RESULTS: Record<string, { letter: string; word: string }> = {
    success: { letter: '✓', word: 'ok' }, // not 'O', which reads like a zero
    failure: { letter: 'F', word: 'failed' },
    skipped: { letter: 'S', word: 'skipped' },
  };
  const resultOf = (r: string | null | undefined): { key: string; letter: string; word: string } =>
    r && RESULTS[r] ? { key: r, ...RESULTS[r]! } : { key: 'unknown', letter: '?', word: String(r ?? 'unknown') };

  /** `serve` watching a project whose scheduler is not running: no run will start on time. */
  const unscheduled = (s: StatusView): boolean => s.mode === 'serve' && !s.scheduler_up;
  /** The health line and what runs, of the server's status reading. */
  const statusLine = (s: StatusView): string => {
    // a host that only watches, with no scheduler running: nothing fires, whatever this
    // server's own health — never green (SPEC §11)
    if (unscheduled(s)) {
      return (
        `<p class="health bad">${badge('failure', 'NO SCHEDULER')} ` +
        `${esc(`Watching only (pid ${s.pid} on ${s.host}): no scheduler is running for this project, so nothing fires; the times below are when routines would fire`)}` +
        `${s.health.ok ? '' : ` · ${esc(`unhealthy: ${s.health.reason}`)}`}</p>` +
        `<p class="muted">Project <strong>${esc(s.project)}</strong> · ${esc(s.backend)} backend · updated ${time(nowMs, absolute(nowMs).slice(11))}</p>`
      );
    }
    const healthText = s.health.ok ? 'healthy' : `unhealthy: ${s.health.reason}`;
    const who =
      s.mode === 'scheduler'
        ? `Scheduler pid ${s.pid} on ${s.host}`
        : `Watching only (pid ${s.pid} on ${s.host}); a scheduler is running`;
    return (
      `<p class="health ${s.health.ok ? 'ok' : 'bad'}">${badge(s.health.ok ? 'success' : 'failure', s.health.ok ? 'OK' : 'NOT OK')} ` +
      `${esc(who)} · ${esc(healthText)}</p>` +
      `<p class="muted">Project <strong>${esc(s.project)}</strong> · ${esc(s.backend)} backend · updated ${time(nowMs, absolute(nowMs).slice(11))}</p>`
    );
  };
  /** A fire before it runs, as routine list says it: held back (jitter, a retry's back-off),
   * queued behind a routine, or waiting for its lock (with who holds it on hover). */
  const phaseBadge = (r: RoutineView): string => {
    const w = r.waiting_for;
    const since = ms(r.phase_since ?? null);
    const long = since === null ? '' : ` ${span(Math.max(0, nowMs - since))}`;
    if (!w) return '';
    if ('behind' in w) return badge('queued', `queued${long} behind ${w.behind}`);
    if ('until' in w) {
      const left = span(Math.max(0, Date.parse(w.until) - nowMs));
      return badge(
        'queued',
        w.why === 'jitter' ? `jitter: fires in ${left}` : `retry ${w.attempt} of ${w.of} in ${left}`,
      );
    }
    return `<span class="badge b-waiting" title="${esc(`held by ${w.holder}`)}">${esc(`waiting${long}: ${w.lock} busy`)}</span>`;
  };
  return { esc, span, ms, absolute, time, ago, badge, phaseBadge, resultOf, statusLine, unscheduled, nowMs };
}

export function renderParts(d: PageData, nowMs: number): PageParts {
  const { esc, span, ms, absolute, time, ago, badge, phaseBadge, resultOf, statusLine, unscheduled } = viewKit(nowMs);

  const status = statusLine(d.status);
  // --- routines -------------------------------------------------------------------------------
  const holder = d.lock.state === 'held' && d.lock.record ? d.lock.record : null;
  const rows = d.routines.map((r) => {
    // (an id may be `constructor`: the map's own entry only; this file runs in the browser alone)
    const recent = Object.prototype.hasOwnProperty.call(d.recent, r.id) ? d.recent[r.id] : undefined;
    const results = recent?.results ?? [];
    const counted = { success: 0, failure: 0, skipped: 0, unknown: 0 } as Record<string, number>;
    const strip = results
      .map((e) => {
        const k = resultOf(e.result);
        counted[k.key] = (counted[k.key] ?? 0) + 1;
        const at = ms(e.finished_at) ?? ms(e.scheduled_at);
        const title = `${k.word}${e.reason ? `: ${e.reason}` : ''}${at !== null ? ` · ${absolute(at)}` : ''}`;
        return `<li class="r r-${esc(k.key)}" title="${esc(title)}">${esc(k.letter)}</li>`;
      })
      .join('');
    const newest = results.length ? resultOf(results[results.length - 1]!.result).word : null;
    const summary = results.length
      ? `Last ${results.length} results, oldest first: ${counted.success} ok, ${counted.failure} failed, ${counted.skipped} skipped; newest ${newest}.`
      : 'No results yet.';
    const last = r.last_result ? resultOf(r.last_result) : null;
    const lastText = last
      ? `${badge(last.key, last.key === 'failure' && r.consecutive_failures > 1 ? `${last.word} ×${r.consecutive_failures}` : last.word)}${r.last_reason ? ` <span class="reason">${esc(r.last_reason)}</span>` : ''}`
      : '<span class="muted">never ran</span>';
    const next = ms(r.next_run_at);
    const nextText = r.removed
      ? '<span class="muted">none: not in the config</span>'
      : !r.enabled
        ? '<span class="muted">disabled</span>'
        : r.paused
          ? '<span class="muted">paused</span>'
          : next === null
            ? '<span class="muted">none</span>'
            : unscheduled(d.status)
              ? `<span class="muted">none: no scheduler runs</span><span class="sub">would be ${time(next, absolute(next, r.timezone), r.timezone)}</span>`
              : `${time(next, next >= nowMs ? `in ${span(next - nowMs)}` : `due ${span(nowMs - next)} ago`, r.timezone)}<span class="sub">${esc(absolute(next, r.timezone))}</span>`;
    // a skip is a tick, not a run: the last run is the last success or failure, and its duration
    // is shown only when the last record is that run; a skip after it is told apart
    const ranAt = Math.max(ms(r.last_success_at) ?? -Infinity, ms(r.last_failure_at) ?? -Infinity);
    const took =
      r.last_result !== 'skipped' && typeof r.last_duration_ms === 'number'
        ? `<span class="sub">took ${esc(span(r.last_duration_ms))}</span>`
        : '';
    const skippedAt = r.last_result === 'skipped' ? ms(r.last_finished_at) : null;
    const lastRun =
      `${ago(Number.isFinite(ranAt) ? new Date(ranAt).toISOString() : null)}${took}` +
      (skippedAt !== null
        ? `<span class="sub">last tick skipped ${esc(span(Math.max(0, nowMs - skippedAt)))} ago</span>`
        : '');
    const skips = typeof r.consecutive_skips === 'number' ? r.consecutive_skips : (recent?.trailing_skips ?? 0);
    const states: string[] = [];
    // running: it holds the exec lock, or (another lock, or none) a fire of it is open
    const runningSince =
      holder && holder.owner.routine === r.id ? holder.created_at * 1000 : ms(r.running_since ?? null);
    if (runningSince !== null) states.push(badge('running', `running ${span(Math.max(0, nowMs - runningSince))}`));
    else if (r.waiting_for) states.push(phaseBadge(r));
    if (r.removed) states.push(badge('muted', 'removed from the config'));
    else if (!r.enabled) states.push(badge('muted', 'disabled'));
    if (r.paused) states.push(badge('paused', r.paused_note ? `paused: ${r.paused_note}` : 'paused'));
    // failing until a run succeeds, whatever skips came after (SPEC §6)
    const failures = typeof r.consecutive_failures === 'number' ? r.consecutive_failures : 0;
    if (failures > 0)
      states.push(
        badge(
          'failure',
          `failing${failures > 1 ? ` ×${failures}` : ''}${r.last_result === 'skipped' && skips > 0 ? ` (then ${skips} skip${skips === 1 ? '' : 's'})` : ''}`,
        ),
      );
    if (r.starved === true) states.push(badge('starved', `starved (${skips} skips in a row)`));
    else if (skips > 0 && failures === 0)
      states.push(badge('skipped', `${skips} skip${skips === 1 ? '' : 's'} in a row`));
    return (
      `<tr role="row"><th scope="row" role="rowheader"><a class="id" href="/routines/${esc(r.id)}">${esc(r.id)}</a>` +
      (r.removed
        ? '<span class="sub">not in the config; a fire of it runs on</span></th>'
        : `<span class="sub"><code>${esc(r.schedule)}</code>${r.timezone ? ` ${esc(r.timezone)}` : ''} · ${esc(r.action)}${r.lock && r.lock !== 'exec' ? ` · ${r.lock === 'none' ? 'no lock' : `lock ${esc(r.lock)}`}` : ''}</span></th>`) +
      `<td role="cell" data-label="Last 30 results"><span class="visually-hidden">${esc(summary)}</span>` +
      `<ol class="strip" aria-hidden="true">${strip}</ol></td>` +
      `<td role="cell" data-label="Last result">${lastText}</td>` +
      `<td role="cell" data-label="Next run">${nextText}</td>` +
      `<td role="cell" data-label="Last run">${lastRun}</td>` +
      `<td role="cell" data-label="State">${states.join(' ') || '<span class="muted">idle</span>'}</td>` +
      `<td role="cell" data-label="OK / failed / skipped" class="num">${r.counts.success} / ${r.counts.failure} / ${r.counts.skipped}</td></tr>`
    );
  });
  const routines =
    rows.join('') || '<tr role="row"><td role="cell" colspan="7" class="muted">No routines in the config.</td></tr>';

  // --- the exec lock --------------------------------------------------------------------------
  const l = d.lock;
  const item = (k: string, v: string): string => `<div><dt>${esc(k)}</dt><dd>${v}</dd></div>`;
  const lockItems: string[] = [
    item('State', badge(l.state === 'held' ? 'running' : l.state === 'stale' ? 'failure' : 'success', l.state)),
  ];
  if (l.record) {
    const o = l.record.owner;
    lockItems.push(item('Holder', `pid ${esc(o.pid)} on ${esc(o.host)}`));
    lockItems.push(item('Doing', esc(holderDoing(o))));
    lockItems.push(
      item('Since', time(l.record.created_at * 1000, `${span(Math.max(0, nowMs - l.record.created_at * 1000))} ago`)),
    );
    if (typeof l.heartbeat_age_s === 'number')
      lockItems.push(item('Heartbeat', `${esc(span(l.heartbeat_age_s * 1000))} ago`));
    if (typeof l.expires_in_s === 'number')
      lockItems.push(
        item(
          'Expires',
          l.expires_in_s >= 0 ? `in ${esc(span(l.expires_in_s * 1000))}` : `${esc(span(-l.expires_in_s * 1000))} ago`,
        ),
      );
  }
  if (l.state === 'stale' && l.why) lockItems.push(item('Why stale', esc(l.why)));
  lockItems.push(item('Generation', esc(l.generation)));
  const lock = lockItems.join('');

  // --- recent exec runs -----------------------------------------------------------------------
  const STATUS_KIND: Record<string, string> = {
    SUCCEEDED: 'success',
    FAILED: 'failure',
    ABORTED: 'failure',
    INTERRUPTED: 'skipped',
    RUNNING: 'running',
  };
  const runRows = d.runs.slice(0, 10).map((r) => {
    if (r.status === 'UNREADABLE' || !('summary' in r)) {
      return (
        `<tr role="row"><th scope="row" role="rowheader"><code>${esc(r.run_id)}</code></th>` +
        `<td role="cell" data-label="Status">${badge('failure', 'UNREADABLE')}</td>` +
        `<td role="cell" data-label="Started"><span class="muted">–</span></td><td role="cell" data-label="Tasks" class="num">–</td>` +
        `<td role="cell" data-label="By"><span class="muted">–</span></td><td role="cell" data-label="Why">${esc(r.why)}</td></tr>`
      );
    }
    const started = ms(r.created_at);
    const finished = ms(r.finished_at);
    const took =
      started !== null && finished !== null ? span(finished - started) : r.status === 'RUNNING' ? 'running' : '–';
    const why = r.why_code ? `<code>${esc(r.why_code)}</code> ${esc(r.why ?? '')}` : '<span class="muted">–</span>';
    return (
      `<tr role="row"><th scope="row" role="rowheader"><code>${esc(r.run_id)}</code></th>` +
      `<td role="cell" data-label="Status">${badge(STATUS_KIND[r.status] ?? 'muted', r.status)}</td>` +
      `<td role="cell" data-label="Started">${ago(r.created_at)}<span class="sub">took ${esc(took)}</span></td>` +
      `<td role="cell" data-label="Tasks" class="num">${r.summary.succeeded}/${r.summary.total} succeeded</td>` +
      `<td role="cell" data-label="By">${esc(r.command)}${r.routine ? ` <span class="sub">routine ${esc(r.routine)}</span>` : ''}</td>` +
      `<td role="cell" data-label="Why">${why}</td></tr>`
    );
  });
  const runs =
    runRows.join('') || '<tr role="row"><td role="cell" colspan="6" class="muted">No exec runs yet.</td></tr>';

  return { status, routines, lock, runs };
}

export function renderDetail(d: DetailData, nowMs: number): DetailParts {
  const { esc, span, ms, absolute, ago, badge, phaseBadge, resultOf, statusLine, unscheduled } = viewKit(nowMs);
  const r = d.routine;
  const item = (k: string, v: string): string => `<div><dt>${esc(k)}</dt><dd>${v}</dd></div>`;
  const next = ms(r.next_run_at);
  const state = r.removed
    ? badge('muted', 'removed from the config')
    : !r.enabled
      ? badge('muted', 'disabled')
      : r.paused
        ? badge('paused', r.paused_note ? `paused: ${r.paused_note}` : 'paused')
        : unscheduled(d.status)
          ? badge('failure', 'no scheduler')
          : badge('success', 'scheduled');
  const failing =
    r.consecutive_failures > 0
      ? ` ${badge('failure', `failing${r.consecutive_failures > 1 ? ` ×${r.consecutive_failures}` : ''}`)}`
      : '';
  const starved = r.starved === true ? ` ${badge('starved', 'starved')}` : '';
  const phase = !d.running && r.waiting_for ? ` ${phaseBadge(r)}` : '';
  const summary =
    [
      item(
        'Schedule',
        r.removed
          ? '<span class="muted">none: not in the config</span>'
          : `<code>${esc(r.schedule)}</code>${r.timezone ? ` ${esc(r.timezone)}` : ''}`,
      ),
      item('Action', r.removed ? '<span class="muted">-</span>' : esc(r.action)),
      item('State', `${state}${failing}${starved}${phase}`),
      item(
        'Next run',
        !r.enabled || r.paused || next === null
          ? '<span class="muted">none</span>'
          : unscheduled(d.status)
            ? `<span class="muted">none: no scheduler runs (would be ${esc(absolute(next, r.timezone))})</span>`
            : `${esc(absolute(next, r.timezone))}`,
      ),
      item('Last success', ago(r.last_success_at)),
      item('Last failure', ago(r.last_failure_at)),
      item('OK / failed / skipped', `${r.counts.success} / ${r.counts.failure} / ${r.counts.skipped}`),
      ...(d.running
        ? [
            item(
              'Running now',
              `since ${ago(d.running.started_at)}${d.running.run_id ? ` · run <code>${esc(d.running.run_id)}</code>` : ''}`,
            ),
          ]
        : []),
    ].join('') + durationsChart(d.ran ?? []);

  /** The durations of the newest fires that ran, oldest left: an inline SVG (nothing loaded),
   * one bar per fire, its height the time it took against the longest shown, its colour and a
   * letter-free title by result; with a text summary for screen readers. */
  /** A fire recorded by a reconcile after its process died (`interrupted: pid … ended before the
   * outcome was recorded`, as state/routine-state.ts writes it). */
  function lostWithProcess(f: FireView): boolean {
    return f.result === 'failure' && typeof f.reason === 'string' && f.reason.startsWith('interrupted: ');
  }

  function durationsChart(ran: FireView[]): string {
    const bars = ran
      .slice(0, 30)
      .reverse()
      .map((f) => ({ f, took: Math.max(0, (ms(f.finished_at) ?? 0) - (ms(f.started_at) ?? 0)) }));
    if (bars.length === 0) return '';
    const longest = Math.max(...bars.map((b) => b.took), 1);
    const W = 8;
    const H = 48;
    const rects = bars
      .map((b, i) => {
        const h = Math.max(2, Math.round((b.took / longest) * H));
        const k = resultOf(b.f.result).key;
        return `<rect class="bar bar-${esc(k)}" x="${i * (W + 2)}" y="${H - h}" width="${W}" height="${h}"><title>${esc(`${resultOf(b.f.result).word} in ${span(b.took)} · ${absolute(ms(b.f.scheduled_at) ?? 0, r.timezone)}`)}</title></rect>`;
      })
      .join('');
    const sorted = bars.map((b) => b.took).sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)]!;
    const text = `Durations of the last ${bars.length} fires that ran, oldest first: median ${span(median)}, longest ${span(longest)}.`;
    return (
      `<div><dt>Durations</dt><dd><svg class="chart" role="img" aria-label="${esc(text)}" width="${bars.length * (W + 2)}" height="${H}" viewBox="0 0 ${bars.length * (W + 2)} ${H}">${rects}</svg>` +
      `<span class="sub">median ${esc(span(median))} · longest ${esc(span(longest))} · last ${bars.length} that ran</span></dd></div>`
    );
  }

  const TRIGGER: Record<string, string> = { schedule: 'schedule', manual: 'by hand', retry: 'retry' };
  const rows = d.fires.map((f) => {
    const k = resultOf(f.result);
    const scheduled = ms(f.scheduled_at);
    const started = ms(f.started_at);
    const finished = ms(f.finished_at);
    // a skip never ran: no lateness, no duration; a fire lost with its process ran for a time
    // nobody knows (its record's times are its start)
    const ran = f.result !== 'skipped' && started !== null;
    const late = ran && scheduled !== null ? Math.max(0, started - scheduled) : null;
    const took = ran && finished !== null && !lostWithProcess(f) ? finished - started : null;
    const trigger = `${esc(TRIGGER[f.trigger ?? 'schedule'] ?? f.trigger)}${f.by ? ` (${esc(f.by)})` : ''}${f.attempt ? `, attempt ${esc(f.attempt)}` : ''}`;
    const run = f.run_id
      ? ran
        ? `<a href="/routines/${esc(r.id)}?run=${esc(f.run_id)}#output"><code>${esc(f.run_id)}</code></a>`
        : `<code>${esc(f.run_id)}</code>`
      : '<span class="muted">–</span>';
    return (
      `<tr role="row"><th scope="row" role="rowheader">${scheduled !== null ? `<time datetime="${esc(new Date(scheduled).toISOString())}">${esc(absolute(scheduled, r.timezone))}</time>` : esc(f.scheduled_at)}</th>` +
      `<td role="cell" data-label="Result"><span class="r r-${esc(k.key)}" aria-hidden="true">${esc(k.letter)}</span> ${esc(k.word)}${f.exit_code !== null && f.exit_code !== undefined && f.result === 'failure' ? ` (exit ${esc(f.exit_code)})` : ''}</td>` +
      `<td role="cell" data-label="Reason">${f.reason ? esc(f.reason) : '<span class="muted">–</span>'}</td>` +
      `<td role="cell" data-label="Started late" class="num">${late === null ? '<span class="muted">–</span>' : esc(span(late))}</td>` +
      `<td role="cell" data-label="Took" class="num">${took === null ? '<span class="muted">–</span>' : esc(span(took))}</td>` +
      `<td role="cell" data-label="Trigger">${trigger}</td>` +
      `<td role="cell" data-label="Run">${run}</td></tr>`
    );
  });
  // as `routine history ID` says them: newer than every record, so on the first page only
  const lost = (d.page?.number ?? 1) === 1 ? (d.lost ?? []) : [];
  const notes = lost.map(
    (l) =>
      `<tr role="row"><td role="cell" colspan="7" class="muted">${esc(`A fire of ${l.started_at} is not recorded yet: pid ${l.pid} on ${l.host}, which ran it, is gone; the next scheduler or routine run records it as interrupted.`)}</td></tr>`,
  );
  const fires =
    notes.join('') +
    (rows.join('') ||
      (notes.length > 0
        ? ''
        : '<tr role="row"><td role="cell" colspan="7" class="muted">No fires recorded yet.</td></tr>'));

  const o = d.output;
  const live = o !== null && d.running?.run_id === o.run_id;
  const output = o
    ? `<p class="muted">Run <code>${esc(o.run_id)}</code>${live ? ` <strong>is running</strong>: its output so far, growing as the page refreshes` : ''}${o.cut_lines ? ` · its last ${esc(o.lines)} lines; <code>routinely routine logs ${esc(r.id)} --run ${esc(o.run_id)}</code> shows all` : ''}</p>` +
      o.notices.map((n) => `<p class="muted">${esc(n)}</p>`).join('') +
      `<pre class="output" tabindex="0" aria-label="Output of run ${esc(o.run_id)}">${esc(o.text)}</pre>`
    : '<p class="muted">No output logged for this routine yet.</p>';
  // the kept history, a page at a time (newest first): links that work without JavaScript too
  const pg = d.page;
  const link = (n: number, text: string): string =>
    `<a href="/routines/${esc(r.id)}?page=${n}#fires-title">${esc(text)}</a>`;
  const pager =
    pg && pg.pages > 1
      ? `<nav aria-label="Pages of fires" class="pager">${pg.number > 1 ? link(pg.number - 1, '← Newer fires') : ''} ` +
        `<span class="muted">fires ${(pg.number - 1) * pg.size + 1}–${Math.min(pg.total, pg.number * pg.size)} of ${pg.total} kept (page ${pg.number} of ${pg.pages})</span> ` +
        `${pg.number < pg.pages ? link(pg.number + 1, 'Older fires →') : ''}</nav>`
      : pg
        ? `<p class="muted">${pg.total} fire${pg.total === 1 ? '' : 's'} kept.</p>`
        : '';
  return { status: statusLine(d.status), summary, fires, output, pager };
}
