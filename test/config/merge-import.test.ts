// import-crontab --merge (SPEC §10): the imported routines and locks added to a routinely.json as
// text, every comment and byte of the file kept; an id it has already refused by name.

import { describe, expect, it } from 'vitest';
import { importCrontab } from '../../src/config/crontab.js';
import { stripJsonComments } from '../../src/config/load.js';
import { mergeImported } from '../../src/config/merge-import.js';
import { validateConfig } from '../../src/config/validate.js';

const crontab = ['*/5 * * * * flock -n /tmp/app.lock ./index.sh', '0 3 * * * ./backup.sh', ''].join('\n');
const imported = importCrontab(crontab, { source: 'crontab', system: false });

function merged(text: string): string {
  const r = mergeImported(text, imported, 'routinely.json');
  if ('refused' in r) throw new Error(r.refused);
  const valid = validateConfig(JSON.parse(stripJsonComments(r.text)));
  expect(valid.ok ? [] : valid.issues).toEqual([]);
  return r.text;
}

describe('mergeImported', () => {
  it('a commented file with routines and locks: both get the new ones, every line of the file stays', () => {
    const file = [
      '// my project',
      '{',
      '  "$schema": "./node_modules/routinely/config/routinely.schema.json",',
      '  /* the lock of the agents */',
      '  "locks": { "agents": { "slots": 2 } },',
      '  "routines": [',
      '    // hourly sync, "quoted" [brackets] {braces}',
      '    { "id": "sync", "schedule": "0 * * * *", "action": "command", "run": "echo \\"]}\\"" }',
      '  ]',
      '}',
      '',
    ].join('\n');
    const out = merged(file);
    // (up to where a closing bracket on the line makes room for the new lines)
    for (const line of file.split('\n')) expect(out).toContain(line.replace(/\s*[\]}],?$/, ''));
    const config = JSON.parse(stripJsonComments(out)) as {
      locks: object;
      routines: { id: string; lock?: string; exclusive?: boolean }[];
    };
    expect(config.locks).toEqual({ agents: { slots: 2 }, app: { slots: 1 } });
    expect(config.routines.map((r) => [r.id, r.lock ?? null, r.exclusive ?? true])).toEqual([
      ['sync', null, true],
      ['index', 'app', true],
      ['backup', null, false],
    ]);
    expect(out).toContain('// Imported from crontab by routinely import-crontab.');
    expect(out).toContain('// takes the named lock "app"');
  });

  it('an empty object, and a file without routines or locks: both members added', () => {
    for (const file of ['{}\n', '{ "stateDir": ".state" }\n', '{\n  "routines": []\n}\n']) {
      const config = JSON.parse(stripJsonComments(merged(file))) as { locks: object; routines: { id: string }[] };
      expect(config.locks, file).toEqual({ app: { slots: 1 } });
      expect(
        config.routines.map((r) => r.id),
        file,
      ).toEqual(['index', 'backup']);
    }
  });

  it("a lock of the same name is the same lock only when it is the same file's with one slot (else the import's gets a name of its own); an id the file has is refused by name", () => {
    type Merged = { locks: object; routines: { id: string; lock?: string }[] };
    const parsed = (file: string): Merged => JSON.parse(stripJsonComments(merged(file))) as Merged;
    // more slots: jobs that cron ran one at a time would run three at once
    const slots = parsed('{ "locks": { "app": { "slots": 3 } } }');
    expect(slots.locks).toEqual({ app: { slots: 3 }, 'app-2': { slots: 1 } });
    expect(slots.routines.find((r) => r.id === 'index')?.lock).toBe('app-2');
    // another file's (its comment names it): jobs cron ran side by side would take turns
    const other = merged('{ "locks": {\n  "app": { "slots": 1 } // /var/lock/other/app.lock\n} }');
    expect((JSON.parse(stripJsonComments(other)) as Merged).locks).toEqual({
      app: { slots: 1 },
      'app-2': { slots: 1 },
    });
    // (the comment that ended the last lock's line stays on it)
    expect(other).toContain('"app": { "slots": 1 }, // /var/lock/other/app.lock\n');
    expect(other).toContain(
      '// the lock is "app-2", not "app": the project\'s lock "app" is another file\'s or has more slots, and /tmp/app.lock gets one of its own',
    );
    // the same file's lock, under whatever name an earlier import gave it: that lock
    const same = parsed('{ "locks": { "web": { "slots": 1 }, // /tmp/app.lock\n "app": { "slots": 2 } } }');
    expect(same.locks).toEqual({ web: { slots: 1 }, app: { slots: 2 } });
    expect(same.routines.find((r) => r.id === 'index')?.lock).toBe('web');
    // a lock a routine of the project takes without declaring it (one slot): another lock
    const undeclared = parsed(
      '{ "routines": [ { "id": "deploy", "schedule": "0 0 * * *", "action": "command", "run": "true", "lock": "app" } ] }',
    );
    expect(undeclared.routines.find((r) => r.id === 'index')?.lock).toBe('app-2');
    // new names within a lock name's 63 characters (two files of one long name: "…" and "…-2")
    const long = 'a'.repeat(60);
    const longImport = importCrontab(
      `* * * * * flock -n /x/${long}.lock ./one\n* * * * * flock -n /y/${long}.lock ./two\n`,
      {
        source: 'c',
        system: false,
      },
    );
    expect(longImport.locks.map((l) => l.name)).toEqual([long, `${long}-2`]);
    const taken = mergeImported(
      `{ "locks": { "${long}": { "slots": 2 }, "${long}-2": { "slots": 2 } } }`,
      longImport,
      'routinely.json',
    );
    if ('refused' in taken) throw new Error(taken.refused);
    const names = Object.keys((JSON.parse(stripJsonComments(taken.text)) as { locks: object }).locks);
    expect(names.slice(2)).toEqual([`${long}-3`, `${long}-4`]);
    expect(validateConfig(JSON.parse(stripJsonComments(taken.text))).ok).toBe(true);
    const r = mergeImported(
      '{ "routines": [ { "id": "a", "schedule": "* * * * *", "action": "register" }, { "id": "backup", "schedule": "* * * * *", "action": "register" } ] }',
      imported,
      'routinely.json',
    );
    expect(r).toEqual({
      refused:
        'routine "backup" is in routinely.json already (routines[1]): rename or remove it there, or change the crontab\'s job, then import again; nothing was written',
    });
    expect(mergeImported('[1]', imported, 'routinely.json')).toEqual({
      refused: 'routinely.json holds no JSON object',
    });
    expect(mergeImported('{ "routines": {} }', imported, 'routinely.json')).toEqual({
      refused: 'routinely.json: "routines" is not an array',
    });
  });
});
