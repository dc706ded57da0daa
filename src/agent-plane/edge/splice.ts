import type { Duplex } from 'node:stream';

/**
 * Joins a client's socket and an agent's stream both ways; when either closes or fails, both
 * are destroyed and `onEnd` runs once. A client gone while the stream opened ends it at once.
 */
export function splice(socket: Duplex, agentStream: Duplex, onEnd: () => void): void {
  socket.pipe(agentStream).pipe(socket);
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    socket.destroy();
    agentStream.destroy();
    onEnd();
  };
  for (const stream of [socket, agentStream]) {
    stream.once('close', end);
    stream.on('error', end);
  }
  if (socket.destroyed) end();
}
