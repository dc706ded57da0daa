import type { Duplex } from 'node:stream';

/**
 * Joins a client's socket and an agent's channel both ways; when either closes or fails, both
 * are destroyed and `onEnd` runs once. A client gone while the channel opened ends it at once.
 */
export function splice(socket: Duplex, channel: Duplex, onEnd: () => void): void {
  socket.pipe(channel).pipe(socket);
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    socket.destroy();
    channel.destroy();
    onEnd();
  };
  for (const stream of [socket, channel]) {
    stream.once('close', end);
    stream.on('error', end);
  }
  if (socket.destroyed) end();
}
