// Where exec tasks come from (src/exec/task-source.ts): the inline tasks and the files of every
// `exec.taskDirs` folder. A folder that is not there holds no tasks; one that cannot be listed is
// said, naming the folder and why (a path through a file, a file where the folder should be).

import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadProject } from '../../src/config/load.js';
import { loadTaskDefinitions } from '../../src/exec/task-source.js';
import { ConfigError } from '../../src/errors.js';
import { testProject } from '../helpers/testdir.js';

function load(taskDirs: string[], setup: (dir: string) => void = () => {}): { ids: string[]; error: string | null } {
  const dir = testProject({ exec: { taskDirs, tasks: [{ id: 'inline', run: 'true' }] } });
  setup(dir);
  try {
    return { ids: loadTaskDefinitions(loadProject({ cwd: dir })).map((t) => t.task.id), error: null };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return { ids: [], error: err.message };
  }
}

describe('exec.taskDirs', () => {
  it('reads the task files of a folder; a folder that is not there is said, never read as no tasks', () => {
    const make = (dir: string) => {
      mkdirSync(join(dir, 'tasks'), { mode: 0o700 });
      writeFileSync(join(dir, 'tasks', 'build.json'), JSON.stringify({ id: 'build', run: 'true' }), { mode: 0o600 });
    };
    const r = load(['tasks'], make);
    expect(r.error).toBeNull();
    expect(r.ids.sort()).toEqual(['build', 'inline']);
    // the same folder named twice is read once (its tasks were duplicates of themselves)
    expect(load(['tasks', './tasks/'], make)).toEqual({ ids: ['inline', 'build'], error: null });
    // a typo, or a volume not mounted: register would have retired every task it held
    expect(load(['tasks', 'taks'], make).error).toContain(
      'exec.taskDirs: taks does not exist: create it, or take it out of exec.taskDirs',
    );
  });

  it("a hidden name is no task file, as a shell reads *.json: an editor's lock link to nowhere, a macOS ._ file", () => {
    const r = load(['tasks'], (dir) => {
      mkdirSync(join(dir, 'tasks'), { mode: 0o700 });
      writeFileSync(join(dir, 'tasks', 'build.json'), JSON.stringify({ id: 'build', run: 'true' }), { mode: 0o600 });
      symlinkSync('root@host.1234:1700000000', join(dir, 'tasks', '.#build.json'));
      writeFileSync(join(dir, 'tasks', '._build.json'), Buffer.from([0, 5, 22, 7, 0, 2]), { mode: 0o600 });
    });
    expect(r.error).toBeNull();
    expect(r.ids.sort()).toEqual(['build', 'inline']);
  });

  it('says why a folder cannot be read: a file where it should be, or a path through a file', () => {
    for (const taskDir of ['afile', 'afile/sub']) {
      const r = load([taskDir], (dir) => writeFileSync(join(dir, 'afile'), 'not a folder', { mode: 0o600 }));
      expect(r.error).toContain(`cannot read ${taskDir}: a path component is not a directory (ENOTDIR)`);
    }
  });
});
