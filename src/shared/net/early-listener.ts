import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';

// A port bound when the process begins, before the store opens and the pipeline starts (1.5–6 s),
// so that an agent reconnecting during a restart waits in the accept queue instead of being
// refused: ngrok-rust retries 2.5 s after losing its connection and then only 125 s later
// (docs/decisions.md#ngrok-reconnect). Connections that arrive before the listener is ready are
// held unread (paused, at most MAX_HELD, each for at most HOLD_MS), then handed to it in order.

/** Connections held until the listener is ready; beyond, new ones are closed at once. */
export const MAX_HELD = 128;
/** How long a connection is held before it is closed (a start slower than this lost it anyway). */
const HOLD_MS = 30_000;

/** A bound port whose connections go to `serve`'s handler once the listener is ready. */
export interface EarlyListener {
  readonly port: number;
  /** From now on, each connection (the held ones first) goes to `handle`, unread so far. */
  serve(handle: (socket: Socket) => void): void;
  /** Stops accepting and closes the connections still held (the served ones are the handler's). */
  close(): void;
}

/** Binds `host:port` (0: any free port); rejects as `listen` does (EADDRINUSE, EACCES). */
export async function openEarlyListener(host: string, port: number): Promise<EarlyListener> {
  const held = new Map<Socket, NodeJS.Timeout>();
  let handler: ((socket: Socket) => void) | undefined;
  const release = (socket: Socket) => {
    clearTimeout(held.get(socket));
    held.delete(socket);
    socket.off('error', ignore);
  };
  // Paused on accept: nothing is read until the real listener has the socket.
  const server: Server = createServer({ pauseOnConnect: true }, (socket) => {
    if (handler !== undefined) return handover(socket, handler);
    if (held.size >= MAX_HELD) return void socket.destroy();
    socket.on('error', ignore); // a reset while held: the socket closes, nothing to tell
    held.set(
      socket,
      setTimeout(() => {
        release(socket);
        socket.destroy();
      }, HOLD_MS),
    );
  });
  await listen(server, host, port);
  return {
    port: (server.address() as AddressInfo).port,
    serve(handle) {
      handler = handle;
      for (const socket of [...held.keys()]) {
        release(socket);
        handover(socket, handle);
      }
    },
    close() {
      server.close();
      for (const socket of [...held.keys()]) {
        release(socket);
        socket.destroy();
      }
    },
  };
}

function listen(server: Server, host: string, port: number | undefined): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
}

function handover(socket: Socket, handle: (socket: Socket) => void): void {
  if (socket.destroyed) return;
  handle(socket);
  // Reading begins on the next tick, once `handle` has attached its readers (or wrapped it in TLS).
  socket.resume();
}

function ignore(): void {}

/** A server accepting on a port: which one, and how to stop accepting. */
export interface Accepting {
  port: number;
  stop(): void;
}

/**
 * `server` accepting on `early` when the process bound its port already (its connections are
 * emitted to `server`), else listening on `host:port` itself (in-process starts, e.g. tests).
 */
export async function acceptOn(
  server: Server,
  early: EarlyListener | undefined,
  host: string,
  port: number | undefined,
): Promise<Accepting> {
  if (early !== undefined) {
    early.serve((socket) => server.emit('connection', socket));
    return { port: early.port, stop: () => early.close() };
  }
  await listen(server, host, port);
  return { port: (server.address() as AddressInfo).port, stop: () => server.close() };
}
