import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../../shared/logger.ts';
import type { SessionRegistry } from '../sessions/registry.ts';
import { STOP_REASONS } from '../sessions/session-events.ts';
import type { Edge } from './edge-server.ts';
import { RELAY_HEADER, type RelayAuth } from './relay-auth.ts';
import { type RelayedRequest, type RelayedStop, STOP_PATH } from './relay-client.ts';
import { COMMAND_PATH, type RelayedCommand, serveRelayedCommand } from './relay-command.ts';
import { type RelayedPassthrough, TLS_PATH } from './relay-passthrough.ts';

// The owning side: the listener at this instance's INTERNAL_URL. It serves only requests other
// instances signed (relay-auth.ts): edge requests for this instance's sessions, served by the
// edge as its own with the client's connection facts they carry, TLS endpoints' raw
// connections (an Upgrade to TLS_PATH), stop requests and commands.

/** The running listener. */
export interface RelayListener {
  port: number;
  /** Stops accepting; cuts what is still open after `graceMs`. */
  close(graceMs: number): Promise<void>;
}

/** What the listener needs. */
export interface RelayListenerDeps {
  host: string;
  port: number;
  auth: RelayAuth;
  edge: Edge;
  registry: SessionRegistry;
  logger: Logger;
}

type Relayed = RelayedRequest | RelayedStop | RelayedCommand | RelayedPassthrough;

const REFUSAL = 'This listener serves only requests relayed by instances of this service.\n';

/** Listens at INTERNAL_URL's port. */
export async function startRelayListener(deps: RelayListenerDeps): Promise<RelayListener> {
  const { auth, edge, registry, logger } = deps;
  /**
   * The request's signed facts, the header removed so that it never reaches an agent. An edge
   * request must be the one signed: its request line, Host and declared body length (Node's
   * parser reads a body of exactly its Content-Length).
   */
  const factsOf = (request: IncomingMessage): Relayed | undefined => {
    const facts = auth.open<Relayed>(request.headers[RELAY_HEADER], registry.owner.id);
    delete request.headers[RELAY_HEADER];
    if (facts?.kind !== 'edge') return facts;
    const signed =
      facts.method === request.method &&
      facts.target === request.url &&
      facts.host === (request.headers.host ?? '') &&
      facts.length === (request.headers['content-length'] ?? null);
    return signed ? facts : undefined;
  };

  function onRequest(request: IncomingMessage, response: ServerResponse) {
    const facts = factsOf(request);
    if (facts?.kind === 'edge') return edge.serveRelayed(request, response, facts.peer);
    request.resume();
    if (facts?.kind === 'stop' && request.url === STOP_PATH) {
      stop(facts).then(
        (found) => response.writeHead(found ? 204 : 404).end(),
        (error: unknown) => {
          logger.error({ err: error }, 'relay: stop failed');
          response.writeHead(500).end();
        },
      );
      return;
    }
    if (facts?.kind === 'command' && request.url === COMMAND_PATH) {
      return serveRelayedCommand(registry, facts, response);
    }
    response.writeHead(403, { 'content-type': 'text/plain; charset=utf-8' }).end(REFUSAL);
  }

  async function stop({ session, principal }: RelayedStop): Promise<boolean> {
    const live = registry.get(principal.accountId, session);
    if (live === undefined) return false;
    await live.end(STOP_REASONS.api, principal);
    return true;
  }

  function onUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer) {
    const facts = factsOf(request);
    if (facts?.kind === 'edge') return edge.upgradeRelayed(request, socket, head, facts.peer);
    if (facts?.kind === 'tls' && request.url === TLS_PATH) {
      return edge.passthroughRelayed(socket, head, facts);
    }
    socket.end('HTTP/1.1 403 Forbidden\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
  }

  const server: Server = createServer();
  server.on('request', onRequest);
  server.on('upgrade', onUpgrade);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(deps.port, deps.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    async close(graceMs) {
      const closed = new Promise((resolve) => server.close(resolve));
      server.closeIdleConnections();
      const grace = setTimeout(() => server.closeAllConnections(), graceMs);
      await closed;
      clearTimeout(grace);
    },
  };
}
