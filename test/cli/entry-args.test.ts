// Which command lines the entry recognizes before anything is loaded (src/cli/entry-args.ts).

import { describe, expect, it } from 'vitest';
import { isSchedulerStart, listArgs } from '../../src/cli/entry-args.js';

describe('entry args', () => {
  it('isSchedulerStart: the two command words, after the global --config and its value', () => {
    expect(isSchedulerStart(['scheduler', 'start'])).toBe(true);
    expect(isSchedulerStart(['scheduler', 'start', '--http', '9100'])).toBe(true);
    expect(isSchedulerStart(['-c', 'scheduler', 'scheduler', 'start'])).toBe(true);
    expect(isSchedulerStart(['--config', 'x.json', 'scheduler', 'start'])).toBe(true);
    expect(isSchedulerStart(['--config=x.json', 'scheduler', 'start'])).toBe(true);
    // a config file named "scheduler" is not the command
    expect(isSchedulerStart(['-c', 'scheduler', 'start'])).toBe(false);
    expect(isSchedulerStart(['scheduler', 'status'])).toBe(false);
    expect(isSchedulerStart(['routine', 'run', 'scheduler'])).toBe(false);
    expect(isSchedulerStart([])).toBe(false);
  });

  it('listArgs: routine list with --json, --check and --config only', () => {
    expect(listArgs(['routine', 'list', '--json'])).toEqual({ json: true, check: false });
    expect(listArgs(['-c', 'a.json', 'routine', 'list'])).toEqual({ json: false, check: false, config: 'a.json' });
    expect(listArgs(['routine', 'list', '--all'])).toBeNull();
    expect(listArgs(['routine', 'show', 'x'])).toBeNull();
  });
});
