// Which command lines the entry recognizes before anything is loaded (src/cli/entry-args.ts).

import { describe, expect, it } from 'vitest';
import { listArgs } from '../../src/cli/entry-args.js';

describe('entry args', () => {
  it('listArgs: routine list with --json, --check and --config only', () => {
    expect(listArgs(['routine', 'list', '--json'])).toEqual({ json: true, check: false });
    expect(listArgs(['-c', 'a.json', 'routine', 'list'])).toEqual({ json: false, check: false, config: 'a.json' });
    expect(listArgs(['routine', 'list', '--all'])).toBeNull();
    expect(listArgs(['routine', 'show', 'x'])).toBeNull();
  });
});
