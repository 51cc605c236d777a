// `routine history`'s reader from the end of the history files (state/recent-fires.ts):
// whatever the histories hold, it shows exactly what reading them whole and sorting shows.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadProject } from '../../src/config/load.js';
import { readFires } from '../../src/state/file-store.js';
import { newestFires, recentFiresInFiles } from '../../src/state/recent-fires.js';
import type { FireQuery } from '../../src/state/store.js';
import type { HistoryEntry } from '../../src/state/history.js';
import { rng } from '../helpers/rng.js';
import { testdir, testProject } from '../helpers/testdir.js';

const RESULTS = ['success', 'failure', 'skipped'] as const;
const byTime = (x: HistoryEntry, y: HistoryEntry): number =>
  Date.parse(x.scheduled_at) - Date.parse(y.scheduled_at) || Date.parse(x.started_at) - Date.parse(y.started_at);

/** A history as writers leave it: lines in the order fires finished (so a long fire is written
 * after shorter ones scheduled later), now and then a record sent twice, a torn line, a pause,
 * an open marker; the older part rotated into `.1`. */
function writeHistory(dir: string, id: string, random: () => number, n: number, t0: number): void {
  const lines: string[] = [];
  let clock = t0;
  for (let k = 0; k < n; k++) {
    clock += Math.floor(random() * 120_000);
    const took = random() < 0.1 ? Math.floor(random() * 900_000) : Math.floor(random() * 5000);
    const scheduled = clock - took - Math.floor(random() * 2000);
    const iso = (ms: number): string => new Date(ms).toISOString();
    const entry = {
      scheduled_at: iso(scheduled),
      started_at: iso(scheduled + 5),
      finished_at: iso(clock),
      result: RESULTS[Math.floor(random() * 3)],
      reason: null,
      exit_code: 0,
      run_id: null,
      trigger: 'schedule',
      id: `${id}-${k}`,
      ...(random() < 0.3 ? { closes: `c-${id}-${k}` } : {}),
    };
    // its open marker, written when it started: mostly just before its record, now and then a
    // few lines further up (a long fire), or rotated away
    if (entry.closes && random() < 0.9) {
      const open = JSON.stringify({
        event: 'open',
        id: entry.closes,
        scheduled_at: entry.scheduled_at,
        started_at: entry.started_at,
        run_id: null,
        trigger: 'schedule',
        owner: { pid: 4242, host: 'h', boot_id: null, start_time: null },
      });
      lines.splice(Math.max(0, lines.length - Math.floor(random() * random() * 6)), 0, open);
    }
    lines.push(JSON.stringify(entry));
    if (random() < 0.05) lines.push(JSON.stringify({ ...entry, id: `${id}-${k}-again` })); // sent again: one fire
    if (random() < 0.03) lines.push('{"scheduled_at": "torn');
    if (random() < 0.03) lines.push(JSON.stringify({ event: 'paused', at: iso(clock), note: null, id: `${id}-p${k}` }));
    // another fire at the very same times (ties keep the files' order)
    if (random() < 0.04)
      lines.push(
        JSON.stringify({
          ...entry,
          id: `${id}-${k}-tie`,
          closes: undefined,
          result: RESULTS[Math.floor(random() * 3)],
        }),
      );
    // a record retried through a full disk: an old fire, appended now, saying when
    if (random() < 0.05) {
      const old = clock - 120_000 - Math.floor(random() * 7_200_000);
      lines.push(
        JSON.stringify({
          ...entry,
          scheduled_at: iso(old - 1000),
          started_at: iso(old - 995),
          finished_at: iso(old),
          recorded_at: iso(clock),
          id: `${id}-${k}-late`,
          closes: undefined,
        }),
      );
    }
    // a second record of an earlier fire (two reconciles, or the owner's after a reconcile): the first counts
    if (random() < 0.03 && k > 0)
      lines.push(
        JSON.stringify({
          ...entry,
          result: 'failure',
          reason: 'interrupted',
          id: `${id}-${k}-second`,
          closes: `c-${id}-${k - 1}`,
        }),
      );
    // a date nobody can read
    if (random() < 0.02)
      lines.push(JSON.stringify({ ...entry, scheduled_at: 'yesterday-ish', id: `${id}-${k}-bad`, closes: undefined }));
  }
  const cut = Math.floor(lines.length * random());
  mkdirSync(join(dir, '.routinely', 'history'), { recursive: true, mode: 0o700 });
  writeFileSync(
    join(dir, '.routinely', 'history', `${id}.jsonl.1`),
    lines
      .slice(0, cut)
      .map((l) => `${l}\n`)
      .join(''),
    { mode: 0o600 },
  );
  writeFileSync(
    join(dir, '.routinely', 'history', `${id}.jsonl`),
    lines
      .slice(cut)
      .map((l) => `${l}\n`)
      .join(''),
    { mode: 0o600 },
  );
}

describe('the newest fires, read from the end', () => {
  it('equal what reading every history whole shows, for 300 random projects and queries (fixed seed)', () => {
    const random = rng(20261201);
    let compared = 0; // rounds whose expected answer has fires in it
    for (let round = 0; round < 300; round++) {
      const historyLines = 1 + Math.floor(random() * 80);
      const dir = testProject({ retention: { historyLines } });
      const project = loadProject({ cwd: dir });
      const ids = Array.from({ length: 1 + Math.floor(random() * 8) }, (_, i) => `r${i}`);
      const t0 = Date.UTC(2026, 10, 1);
      for (const id of ids) writeHistory(dir, id, random, Math.floor(random() * 120), t0);
      const span = 120 * 120_000;
      const pick = (): number => t0 + Math.floor(random() * span);
      const [a, b] = [pick(), pick()].sort((x, y) => x - y);
      const q: FireQuery = {
        limit: random() < 0.2 ? Infinity : 1 + Math.floor(random() * (random() < 0.5 ? 5 : 30)),
        since: random() < 0.5 ? -Infinity : a!,
        until: random() < 0.5 ? Infinity : b!,
        ...(random() < 0.3 ? { result: RESULTS[Math.floor(random() * 3)] } : {}),
      };
      const whole = ids
        .flatMap((routine) => readFires(project, routine).map((e) => ({ routine, ...e })))
        .filter(
          (e) =>
            Date.parse(e.scheduled_at) >= q.since &&
            Date.parse(e.scheduled_at) < q.until &&
            (q.result === undefined || e.result === q.result),
        )
        .sort(byTime);
      const expected = Number.isFinite(q.limit) ? whole.slice(-q.limit) : whole;
      // a fire sent twice is one entry either way; which copy's line id it carries is bookkeeping
      // (never shown: `routine history` drops it)
      const noId = (list: (HistoryEntry & { routine: string })[]) => list.map(({ id: _id, ...e }) => e);
      const shown = recentFiresInFiles(project.stateDir, ids, q, historyLines, () => {});
      expect(noId(shown), `round ${round}: ${JSON.stringify(q)}, historyLines ${historyLines}`).toEqual(noId(expected));
      if (expected.length > 0) compared++;
    }
    expect(compared, 'rounds that compared a non-empty answer').toBeGreaterThanOrEqual(200);
  });

  it('a second record of a fire, at the bound of the fires kept: the first counts, and the bound holds', () => {
    const dir = testdir();
    mkdirSync(join(dir, 'history'), { recursive: true });
    const at = (m: number): string => new Date(Date.UTC(2026, 0, 1, 0, m)).toISOString();
    const owner = { pid: 4242, host: 'h', boot_id: null, start_time: null };
    const fire = (m: number, closes: string, result: string, id: string) =>
      JSON.stringify({
        scheduled_at: at(m),
        started_at: at(m),
        finished_at: at(m),
        result,
        reason: null,
        exit_code: 0,
        run_id: null,
        closes,
        id,
      });
    writeFileSync(
      join(dir, 'history', 'r.jsonl'),
      `${[
        JSON.stringify({ event: 'open', id: 'a', scheduled_at: at(1), started_at: at(1), run_id: null, owner }),
        fire(1, 'a', 'success', 'l1'),
        JSON.stringify({ event: 'open', id: 'b', scheduled_at: at(2), started_at: at(2), run_id: null, owner }),
        fire(2, 'b', 'success', 'l2'),
        fire(1, 'a', 'failure', 'l3'), // a reconcile that read stale state: not a fire of its own
      ].join('\n')}\n`,
    );
    const q = { limit: 10, since: -Infinity, until: Infinity };
    expect(newestFires(dir, 'r', q, 2).map((e) => e.id)).toEqual(['l1', 'l2']);
    expect(newestFires(dir, 'r', { ...q, result: 'failure' }, 2)).toEqual([]);
    // kept: the newest one fire — b's; the second record of a (read first, from the end) is none
    expect(newestFires(dir, 'r', q, 1).map((e) => e.id)).toEqual(['l2']);
    expect(newestFires(dir, 'r', { ...q, result: 'failure' }, 1)).toEqual([]);
  });

  it('stops early: the newest of a long history is found without reading it all', () => {
    const dir = testdir();
    const t0 = Date.UTC(2026, 0, 1);
    const lines = Array.from({ length: 5000 }, (_, k) => {
      const at = new Date(t0 + k * 60_000).toISOString();
      return JSON.stringify({
        scheduled_at: at,
        started_at: at,
        finished_at: at,
        result: 'success',
        reason: null,
        exit_code: 0,
        run_id: null,
        id: `i${k}`,
      });
    });
    mkdirSync(join(dir, 'history'), { recursive: true });
    // a torn line far back: seen only by a reader that goes that far
    lines[100] = '{"torn';
    writeFileSync(join(dir, 'history', 'r.jsonl'), `${lines.join('\n')}\n`);
    const warnings: string[] = [];
    const newest = newestFires(dir, 'r', { limit: 3, since: -Infinity, until: Infinity }, 10_000, (m) =>
      warnings.push(m),
    );
    expect(newest.map((e) => e.id)).toEqual(['i4997', 'i4998', 'i4999']);
    expect(warnings).toEqual([]);
    newestFires(dir, 'r', { limit: 3, since: -Infinity, until: Infinity, result: 'failure' }, 10_000, (m) =>
      warnings.push(m),
    );
    // a reader that gets that far reads the file whole, and names the line (SPEC §3)
    expect(warnings).toEqual([
      expect.stringMatching(/r\.jsonl: line 101 could not be read \(torn or corrupt\) and was skipped$/),
    ]);
  });
});
