import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex, Readable } from 'node:stream';
import type { Config } from '../../config/load.ts';
import type { ConnectionLimits } from '../../shared/http/connection-limits.ts';
import type { Logger } from '../../shared/logger.ts';
import type { EndpointPolicies } from '../policy/index.ts';
import type { DecideEndpointIp } from '../sessions/ip-allowed.ts';
import type { SessionRegistry } from '../sessions/registry.ts';
import { errorPage, refuseUpgrade } from './edge-answers.ts';
import { edgeListeners, httpsServer } from './edge-listeners.ts';
import type { RelayTo } from './endpoint-chain.ts';
import { createSessionFinder } from './find-session.ts';
import { hostOf, misdirectedFrom, type Peer, peerOf } from './peer.ts';
import type { EdgePublisher } from './publisher.ts';
import { requestRecorder } from './record-event.ts';
import type { EdgeRelay } from './relay-client.ts';
import { acceptPassthrough, type RelayedPassthrough } from './relay-passthrough.ts';
import { targetRefusal } from './request-target.ts';
import { type RequestSteps, serveRequest } from './serve-request.ts';
import { serveUpgrade } from './serve-upgrade.ts';
import type { SniCertificates } from './sni-certificates.ts';
import { agentStreams } from './stream-pool.ts';
import { serveRawConnection } from './tcp-endpoint.ts';
import { type ServePassthrough, withTlsPassthrough } from './tls-passthrough.ts';

// The edge (EDGE_HTTP_PORT, and EDGE_HTTPS_PORT with a certificate chosen by SNI): a request's
// Host (or its absolute-form target's authority) names the live session that serves it; the
// request goes to the agent through a stream of its session and the answer streams back. Each
// completed request becomes an http_request_complete.v0 of the session's account. Two Host
// fields or a target that is not a path nor an http(s) URL: 400; no session: 502; an agent that
// does not answer within EDGE_RESPONSE_TIMEOUT_MS: 504, or answers a status HTTP does not have:
// 502; over HTTPS, a Host other than the TLS server name: 421. A WebSocket (an Upgrade) is one
// completed request too, reported when its connection closes. A TLS endpoint's connections
// are passed through unterminated on the HTTPS listener (tls-passthrough.ts).
// This file is the front door and the wiring; the steps are serve-request.ts's.

export interface EdgeDeps {
  config: Config;
  logger: Logger;
  registry: SessionRegistry;
  publisher: EdgePublisher;
  /** `endpoints` IP restrictions; absent: not checked (ip_policy.decision `invalid`). */
  endpointIp?: DecideEndpointIp;
  /** The certificates of the HTTPS listener; absent: no HTTPS listener. */
  sni?: SniCertificates;
  /** Relays requests for hostnames other instances serve; absent: those are 502. */
  relay?: EdgeRelay;
  /** MAX_CONNECTIONS of the HTTP and HTTPS listeners, within the open-file limit. */
  connectionLimits: ConnectionLimits;
  /** The cloud endpoints whose Traffic Policy runs for their hostname; absent: none. */
  policies?: EndpointPolicies;
}

export type { Peer };

export interface Edge {
  /** The HTTP listener's port (EDGE_HTTP_PORT), when it runs. */
  port: number | undefined;
  /** The HTTPS listener's port (EDGE_HTTPS_PORT), when it runs. */
  httpsPort: number | undefined;
  /** Serves a request another instance relayed, as if its client had connected here. */
  serveRelayed(request: IncomingMessage, response: ServerResponse, peer: Peer): void;
  /** Serves an Upgrade request another instance relayed. */
  upgradeRelayed(request: IncomingMessage, socket: Duplex, head: Buffer, peer: Peer): void;
  /** Serves a TLS endpoint's connection another instance relayed (relay-passthrough.ts). */
  passthroughRelayed(socket: Duplex, head: Buffer, facts: RelayedPassthrough): void;
  /**
   * Stops accepting and lets requests in flight finish for up to `graceMs` (then cuts them and
   * any WebSocket), and waits until their events are durable.
   */
  close(graceMs: number): Promise<void>;
}

/** The steps of a request, wired once for the edge. */
function requestSteps(deps: EdgeDeps): RequestSteps {
  const { config, logger } = deps;
  /** A throw from a request's handling inside a protocol's parser: that request's stream ends. */
  const onFault = (error: unknown) =>
    logger.warn({ err: error }, 'edge: a request failed inside its stream; it alone ends');
  return {
    finder: createSessionFinder(deps),
    internalElsewhere: deps.relay && ((accountId) => deps.relay!.internalElsewhere(accountId)),
    // The edge's own address on the connection is the originator of the agent's stream.
    streams: (session, peer) =>
      agentStreams({
        source: session,
        origin: { ip: config.host, port: peer.conn.serverPort },
        onFault,
      }),
    record: requestRecorder(deps.publisher),
    policies: deps.policies,
    timeoutMs: config.edgeResponseTimeoutMs,
    logger,
  };
}

export async function startEdge(deps: EdgeDeps): Promise<Edge> {
  const { config, logger } = deps;
  const steps = requestSteps(deps);
  const connectedAt = new WeakMap<Socket, number>();
  const peer = (socket: Socket, host: string) =>
    peerOf(socket, host, connectedAt.get(socket) ?? Date.now());
  const failed = (error: unknown) => logger.error({ err: error }, 'edge: serving failed');

  function onRequest(request: IncomingMessage, response: ServerResponse) {
    const refusal = targetRefusal(request);
    if (refusal !== undefined) {
      request.resume();
      return errorPage(response, 400, refusal);
    }
    const host = hostOf(request);
    const sni = misdirectedFrom(request.socket, host);
    if (sni !== undefined) {
      request.resume();
      return errorPage(response, 421, `This connection is for ${sni}, not ${host}.`);
    }
    const from = peer(request.socket, host);
    const relay =
      deps.relay &&
      ((key: string, body?: Readable) => deps.relay!.request(key, request, response, from, body));
    serveRequest(steps, host, request, response, from, relay).catch(failed);
  }

  const upgraded = new Set<Duplex>();
  function onUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer) {
    if (targetRefusal(request) !== undefined) return refuseUpgrade(socket, 400, 'Bad Request');
    const host = hostOf(request);
    if (misdirectedFrom(request.socket, host) !== undefined) {
      return refuseUpgrade(socket, 421, 'Misdirected Request');
    }
    const from = peer(request.socket, host);
    const relay =
      deps.relay && ((key: string) => deps.relay!.upgrade(key, request, socket, head, from));
    upgrade(host, request, socket, head, from, relay);
  }

  function upgrade(
    host: string,
    request: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    from: Peer,
    relay: RelayTo | undefined,
  ) {
    upgraded.add(socket);
    socket.once('close', () => upgraded.delete(socket));
    serveUpgrade(steps, host, request, socket, head, from, relay).catch(failed);
  }

  const listeners = edgeListeners({
    host: config.host,
    limits: deps.connectionLimits,
    onServer: (server: Server) => {
      server.on('request', onRequest);
      server.on('upgrade', onUpgrade);
    },
  });
  const serverOptions = { keepAliveTimeout: config.keepAliveTimeoutMs };
  try {
    const plain = createServer(serverOptions);
    plain.on('connection', (socket: Socket) => connectedAt.set(socket, Date.now()));
    const port =
      config.edgeHttpPort === undefined
        ? undefined
        : await listeners.listen(plain, config.edgeHttpPort, 'edge_http');
    const onSecure = (socket: Socket) => connectedAt.set(socket, Date.now());
    const passthrough: ServePassthrough = (session, socket, serverName, relayed) => {
      upgraded.add(socket);
      socket.once('close', () => upgraded.delete(socket));
      const target = { serverName, serverPort: relayed?.serverPort ?? socket.localPort ?? 0 };
      const endpointIp = deps.endpointIp ?? (async () => 'invalid');
      serveRawConnection(session, target, socket, { ...deps, endpointIp }, relayed).catch(
        (error: unknown) => {
          logger.debug({ err: error }, 'edge: TLS passthrough failed');
          socket.destroy();
        },
      );
    };
    const httpsPort =
      config.edgeHttpsPort === undefined || deps.sni === undefined
        ? undefined
        : await listeners.listen(
            withTlsPassthrough(httpsServer(deps.sni, serverOptions, onSecure, logger), {
              registry: deps.registry,
              logger,
              serve: passthrough,
              relay: deps.relay && ((name, socket) => deps.relay!.passthrough(name, socket)),
            }),
            config.edgeHttpsPort,
            'edge_https',
          );
    return {
      port,
      httpsPort,
      // A relayed request is never relayed again: its owner answers 502 if the session is gone.
      serveRelayed: (request, response, from) =>
        void serveRequest(steps, hostOf(request), request, response, from, undefined).catch(failed),
      upgradeRelayed: (request, socket, head, from) =>
        upgrade(hostOf(request), request, socket, head, from, undefined),
      passthroughRelayed: (socket, head, { serverName, client }) =>
        acceptPassthrough(deps.registry.byHost(serverName), socket, head, (session, raw) =>
          passthrough(session, raw, serverName, client),
        ),
      async close(graceMs) {
        const closing = listeners.close(graceMs);
        for (const socket of upgraded) socket.destroy();
        await Promise.all(closing);
        await deps.publisher.drain();
      },
    };
  } catch (error) {
    await Promise.all(listeners.close(0));
    throw error;
  }
}
