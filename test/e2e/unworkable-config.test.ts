// Config strings that cannot work (issue 49, item 5), through the built CLI: a NUL byte in a
// command, an env value or the state folder, env names that are not names, 100 000 nested
// brackets. `validate` and the commands that act refuse them, exit 2, naming file and JSON path;
// none reaches "unexpected error".

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';

const routine = (over: string): string =>
  `{"id": "a", "schedule": "* * * * *", "action": "command", "run": "echo hi"${over}}`;

const cases: [string, string, RegExp][] = [
  [
    'a NUL byte in run',
    `{"routines": [${routine(', "run": "echo \\u0000hi"').replace('"run": "echo hi", ', '')}]}`,
    /^routinely: routinely\.json: routines\[0\]\.run: holds a NUL byte \(\\u0000\): no command, path or environment value can\n$/,
  ],
  [
    'a NUL byte in an env value',
    `{"routines": [${routine(', "env": {"D": "a\\u0000b"}')}]}`,
    /^routinely: routinely\.json: routines\[0\]\.env\.D: holds a NUL byte/,
  ],
  [
    'an env name with "="',
    `{"routines": [${routine(', "env": {"B=C": "x"}')}]}`,
    /^routinely: routinely\.json: routines\[0\]\.env\["B=C"\]: "B=C" is not an environment variable name/,
  ],
  ['a NUL byte in stateDir', '{"stateDir": "st\\u0000x"}', /^routinely: routinely\.json: stateDir: holds a NUL byte/],
  [
    '100 000 nested brackets',
    `{"routines": ${'['.repeat(100_000)}${']'.repeat(100_000)}}`,
    /^routinely: routinely\.json: routines(\[0\]){31}: is nested deeper than 32 levels, more than any config needs\n$/,
  ],
];

describe('config strings that cannot work', () => {
  it.each(cases)(
    '%s: validate, scheduler start and exec run exit 2 naming the file and the JSON path',
    async (_, text, said) => {
      const project = testdir('routinely-unworkable-');
      writeFileSync(join(project, 'routinely.json'), text);
      for (const args of [['validate'], ['scheduler', 'start'], ['exec', 'run'], ['lock', 'run', '--', 'true']]) {
        const r = await runCli(args, { cwd: project });
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
        expect(r.stderr, args.join(' ')).toMatch(said);
        expect(r.stderr).not.toMatch(/unexpected error/);
      }
    },
  );
});
