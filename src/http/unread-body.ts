// A request body the server does not read (SPEC §12: a body is read only for an action that
// passed every check): how to tell one is coming, and how to close its connection after the
// answer without reading it and without the answer being lost.

import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/** Whether the request says a body follows (a length above 0, or chunks). */
export function carriesBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** How long a connection whose body is left unread is kept after its answer. */
const LINGER_MS = 1_000;

/**
 * Closes the connection after its answer without reading what follows: it says it is done
 * writing, stops reading, and closes LINGER_MS later. Closed at once, a body still arriving makes
 * the kernel reset the connection, and a client that writes before it reads (most do) loses the
 * answer with it; read instead, the body is work done for whoever sent it. Node calls
 * destroySoon() on a connection whose answer says `close`: this is that, for these connections.
 */
export function lingerAtClose(socket: Socket): void {
  socket.destroySoon = () => {
    if (socket.writable) socket.end();
    socket.pause();
    // Node starts a request's unread body flowing once its answer is sent (to throw it away);
    // this connection is not read again
    socket.resume = () => socket;
    setTimeout(() => socket.destroy(), LINGER_MS).unref();
  };
}
