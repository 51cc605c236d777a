// Run ids (src/run-id.ts): the one pattern every reader checks (exec runs, routine logs, the
// HTTP run filter, stop requests).

import { describe, expect, it } from 'vitest';
import { isRunId, newRunId, RUN_ID_MAX } from '../src/run-id.js';

describe('run ids', () => {
  it('what newRunId makes is a run id; a path, an empty tail or one past RUN_ID_MAX is not', () => {
    const id = newRunId(Date.parse('2026-11-29T19:00:00Z'), '7f3a');
    expect(id).toBe('r-20261129T190000Z-7f3a');
    expect(isRunId(id)).toBe(true);
    for (const bad of [
      '',
      'r-',
      'r-../x',
      'r-a/b',
      'x-20261129T190000Z-7f3a',
      `r-${'a'.repeat(RUN_ID_MAX - 1)}`,
      'r-a\u0000',
    ])
      expect(isRunId(bad), JSON.stringify(bad)).toBe(false);
    expect(isRunId(`r-${'a'.repeat(RUN_ID_MAX - 2)}`)).toBe(true);
  });
});
