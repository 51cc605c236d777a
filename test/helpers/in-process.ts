// The command line's program (commander and the commands, from src/) run in this process, for
// tests of what it prints where no process boundary is under test: help texts, usage errors.
// A spawned CLI costs a Node start and the program's load (about a tenth of a second of CPU,
// several on a loaded machine); this costs a function call. What needs a process of its own —
// exit codes of the entry file, signals, locks, the fast paths of src/cli/main.ts — is tested
// with the built CLI (helpers/cli.ts).

import { main } from '../../src/cli/program.js';
import type { RunResult } from './cli.js';

let running = false;

/** `routinely ARGS` in this process, in `cwd` with `env` added to the environment; its output
 * captured. One at a time (it borrows the process's stdout, stderr, cwd and environment). */
export async function runInProcess(
  args: string[],
  opts: { cwd?: string; env?: Record<string, string> } = {},
): Promise<RunResult> {
  if (running) throw new Error('runInProcess: one at a time');
  running = true;
  let stdout = '';
  let stderr = '';
  const writes = { out: process.stdout.write, err: process.stderr.write };
  const cwd = process.cwd();
  const env = { ...process.env };
  const capture = (append: (s: string) => void) =>
    ((chunk: string | Uint8Array, ...rest: unknown[]): boolean => {
      append(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString());
      const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
      done?.();
      return true;
    }) as typeof process.stdout.write;
  try {
    process.stdout.write = capture((s) => (stdout += s));
    process.stderr.write = capture((s) => (stderr += s));
    Object.assign(process.env, { NO_COLOR: '1' }, opts.env);
    if (opts.cwd) process.chdir(opts.cwd);
    const code = await main(['node', 'routinely', ...args]);
    return { code, signal: null, stdout, stderr };
  } finally {
    process.stdout.write = writes.out;
    process.stderr.write = writes.err;
    process.chdir(cwd);
    for (const k of Object.keys(process.env)) if (!(k in env)) delete process.env[k];
    Object.assign(process.env, env);
    running = false;
  }
}
