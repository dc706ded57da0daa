import type { Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import {
  type ConnectionLimits,
  capServer,
  type ListenerName,
} from '../../shared/http/connection-limits.ts';
import { tooManyConnections } from '../../shared/http/connections.ts';
import type { Logger } from '../../shared/logger.ts';
import type { SniCertificates } from './sni-certificates.ts';

// The edge's listeners: each holds MAX_CONNECTIONS (beyond, HTTP answers 503
// ERR_TOO_MANY_CONNECTIONS and HTTPS closes the connection: a handshake per refused connection
// would spend what the cap saves); the HTTPS one has no default certificate, each handshake's is
// chosen by its server name, and a name no certificate covers fails the handshake.

/** The listeners of the edge and how they stop. */
export interface EdgeListeners {
  /** Serves `server` at `port` (on `host`); its port once listening. */
  listen(server: Server, port: number, name: ListenerName): Promise<number>;
  /** Stops accepting; requests in flight get `graceMs`, then their connections are cut. */
  close(graceMs: number): Promise<unknown>[];
}

export function edgeListeners(deps: {
  host: string;
  limits: ConnectionLimits;
  onServer: (server: Server) => void;
}): EdgeListeners {
  const servers: Server[] = [];
  return {
    async listen(server, port, name) {
      servers.push(server);
      deps.onServer(server);
      const { limits } = deps;
      capServer(server, limits.listener(name), (socket, why) =>
        name === 'edge_http'
          ? limits.turnAway(socket, tooManyConnections(why, limits.perListener), 'after-data')
          : limits.turnAway(socket),
      );
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, deps.host, () => resolve());
      });
      return (server.address() as AddressInfo).port;
    },
    close(graceMs) {
      return servers.map((server) => {
        const closed = new Promise((resolve) => server.close(resolve));
        server.closeIdleConnections();
        const grace = setTimeout(() => server.closeAllConnections(), graceMs);
        return closed.then(() => clearTimeout(grace));
      });
    },
  };
}

/** The HTTPS listener: no default certificate, each handshake's chosen by its server name. */
export function httpsServer(
  sni: SniCertificates,
  options: { keepAliveTimeout: number },
  onSecure: (socket: Socket) => void,
  logger: Logger,
): Server {
  const server = createHttpsServer({
    ...options,
    SNICallback: (serverName, done) => {
      sni.contextFor(serverName).then(
        (context) => done(null, context),
        (error: Error) => {
          logger.error({ err: error, serverName }, 'edge: certificate look-up failed');
          done(error);
        },
      );
    },
  });
  // The request's socket is the TLS one, which exists from the handshake's end.
  server.on('secureConnection', onSecure);
  server.on('tlsClientError', (error: Error) =>
    logger.debug({ err: error }, 'edge: TLS handshake failed'),
  );
  return server as unknown as Server;
}
