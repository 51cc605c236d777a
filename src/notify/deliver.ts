// Delivering one notification (SPEC §10): to the webhook and to the command, each with up to 3
// attempts and a back-off between them, each attempt bounded by a 10 s timeout. Never throws: a
// delivery that fails is reported in its result (and logged by the caller); nothing here can
// change the routine's result.

import { Backoff } from '../backoff.js';
import type { Clock } from '../clock.js';
import type { NotifyDef } from '../config/types.js';
import { commandEnv } from '../exec/process.js';
import { runNotifyCommand } from './command.js';
import type { NotifyPayload } from './payload.js';
import { postWebhook, webhookLabel, type AttemptResult } from './webhook.js';
import { jsonText } from '../printable.js';

export interface DeliveryOptions {
  /** The project root: the command's working folder. */
  cwd: string;
  /** Variables withheld from commands that the config lets through (SPEC §12). */
  passEnv: readonly string[];
  /** The environment the command starts from, already without withheld variables (the
   * scheduler's copy); default: computed from `process.env` now. */
  baseEnv?: NodeJS.ProcessEnv;
  /** Stops every attempt and back-off at once (scheduler shutdown). */
  signal?: AbortSignal;
  /** Per attempt; default 10 s. */
  timeoutMs?: number;
  /** Default 3. */
  attempts?: number;
  /** Wait before the second attempt, doubled before each next one; default 1 s. */
  backoffMs?: number;
  /** What the back-off sleeps on (tests: a ManualClock). */
  clock?: Clock;
}

export interface Delivery {
  channel: 'webhook' | 'command';
  /** What the logs may show: the webhook without credentials, path or query; `command`. */
  target: string;
  delivered: boolean;
  attempts: number;
  /** The last attempt's error. */
  error: string | null;
}

export const DELIVERY_TIMEOUT_MS = 10_000;
export const DELIVERY_ATTEMPTS = 3;
export const DELIVERY_BACKOFF_MS = 1_000;

async function withAttempts(
  o: DeliveryOptions,
  attempt: () => Promise<AttemptResult>,
): Promise<Pick<Delivery, 'delivered' | 'attempts' | 'error'>> {
  const max = o.attempts ?? DELIVERY_ATTEMPTS;
  const pause = new Backoff(o.backoffMs ?? DELIVERY_BACKOFF_MS, Infinity, o.clock);
  let error: string | null = null;
  for (let n = 1; ; n++) {
    let r: AttemptResult;
    try {
      r = await attempt();
    } catch (err) {
      r = { ok: false, error: (err as Error).message, retry: true };
    }
    if (r.ok) return { delivered: true, attempts: n, error: null };
    error = r.error;
    if (!r.retry || n >= max || o.signal?.aborted) return { delivered: false, attempts: n, error };
    await pause.wait(o.signal);
    if (o.signal?.aborted) return { delivered: false, attempts: n, error: 'stopped' };
  }
}

/** The command's environment: the scheduler's minus what routinely withholds (SPEC §12), plus
 * the event's variables. */
export function notifyEnv(payload: NotifyPayload, base: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return {
    ...base,
    ROUTINELY_EVENT: payload.event,
    ROUTINELY_ROUTINE_ID: payload.routine,
    ROUTINELY_RUN_ID: payload.run_id ?? '',
    ROUTINELY_RESULT: payload.result,
    ROUTINELY_LOG: payload.log,
  };
}

/** Sends `payload` to the webhook and the command of `target` (both at once, when both are
 * set); one result per channel. */
export async function deliver(
  target: Partial<NotifyDef>,
  payload: NotifyPayload,
  o: DeliveryOptions,
): Promise<Delivery[]> {
  // DEL and C1 escaped too (JSON.stringify leaves them): a receiver that prints it prints text (SPEC §12)
  const body = `${jsonText(JSON.stringify(payload))}\n`;
  const timeoutMs = o.timeoutMs ?? DELIVERY_TIMEOUT_MS;
  const jobs: Promise<Delivery>[] = [];
  if (target.webhook !== undefined) {
    const url = target.webhook;
    jobs.push(
      withAttempts(o, () => postWebhook(url, body, timeoutMs, o.signal)).then((r) => ({
        channel: 'webhook' as const,
        target: webhookLabel(url),
        ...r,
      })),
    );
  }
  if (target.command !== undefined) {
    const command = target.command;
    const env = notifyEnv(payload, o.baseEnv ?? commandEnv(process.env, o.passEnv));
    jobs.push(
      withAttempts(o, () =>
        runNotifyCommand({ command, cwd: o.cwd, env, stdin: body, timeoutMs, signal: o.signal }),
      ).then((r) => ({ channel: 'command' as const, target: 'command', ...r })),
    );
  }
  return Promise.all(jobs);
}
