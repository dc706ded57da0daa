import type { Socket } from 'node:net';
import { createServer, type TLSSocket } from 'node:tls';
import type { ConnectionLimits } from '../../shared/http/connection-limits.ts';
import { acceptOn, type EarlyListener } from '../../shared/net/early-listener.ts';
import { STOP_REASONS } from '../sessions/session-events.ts';
import {
  type AgentConnection,
  type AgentConnectionDeps,
  serveAgentConnection,
} from './agent-connection.ts';
import type { AgentCertificates } from './agent-tls.ts';
import { assignedPortMemory } from './assigned-ports.ts';

// The listener ngrok's own agents and SDKs connect to (AGENT_PORT): TLS 1.2 or later, the
// certificate chosen by the name the agent dialled (agent-tls.ts; a name nothing covers fails the
// handshake), then ngrok's protocol over muxado (agent-connection.ts). It holds
// MAX_CONNECTIONS; at shutdown every tunnel ends with its stop event and each agent hears
// GOAWAY (it reconnects, to this instance once it is back or to another).

export interface NgrokListenerDeps extends AgentConnectionDeps {
  certificates: AgentCertificates;
  connectionLimits: ConnectionLimits;
  /** AGENT_PORT as the process bound it at its start (main.ts); absent, the listener binds it. */
  early?: EarlyListener;
}

export interface NgrokListener {
  port: number;
  /** Stops accepting, ends every tunnel (stop events) and every connection (GOAWAY). */
  close(): Promise<void>;
}

/** How long a client has to finish the TLS handshake, ms. */
const HANDSHAKE_TIMEOUT_MS = 10_000;

export async function startNgrokListener(deps: NgrokListenerDeps): Promise<NgrokListener> {
  const { config, logger } = deps;
  const limit = deps.connectionLimits.listener('agent');
  const connections = new Set<AgentConnection>();
  const sockets = new Set<Socket>();
  const connectionDeps = { ...deps, assignedPorts: assignedPortMemory() };
  const server = createServer({
    minVersion: 'TLSv1.2',
    handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
    SNICallback: (serverName, done) => {
      deps.certificates.contextFor(serverName).then(
        (context) => done(null, context),
        (error: Error) => {
          logger.error({ err: error, serverName }, 'agent listener: certificate look-up failed');
          done(error);
        },
      );
    },
  });
  server.on('connection', (socket: Socket) => {
    if (limit.admit(socket) !== undefined) return void socket.destroy();
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    // Proxy streams carry request/response traffic: no Nagle delay on small writes.
    socket.setNoDelay(true);
  });
  server.on('secureConnection', (socket: TLSSocket) => {
    const connection = serveAgentConnection(socket, connectionDeps);
    connections.add(connection);
    socket.once('close', () => connections.delete(connection));
  });
  server.on('tlsClientError', (error: Error) =>
    logger.debug({ err: error }, 'agent listener: TLS handshake failed'),
  );
  const accepting = await acceptOn(server, deps.early, config.host, config.agentPort);
  return {
    port: accepting.port,
    async close() {
      accepting.stop();
      await Promise.all([...connections].map((c) => c.close(STOP_REASONS.shutdown)));
      setTimeout(() => {
        for (const socket of sockets) socket.destroy();
      }, 1000).unref();
    },
  };
}
