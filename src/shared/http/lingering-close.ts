import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

// The lingering close of an HTTP/1.1 connection answered before its request arrived whole (a
// stream past its limit, a body over its limit, a 401 to a body still coming). Closing a socket
// with unread bytes makes the kernel send a reset, and a reset makes the client's TCP stack drop
// what it has not yet read: the answer. So the answer is followed by a FIN, and the rest of the
// body is read and dropped until the client stops, then the socket is closed; within bounds, as
// nginx's lingering_close (docs/decisions.md#lingering-close).

/** Longest the rest of a body is read after the answer (nginx's lingering_time). */
export const LINGER_MS = 30_000;
/** Longest wait for the next byte of it (nginx's lingering_timeout). */
export const LINGER_IDLE_MS = 5_000;
/** Most bytes read and dropped; a client sending more is reset. */
export const LINGER_MAX_BYTES = 64 * 1024 * 1024;

/**
 * Makes Node's HTTP server close `socket` with a lingering close when it closes it after an
 * answer while `unfinished()` gives the request still arriving: Node ends the connection of an
 * answer marked `Connection: close` with socket.destroySoon(), which this takes over. `maxMs`
 * lowers LINGER_MS (the request timeout still runs).
 */
export function lingerOnClose(
  socket: Socket,
  unfinished: () => IncomingMessage | undefined,
  maxMs: number,
): void {
  const destroySoon = socket.destroySoon.bind(socket);
  socket.destroySoon = () => {
    const request = unfinished();
    if (request === undefined || request.complete) return destroySoon();
    linger(socket, request, Math.min(LINGER_MS, maxMs));
  };
}

/** True while `socket` is in its lingering close: it has answered, and reads only to drop. */
export function lingering(socket: Socket): boolean {
  return lingeringSockets.has(socket);
}

const lingeringSockets = new WeakSet<Socket>();

function linger(socket: Socket, request: IncomingMessage, maxMs: number): void {
  lingeringSockets.add(socket);
  socket.end(); // after the answer: the client reads it, then the end
  const close = () => socket.destroy();
  // Once the client has sent everything (or closed its side): closed as soon as the answer is out.
  const done = () => (socket.writableFinished ? close() : socket.once('finish', close));
  const total = setTimeout(close, maxMs);
  const idle = setTimeout(close, LINGER_IDLE_MS);
  let dropped = 0;
  // Node's parser still reads the body into the request: dropped there, counted as it goes.
  request.on('error', () => {});
  request.on('data', (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > LINGER_MAX_BYTES) close();
    else idle.refresh();
  });
  request.once('end', done);
  request.resume();
  socket.once('end', done);
  socket.once('close', () => {
    clearTimeout(total);
    clearTimeout(idle);
  });
}
