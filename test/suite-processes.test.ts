// The test run's own clean-up (scripts/suite-processes.mjs, scripts/suite-reaper.mjs): what a run
// started is found by the variable in its environment and killed once the run is over, however
// it ended; what another run that still goes on started is left alone. Real processes.

import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { processesOf, runTag, startTimeOf, SUITE_VAR, sweepEarlierRuns } from '../scripts/suite-processes.mjs';
import { eventually, processRuns } from './helpers/cli.js';

const ROOT = resolve(import.meta.dirname, '..');

/** A process with `tag` as its run's name (a `sleep`, killed at the test's end should it live). */
function tagged(tag: string | null, cmd = 'sleep', args = ['60']): ChildProcess {
  const env = { ...process.env };
  if (tag === null) delete env[SUITE_VAR];
  else env[SUITE_VAR] = tag;
  const child = spawn(cmd, args, { env, stdio: 'ignore', detached: true });
  onTestFinished(() => {
    try {
      process.kill(child.pid!, 'SIGKILL');
    } catch {
      // gone
    }
  });
  return child;
}

/** A stand-in for a vitest process: its pid and start time name a run. */
async function fakeRun(): Promise<{ main: ChildProcess; tag: string }> {
  const main = tagged(null);
  await eventually(() => startTimeOf(main.pid!) !== null, 5000, 'the stand-in started');
  return { main, tag: runTag(ROOT, main.pid!) };
}

describe('the processes of a test run', () => {
  it('found by their environment; an earlier run whose vitest is gone is swept, one still going is not', async () => {
    const ended = await fakeRun();
    const going = await fakeRun();
    const left = tagged(ended.tag);
    const busy = tagged(going.tag);
    await eventually(() => processesOf((t) => t === ended.tag).length === 1, 5000, 'the left process found');
    expect(processesOf((t) => t === going.tag).map((p) => p.pid)).toEqual([busy.pid]);
    ended.main.kill('SIGKILL');
    await eventually(() => !processRuns(ended.main.pid!), 5000, 'the stand-in ended');
    const killed = sweepEarlierRuns(runTag(ROOT)); // (as the next run's setup does)
    expect(killed.filter((p) => p.tag === ended.tag || p.tag === going.tag).map((p) => p.pid)).toEqual([left.pid]);
    await eventually(() => !processRuns(left.pid!), 5000, 'the left process killed');
    expect(processRuns(busy.pid!), 'a run still going keeps its processes').toBe(true);
  });

  it('the reaper kills what a run left as soon as its vitest is gone (SIGKILL: no teardown ran)', async () => {
    const run = await fakeRun();
    const server = tagged(run.tag, 'sh', ['-c', 'sleep 60 & sleep 60 & wait']);
    await eventually(() => processesOf((t) => t === run.tag).length === 3, 5000, 'the server and its children');
    const reaper = tagged(null, process.execPath, [resolve(ROOT, 'scripts/suite-reaper.mjs'), run.tag]);
    run.main.kill('SIGKILL');
    await eventually(() => processesOf((t) => t === run.tag).length === 0, 10_000, 'everything of the run killed');
    expect(processRuns(server.pid!)).toBe(false);
    await eventually(() => !processRuns(reaper.pid!), 5000, 'the reaper exits after its sweep');
  });
});
