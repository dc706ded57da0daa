import type { Writable } from 'node:stream';

// An agent's connection carries many streams: under load, several of them write in the same
// turn of the event loop (each request that arrived in one poll phase sends its frame or
// packet). One syscall each costs more than the rest of a small frame's way (syscalls are
// dear on virtual machines); corked until the turn's I/O is handled, they leave as one writev
// (and, over TLS, one record). The first write of a turn corks; setImmediate, which runs right
// after the poll phase, uncorks. A lone write waits for the rest of its own turn only.

/** Makes the writes `socket` gets in one turn of the event loop go out together. */
export function writeInTurns(socket: Writable): void {
  let corked = false;
  const uncork = () => {
    corked = false;
    socket.uncork();
  };
  const write = socket.write;
  // ssh2 writes to the socket it was handed: the socket's own write is where a turn starts.
  socket.write = function writeInTurn(this: Writable, ...args: Parameters<Writable['write']>) {
    if (!corked) {
      corked = true;
      socket.cork();
      setImmediate(uncork);
    }
    return write.apply(this, args);
  } as Writable['write'];
}
