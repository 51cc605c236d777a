// The actions of the HTTP server (SPEC §11): POST /api/routines/ID/run|pause|resume, with a
// bounded JSON body, answered as `routine run|pause|resume` would (the server checks the token,
// the Origin and the Host before any of this).

import type { IncomingMessage } from 'node:http';
import type { StatusSources } from './sources.js';
import { PAUSE_NOTE_MAX } from '../state/routine-state.js';

/** The largest action body read (a pause note and little else). */
const BODY_MAX = 16 * 1024;

export class HttpProblem extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The request's body, at most BODY_MAX bytes. */
export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > BODY_MAX) {
        req.removeAllListeners('data');
        req.pause();
        reject(new HttpProblem(413, `the body is larger than ${BODY_MAX} bytes`));
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** The action's JSON body: an object (or nothing). */
export function parseBody(text: string): Record<string, unknown> {
  if (text.trim() === '') return {};
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new HttpProblem(400, 'the body is not JSON');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new HttpProblem(400, 'the body is not a JSON object');
  return v as Record<string, unknown>;
}

/** POST /api/routines/ID/ACTION: [status, JSON answer]. `address`: the client's. */
export async function takeAction(
  s: StatusSources,
  id: string,
  action: string,
  body: Record<string, unknown>,
  address = '?',
): Promise<[number, unknown]> {
  const a = s.actions!;
  const unknown = (): HttpProblem => new HttpProblem(404, `no routine ${JSON.stringify(id)} in the config`);
  // (stop: also the fire of a routine a reload removed, while it runs; such a routine is listed
  // then, and only stopped)
  if (action !== 'stop' && !(await s.routines()).some((r) => r.id === id && !r.removed)) throw unknown();
  if (action === 'stop') {
    const r = await a.stopFire(id, address);
    switch (r.state) {
      case 'unknown':
        throw unknown();
      case 'idle':
        return [200, { ...r, routine: id, message: `${id} is not running; nothing to stop` }];
      case 'elsewhere':
        return [409, { ...r, routine: id, message: `${id} runs on ${r.host} (pid ${r.pid}): stop it there` }];
      case 'not-found':
        return [
          409,
          { ...r, routine: id, message: `${id}: a fire is open but no process of it was found on this host` },
        ];
      case 'refused':
        return [400, { ...r, routine: id, message: r.error }];
      case 'stopped':
        return [
          200,
          {
            ...r,
            routine: id,
            message: `stopped ${id} (run ${r.run_id})${r.killed ? ', with SIGKILL after the grace' : ''}; ${r.recorded ? 'recorded as failure: stopped by hand' : 'its record follows as it ends'}`,
          },
        ];
    }
  }
  if (action === 'run') {
    const r = await a.run(id, address);
    switch (r.state) {
      case 'started':
        return [202, { ...r, routine: id, message: `started ${id}${r.run_id ? ` (run ${r.run_id})` : ''}` }];
      case 'waiting':
        return [202, { ...r, routine: id, message: `waiting for its lock: ${r.why}` }];
      case 'skipped':
        return [200, { ...r, routine: id, message: `skipped: ${r.reason} (nothing recorded)` }];
      case 'busy':
        return [409, { ...r, routine: id, message: `${r.error} (nothing recorded)` }];
      case 'finished':
        return [
          200,
          {
            ...r,
            routine: id,
            message: `${r.result === 'success' ? 'succeeded' : `failed: ${r.reason ?? 'failed'}`} ${id}${r.run_id ? ` (run ${r.run_id})` : ''}`,
          },
        ];
    }
  }
  if (action === 'pause') {
    const note = body.note;
    // characters as people count them (code points): an emoji is one, not two UTF-16 units
    if (note !== undefined && note !== null && (typeof note !== 'string' || [...note].length > PAUSE_NOTE_MAX))
      throw new HttpProblem(400, `note: a string of at most ${PAUSE_NOTE_MAX} characters, or null`);
    const r = await a.pause(id, typeof note === 'string' && note.trim() !== '' ? note.trim() : null);
    return [
      200,
      { routine: id, paused: true, ...r, message: r.was_paused ? `${id} was already paused` : `paused ${id}` },
    ];
  }
  const r = await a.resume(id);
  return [
    200,
    {
      routine: id,
      paused: false,
      ...r,
      message: r.was_paused ? `resumed ${id}` : `${id} was not paused; nothing to resume`,
    },
  ];
}
