// One notify-command attempt: `sh -c COMMAND` in the project root, in its own process group, the
// payload as JSON on stdin. Bounded by a timeout that ends the whole group, and abortable; and
// ended with this process if it dies (SIGKILL: the timer dies with it), by the death guard.

import { killGroup, spawnDetached, stopGroup } from '../exec/process.js';
import { guardGroup, guardNotify, NOTIFY_ID, unguardGroup, unguardNotify } from '../exec/death-guard.js';
import { randomHex } from '../fs/random-ids.js';
import { monotonicMs } from '../clock.js';
import type { AttemptResult } from './webhook.js';

export interface CommandAttempt {
  command: string;
  cwd: string;
  env: NodeJS.ProcessEnv;
  stdin: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

/** SIGTERM → SIGKILL for a notify command that is stopped. */
const KILL_GRACE_MS = 1_000;
/** The end of the command's output kept for the log line of a failed attempt. */
const KEEP_OUTPUT = 2_048;

export function runNotifyCommand(a: CommandAttempt): Promise<AttemptResult> {
  return new Promise((resolve) => {
    if (a.signal?.aborted) return resolve({ ok: false, error: 'stopped', retry: false });
    let output = '';
    let stoppedFor: string | null = null;
    let settled = false;
    let kill: NodeJS.Timeout | undefined;
    // the guard knows the attempt before it starts (its environment names it), not only once the
    // spawn has returned: a SIGKILL in between ends it too
    const mark = randomHex(8);
    guardNotify(mark);
    let child: ReturnType<typeof spawnDetached>;
    try {
      child = spawnDetached('/bin/sh', ['-c', a.command], {
        cwd: a.cwd,
        env: { ...a.env, [NOTIFY_ID]: mark },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
    } catch (err) {
      unguardNotify(mark);
      throw err;
    }
    const pid = child.pid;
    // a delivery under way when this process is SIGKILLed is never sent (docs/routines.md): its
    // group is ended then, not left to run (and send) with no time limit
    if (pid !== undefined) guardGroup(pid);
    const started = monotonicMs();
    const keep = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-KEEP_OUTPUT);
    };
    // (no pipes when it could not start for want of descriptors: its 'error' says so)
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    // A command that does not read its stdin closes the pipe: EPIPE here is no failure.
    child.stdin?.on('error', () => {});
    child.stdin?.end(a.stdin);
    const signalGroup = (sig: NodeJS.Signals): void => {
      try {
        if (pid !== undefined) killGroup(pid, sig);
      } catch {
        // not ours to signal any more
      }
    };
    const stop = (why: string): void => {
      if (stoppedFor !== null || pid === undefined) return;
      stoppedFor = why;
      signalGroup('SIGTERM');
      kill = setTimeout(() => signalGroup('SIGKILL'), KILL_GRACE_MS);
    };
    const onAbort = (): void => stop('stopped');
    const timer = setTimeout(
      () => stop(`no exit within ${a.timeoutMs / 1000}s (its process group was ended)`),
      a.timeoutMs,
    );
    a.signal?.addEventListener('abort', onAbort, { once: true });
    const finish = (r: AttemptResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(kill);
      a.signal?.removeEventListener('abort', onAbort);
      // 'exit', not 'close': a background process of the command may hold the pipes open.
      child.stdout?.destroy();
      child.stderr?.destroy();
      if (stoppedFor !== null) signalGroup('SIGKILL');
      // what it left running in its group and session (`cmd &`) is ended, as a routine command's
      // leftovers are (docs/lock.md, rule 11), before the attempt counts as done; a process that
      // made a session of its own (setsid) is left, as there
      if (stoppedFor === null && pid !== undefined)
        void stopGroup(pid, KILL_GRACE_MS, monotonicMs() - started)
          .catch(() => 0)
          .then(() => {
            unguardGroup(pid);
            unguardNotify(mark);
            resolve(r);
          });
      else {
        if (pid !== undefined) unguardGroup(pid);
        unguardNotify(mark);
        resolve(r);
      }
    };
    child.once('error', (err) => finish({ ok: false, error: `cannot run /bin/sh: ${err.message}`, retry: false }));
    child.once('exit', (code, signal) => {
      if (stoppedFor !== null) return finish({ ok: false, error: stoppedFor, retry: stoppedFor !== 'stopped' });
      if (code === 0) return finish({ ok: true });
      // The last of its output says why; it may still be in the pipe for a moment.
      const judge = (): void => {
        const last = output.trimEnd().split('\n').pop()?.trim();
        finish({
          ok: false,
          error: `${signal ? `killed by ${signal}` : `exit code ${code}`}${last ? `: ${last}` : ''}`,
          retry: true,
        });
      };
      child.once('close', judge);
      setTimeout(judge, 200);
    });
  });
}
