// Which command lines the entry recognizes before anything is loaded (src/cli/entry-args.ts).

import { describe, expect, it } from 'vitest';
import { listArgs, lockArgs } from '../../src/cli/entry-args.js';

describe('entry args', () => {
  it('listArgs: routine list with --json, --check and --config only', () => {
    expect(listArgs(['routine', 'list', '--json'])).toEqual({ json: true, check: false });
    expect(listArgs(['-c', 'a.json', 'routine', 'list'])).toEqual({ json: false, check: false, config: 'a.json' });
    expect(listArgs(['routine', 'list', '--all'])).toBeNull();
    expect(listArgs(['routine', 'show', 'x'])).toBeNull();
  });

  it("lockArgs: a flag given twice is the full path's to refuse", () => {
    expect(lockArgs(['lock', 'run', '--if-busy', 'wait', '--', 'true'])).toMatchObject({ kind: 'run', ifBusy: 'wait' });
    expect(lockArgs(['lock', 'run', '--if-busy', 'wait', '--if-busy', 'fail', '--', 'true'])).toBeNull();
    expect(
      lockArgs(['lock', 'run', '--if-busy', 'wait', '--wait-timeout', '1', '--wait-timeout', '2', '--', 'true']),
    ).toBeNull();
    expect(lockArgs(['lock', 'status', '--key', 'scheduler'])).toMatchObject({ kind: 'status', key: 'scheduler' });
    expect(lockArgs(['lock', 'status', '--key', 'scheduler', '--key', 'exec-run'])).toBeNull();
  });
});
