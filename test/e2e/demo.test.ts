// `npm run demo` prints each command it runs: what it prints must be exactly what it runs.

import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { CLI, FIXTURES, processRuns, start } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';

const DEMO = resolve(import.meta.dirname, '../../examples/demo.mjs');

/** Whether `pid` is (still) one of our CLI's processes, not a reused pid of someone else's. */
const ownCommand = (pid: number): boolean => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(CLI);
  } catch {
    return false;
  }
};

/** The command line as a POSIX shell would read it back. */
const shellWords = (args: string[]): string =>
  args.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", "'\\''")}'`)).join(' ');

describe('the demo', () => {
  it('prints exactly the commands it runs, with every flag', { timeout: 120_000 }, async () => {
    const log = join(testdir(), 'argv.jsonl');
    const demo = start(DEMO, [], {
      timeoutMs: 110_000,
      env: { NODE_OPTIONS: `--require ${join(FIXTURES, 'argv-recorder.cjs')}`, ROUTINELY_ARGV_LOG: log },
    });
    // whatever happens, no command the demo started outlives the test (a demo killed at the
    // timeout cannot stop its scheduler itself)
    onTestFinished(() => {
      for (const line of existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : []) {
        const { pid } = JSON.parse(line) as { pid: number };
        if (pid !== demo.pid && processRuns(pid) && ownCommand(pid)) process.kill(pid, 'SIGKILL');
      }
    });
    const { code } = await demo.exited;
    expect(
      code,
      `${demo.stderr()}\n--- stdout (last 60 lines) ---\n${demo.stdout().split('\n').slice(-60).join('\n')}`,
    ).toBe(0);
    const printed = demo
      .stdout()
      .split('\n')
      .filter((l) => l.startsWith('$ routinely '))
      .map((l) => l.slice('$ routinely '.length).replace(/ &$/, ''));
    const ran = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { pid: number; ppid: number; argv: string[] })
      .filter((p) => p.ppid === demo.pid && p.argv[0] === CLI)
      .map((p) => shellWords(p.argv.slice(1)));
    expect(ran.length).toBeGreaterThanOrEqual(8);
    // sorted: a background command may start after the next one is printed
    expect(printed.sort()).toEqual(ran.sort());
  });
});
