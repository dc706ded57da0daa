import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../../shared/logger.ts';
import type { LiveSession } from '../sessions/live-session.ts';
import type { SessionRegistry } from '../sessions/registry.ts';
import { clientHelloServerName, firstRecordSize } from './client-hello.ts';
import type { RawClient } from './relay-passthrough.ts';

// TLS endpoints (an ngrok agent's `tls` bind): the edge's TLS listener reads each connection's
// ClientHello before TLS starts; when its server name is a live TLS endpoint of this instance,
// the raw bytes, the ClientHello first, go to the agent unterminated (its own certificate
// answers the client). Any other connection goes on to the HTTPS listener as if nothing had
// been read. A name that is another instance's TLS endpoint goes there raw through the relay
// (relay-passthrough.ts). The ClientHello must come within HELLO_TIMEOUT_MS, as a handshake must.

/** How long a client has to send its first TLS record, ms. */
const HELLO_TIMEOUT_MS = 10_000;

/**
 * Serves one passed-through connection: its ClientHello is back in the socket, unread;
 * `relayed`: the client as the instance it reached saw it, when another instance relayed it.
 */
export type ServePassthrough = (
  session: LiveSession,
  socket: Socket,
  serverName: string,
  relayed?: RawClient,
) => void;

/**
 * Puts the passthrough in front of `server` (an HTTPS server, not listening yet): its own
 * connection handlers (TLS) run only for connections that are not passed through.
 */
export function withTlsPassthrough(
  server: Server,
  deps: {
    registry: SessionRegistry;
    logger: Logger;
    serve: ServePassthrough;
    /** Carries a connection to another instance's TLS endpoint `name`; false: none such. */
    relay?: (name: string, socket: Socket) => Promise<boolean>;
  },
): Server {
  const terminate = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  const tls = (socket: Socket) => {
    for (const listener of terminate) listener.call(server, socket);
  };
  /** A name no session here serves: another instance's TLS endpoint, or terminated here. */
  const elsewhere = (name: string, socket: Socket) =>
    deps.relay!(name, socket).then(
      (relayed) => relayed || tls(socket),
      (error: unknown) => {
        deps.logger.error({ err: error, name }, 'edge: TLS endpoint look-up failed');
        tls(socket);
      },
    );
  server.on('connection', (socket: Socket) => {
    readFirstRecord(socket).then(
      (record) => {
        if (socket.destroyed) return;
        socket.unshift(record);
        const name = clientHelloServerName(record);
        const session = name === undefined ? undefined : deps.registry.byHost(name);
        if (session?.passthroughTls === true) return deps.serve(session, socket, name!);
        if (session === undefined && name !== undefined && deps.relay !== undefined) {
          return void elsewhere(name, socket);
        }
        tls(socket);
      },
      (error: Error) => {
        deps.logger.debug({ err: error }, 'edge: no ClientHello');
        socket.destroy();
      },
    );
  });
  return server;
}

/** The socket's first TLS record (or what came of it when it is none), the socket paused. */
function readFirstRecord(socket: Socket): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let head = Buffer.alloc(0);
    const timer = setTimeout(() => done(new Error('no ClientHello in time')), HELLO_TIMEOUT_MS);
    function done(error?: Error) {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
      if (error === undefined) resolve(head);
      else reject(error);
    }
    function onData(chunk: Buffer) {
      head = Buffer.concat([head, chunk]);
      const size = firstRecordSize(head);
      if (size === undefined || head.length >= size) done();
    }
    const onClose = () => done(new Error('closed before its ClientHello'));
    socket.on('data', onData);
    socket.once('close', onClose);
  });
}
