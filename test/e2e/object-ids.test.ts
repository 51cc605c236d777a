// Ids that are the names of properties every JavaScript object has (`constructor`, `toString`,
// `valueOf`, `hasOwnProperty`) are valid routine and task ids (SPEC §2): every command takes them
// as any other id, never as the property (which crashed `exec run` and `routine list`).

import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

describe('ids named like the properties of every object', () => {
  it('routines and tasks called constructor, toString, valueOf, hasOwnProperty run, list and resume as any other', async () => {
    const project = testProject({
      routines: [
        { id: 'constructor', schedule: '0 0 1 1 *', action: 'command', run: 'true' },
        { id: 'toString', schedule: '0 0 1 1 *', action: 'command', run: 'false' },
      ],
      exec: {
        tasks: [
          { id: 'valueOf', run: 'true' },
          { id: 'toString', run: 'true' },
          { id: 'hasOwnProperty', run: 'true', dependsOn: ['toString'] },
        ],
      },
    });
    const cli = (...args: string[]) => runCli(args, { cwd: project });
    // before anything is recorded, then after
    expect((await cli('routine', 'list')).code).toBe(0);
    expect((await cli('routine', 'run', 'constructor')).code).toBe(0);
    expect((await cli('routine', 'run', 'toString')).code).toBe(1);
    const list = await cli('routine', 'list', '--json');
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toMatchObject([
      { id: 'constructor', last_result: 'success' },
      { id: 'toString', last_result: 'failure' },
    ]);
    const run = await cli('exec', 'run');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/SUCCEEDED: 3 succeeded/);
    const status = await cli('exec', 'status');
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/hasOwnProperty\s+succeeded/);
    expect((await cli('register')).stdout).toMatch(/^0 new, 0 changed, 0 retired/);
    const again = await cli('exec', 'run');
    expect(again.stdout).toMatch(/nothing to run: all 3 tasks succeeded/);
    expect((await cli('exec', 'reset', 'valueOf')).code).toBe(0);
    expect((await cli('exec', 'run')).stdout).toMatch(/1 succeeded/);
    expect(`${run.stderr}${status.stderr}${again.stderr}`).not.toMatch(/corrupt|unexpected error/);
  });
});
