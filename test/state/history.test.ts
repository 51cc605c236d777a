import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HISTORY_LIMIT, appendHistory, readHistory } from '../../src/state/history.js';
import type { Fire } from '../../src/state/routine-state.js';
import { testdir } from '../helpers/testdir.js';

const fire = (i: number): Fire => ({
  result: i % 3 === 0 ? 'skipped' : 'success', reason: i % 3 === 0 ? 'exec busy' : null,
  scheduled_at: new Date(Date.UTC(2026, 10, 29) + i * 1000).toISOString(), started_at: 'x', finished_at: 'x',
  duration_ms: 1, exit_code: 0, run_id: `r-${i}`.padEnd(200, '0'),
});

describe('history', () => {
  it('keeps one line per fire, the newest HISTORY_LIMIT, oldest first', () => {
    const path = join(testdir(), 'history', 'a.jsonl');
    for (let i = 0; i < 1700; i++) appendHistory(path, fire(i));
    const entries = readHistory(path);
    expect(entries.length).toBeGreaterThanOrEqual(HISTORY_LIMIT);
    expect(entries.length).toBeLessThan(1700);
    expect(entries.at(-1)?.run_id).toBe(fire(1699).run_id);
    const times = entries.map((e) => Date.parse(e.scheduled_at));
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    expect(Object.keys(entries[0]!).sort()).toEqual(['exit_code', 'finished_at', 'reason', 'result', 'run_id', 'scheduled_at', 'started_at']);
    expect(readFileSync(path, 'utf8').endsWith('\n')).toBe(true);
  });

  it('skips a torn last line', () => {
    const path = join(testdir(), 'a.jsonl');
    appendHistory(path, fire(1));
    appendFileSync(path, '{"scheduled_at":');
    expect(readHistory(path)).toHaveLength(1);
  });
});
