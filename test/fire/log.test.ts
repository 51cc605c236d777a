// Scheduler log lines (SPEC §6): one line per event, whatever the event carries; a reload says
// what it changed.

import { describe, expect, it } from 'vitest';
import type { Config, RoutineDef } from '../../src/config/types.js';
import { createLogger, formatText } from '../../src/fire/log.js';
import { routineChanges, settingsChanged } from '../../src/scheduler/reload-changes.js';

const def = (id: string, schedule = '* * * * *'): RoutineDef => ({
  id,
  schedule,
  action: 'command',
  run: 'true',
  enabled: true,
  jitterSeconds: 0,
  catchUp: 'none',
  ifBusy: 'skip',
  manualIfBusy: 'fail',
  exclusive: true,
  lock: 'exec',
  starvedAfterSkips: 3,
});

describe('scheduler log lines', () => {
  it('a failed reload is one line, its problems separated, not a literal \\x0a', () => {
    const lines: string[] = [];
    const log = createLogger(
      'text',
      (l) => lines.push(l),
      () => 0,
    );
    log({
      event: 'scheduler.reload_failed',
      error:
        'routinely.json: routines[0].schedule: "x" is not a valid cron expression\nroutinely.json: routines[1].id: "" must not be empty',
    });
    expect(lines).toEqual([
      '1970-01-01T00:00:00.000Z [scheduler] config reload failed, keeping the old config: routinely.json: routines[0].schedule: "x" is not a valid cron expression; routinely.json: routines[1].id: "" must not be empty',
    ]);
  });

  it('a reload says which routines it added, removed and changed', () => {
    const changes = routineChanges([def('a'), def('b'), def('c')], [def('a'), def('b', '0 * * * *'), def('d')]);
    expect(changes).toEqual({ added: ['d'], removed: ['c'], changed: ['b'] });
    expect(formatText({ event: 'scheduler.reloaded', routines: 3, ...changes })).toBe(
      '[scheduler] reloaded config (3 routines: added d; removed c; changed b)',
    );
    expect(formatText({ event: 'scheduler.reloaded', routines: 1, ...routineChanges([def('a')], [def('a')]) })).toBe(
      '[scheduler] reloaded config (1 routine: no routine changed)',
    );
    // a reload that changed only other settings says which, not "no change" alone
    const before = { routines: [def('a')], locks: { ag: { slots: 1 } }, http: { actions: false } } as unknown as Config;
    const after = { routines: [def('a')], locks: { ag: { slots: 2 } }, http: { actions: true } } as unknown as Config;
    expect(settingsChanged(before, after)).toEqual(['http', 'locks']);
    expect(settingsChanged(before, before)).toEqual([]);
    expect(
      formatText({
        event: 'scheduler.reloaded',
        routines: 1,
        ...routineChanges([def('a')], [def('a')]),
        settings: settingsChanged(before, after),
      }),
    ).toBe('[scheduler] reloaded config (1 routine: no routine changed; settings changed: http, locks)');
  });
});
