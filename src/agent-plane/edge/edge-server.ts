import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { Config } from '../../config/load.ts';
import {
  type ConnectionLimits,
  capServer,
  type ListenerName,
} from '../../shared/http/connection-limits.ts';
import { tooManyConnections } from '../../shared/http/connections.ts';
import type { Logger } from '../../shared/logger.ts';
import type { DecideEndpointIp } from '../sessions/ip-allowed.ts';
import type { LiveSession, SessionRegistry } from '../sessions/registry.ts';
import { channelAgent, channelConnector } from './channel-agent.ts';
import { CLIENT_CLOSED_REQUEST, errorPage, refuseUpgrade } from './edge-answers.ts';
import { type Channels, forwardRequest } from './forward-request.ts';
import { forwardedHeaders } from './proxy-headers.ts';
import type { EdgePublisher } from './publisher.ts';
import type { EdgeRelay } from './relay-client.ts';
import { targetRefusal } from './request-target.ts';
import type { SniCertificates } from './sni-certificates.ts';
import { type CompletedRequest, publishRequestOf, type TlsFacts } from './traffic-event.ts';
import { tunnelUpgrade, type UpgradeOutcome } from './upgrade-tunnel.ts';

// The edge (EDGE_HTTP_PORT, and EDGE_HTTPS_PORT with a certificate chosen by SNI): a request's
// Host (or its absolute-form target's authority) names the live session that serves it; the
// request goes to the agent through an SSH channel and the answer streams back. Each completed
// request becomes an http_request_complete.v0 of the session's account. Two Host fields or a
// target that is not a path nor an http(s) URL: 400; no session: 502; an agent that does not
// answer within EDGE_RESPONSE_TIMEOUT_MS: 504, or answers a status HTTP does not have: 502;
// over HTTPS, a Host other than the TLS server name: 421.
// A server name no certificate covers fails the handshake (alert handshake_failure): the
// listener has no default certificate to fall back on.
// Each listener holds MAX_CONNECTIONS: beyond, HTTP answers 503 ERR_TOO_MANY_CONNECTIONS and
// HTTPS closes the connection (a handshake per refused connection would spend what the cap saves).
// A WebSocket (an Upgrade) is one completed request too, reported when its connection closes.

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
}

/** Where a request came from: the client's connection, read on the instance it reached. */
export interface Peer {
  conn: CompletedRequest['conn'];
  tls: TlsFacts | undefined;
}

export interface Edge {
  /** The HTTP listener's port (EDGE_HTTP_PORT), when it runs. */
  port: number | undefined;
  /** The HTTPS listener's port (EDGE_HTTPS_PORT), when it runs. */
  httpsPort: number | undefined;
  /** Serves a request another instance relayed, as if its client had connected here. */
  serveRelayed(request: IncomingMessage, response: ServerResponse, peer: Peer): void;
  /** Serves an Upgrade request another instance relayed. */
  upgradeRelayed(request: IncomingMessage, socket: Duplex, head: Buffer, peer: Peer): void;
  /**
   * Stops accepting and lets requests in flight finish for up to `graceMs` (then cuts them and
   * any WebSocket), and waits until their events are durable.
   */
  close(graceMs: number): Promise<void>;
}

/** The Host header's name, lower-cased, without a port. */
function hostOf(request: IncomingMessage): string {
  const host = (request.headers.host ?? '').toLowerCase();
  return host.startsWith('[') ? host : host.replace(/:\d+$/, '');
}

/** Counts the bytes that pass through a stream. */
function counted(stream: IncomingMessage): { bytes: number } {
  const tally = { bytes: 0 };
  stream.on('data', (chunk: Buffer) => {
    tally.bytes += chunk.length;
  });
  return tally;
}

/** What the TLS session of a connection was (undefined over plain HTTP). */
function tlsFactsOf(socket: Socket): TlsFacts | undefined {
  const tls = socket as TLSSocket;
  if (tls.encrypted !== true) return undefined;
  // Empty unless the client sent one: the edge does not ask for client certificates.
  const peer = tls.getPeerCertificate();
  return {
    version: tls.getProtocol() ?? '',
    cipherSuite: tls.getCipher()?.standardName ?? '',
    clientCert: peer?.serialNumber
      ? { serialNumber: peer.serialNumber, subjectCn: String(peer.subject?.CN ?? '') }
      : undefined,
  };
}

/**
 * The TLS server name of a connection whose certificate is not for `host` (421: the certificate
 * checked was another name's, maybe another account's); undefined when they agree or on HTTP.
 */
function misdirectedFrom(socket: Socket, host: string): string | undefined {
  const tls = socket as TLSSocket;
  if (tls.encrypted !== true) return undefined;
  const sni = typeof tls.servername === 'string' ? tls.servername.toLowerCase() : '';
  return sni === host ? undefined : sni;
}

export async function startEdge(deps: EdgeDeps): Promise<Edge> {
  const { config, logger, registry, publisher } = deps;
  const connectedAt = new WeakMap<Socket, number>();
  const serverOptions = { keepAliveTimeout: config.keepAliveTimeoutMs };
  const servers: Server[] = [];
  /** The edge's own address on the connection, as the originator of the agent's channel. */
  const origin = (peer: Peer) => ({ ip: config.host, port: peer.conn.serverPort });
  /** The client's connection as this instance sees it (read now: a closed socket forgets). */
  const peerOf = (socket: Socket, host: string): Peer => ({
    conn: {
      clientIp: socket.remoteAddress ?? '',
      serverIp: socket.localAddress ?? '',
      serverName: host,
      serverPort: socket.localPort ?? 0,
      startMs: connectedAt.get(socket) ?? Date.now(),
    },
    tls: tlsFactsOf(socket),
  });

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
    serve(host, request, response, peerOf(request.socket, host), deps.relay);
  }

  /** Forwards to this instance's session for `host`, else through `relay` to its owner's. */
  function serve(
    host: string,
    request: IncomingMessage,
    response: ServerResponse,
    peer: Peer,
    relay: EdgeRelay | undefined,
  ) {
    const session = registry.byHost(host);
    if (session === undefined) {
      const relayed = relay?.request(host, request, response, peer) ?? Promise.resolve(false);
      relayed.then(
        (done) => {
          if (done) return;
          request.resume();
          errorPage(response, 502, `No agent is connected for ${host || 'this host'}.`);
        },
        (error: unknown) => {
          logger.error({ err: error, host }, 'edge: relay look-up failed');
          request.resume();
          errorPage(response, 502, `The agent for ${host} cannot be looked up; retry.`);
        },
      );
      return;
    }
    admit(session, peer).then(
      (decision) => forward(session, host, request, response, decision, peer),
      (error: unknown) => {
        logger.error({ err: error }, 'edge: IP restriction check failed');
        errorPage(response, 503, 'The IP restriction check failed; retry.');
      },
    );
  }

  /** A throw from a request's handling inside ssh2's parser: that request's channel ends. */
  const onFault = (error: unknown) =>
    logger.warn({ err: error }, 'edge: a request failed inside its SSH channel; it alone ends');

  /** ip_policy.decision: the one call site of `endpoints` IP restrictions. */
  async function admit(session: LiveSession, peer: Peer): Promise<string> {
    const { accountId } = session.facts.credential;
    return (await deps.endpointIp?.(accountId, peer.conn.clientIp)) ?? 'invalid';
  }

  /** The channels of `session`: its pool, and fresh ones for retries and upgrades. */
  function channelsOf(session: LiveSession, peer: Peer): Channels {
    const source = { session, origin: origin(peer), onFault };
    return { pool: channelAgent(source), fresh: channelConnector(source) };
  }

  function forward(
    session: LiveSession,
    host: string,
    request: IncomingMessage,
    response: ServerResponse,
    ipDecision: string,
    peer: Peer,
  ): void {
    const requestBody = counted(request);
    let answered: ReturnType<typeof forwardRequest> | undefined;
    // Every answer, the agent's or the edge's own 403/502/504, is one completed request; a
    // request whose client left before any answer is a 499.
    const completed = () =>
      report(session, peer, request, {
        requestBytes: requestBody.bytes,
        response: {
          statusCode: response.headersSent ? response.statusCode : CLIENT_CLOSED_REQUEST,
          headers: answered?.headers ?? response.getHeaders(),
          bodyLength: answered?.bodyBytes ?? 0,
        },
        connectionReused: answered?.reused ?? false,
        ipDecision,
      });
    if (response.closed) return void completed();
    response.once('close', completed);
    if (ipDecision === 'block') {
      request.resume();
      errorPage(response, 403, 'Your address is not allowed by an IP restriction.');
      return;
    }
    // The client left while its address was checked: nothing goes to the agent.
    if (request.socket.destroyed) return;
    answered = forwardRequest(channelsOf(session, peer), request, response, {
      host,
      headers: forwardedHeaders(request, host, peer),
      timeoutMs: config.edgeResponseTimeoutMs,
      logger,
    });
  }

  /** Publishes one completed request (or WebSocket connection) of the session's account. */
  function report(
    session: LiveSession,
    { conn, tls }: Peer,
    request: IncomingMessage,
    answer: Pick<CompletedRequest, 'response' | 'connectionReused' | 'ipDecision'> & {
      requestBytes: number;
    },
  ): void {
    publisher.publish(
      publishRequestOf({
        accountId: session.facts.credential.accountId,
        conn,
        tls,
        request: {
          method: request.method ?? '',
          host: conn.serverName,
          target: request.url ?? '/',
          headers: request.headers,
          bodyLength: answer.requestBytes,
        },
        response: answer.response,
        connectionReused: answer.connectionReused,
        ipDecision: answer.ipDecision,
        endMs: Date.now(),
      }),
    );
  }

  const upgraded = new Set<Duplex>();
  function onUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer) {
    if (targetRefusal(request) !== undefined) return refuseUpgrade(socket, 400, 'Bad Request');
    const host = hostOf(request);
    if (misdirectedFrom(request.socket, host) !== undefined) {
      return refuseUpgrade(socket, 421, 'Misdirected Request');
    }
    upgrade(host, request, socket, head, peerOf(request.socket, host), deps.relay);
  }

  /** An Upgrade for `host`: to this instance's session, else through `relay` to its owner's. */
  function upgrade(
    host: string,
    request: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    peer: Peer,
    relay: EdgeRelay | undefined,
  ) {
    upgraded.add(socket);
    socket.once('close', () => upgraded.delete(socket));
    // Bytes the client sends before the tunnel exists wait in the socket (the pipe resumes it).
    socket.pause();
    const badGateway = () => refuseUpgrade(socket, 502, 'Bad Gateway');
    const session = registry.byHost(host);
    if (session === undefined) {
      const relayed = relay?.upgrade(host, request, socket, head, peer) ?? Promise.resolve(false);
      relayed.then((done) => done || badGateway(), badGateway);
      return;
    }
    admit(session, peer).then(
      (ipDecision) => {
        const done = (statusCode: number, outcome?: UpgradeOutcome) =>
          report(session, peer, request, {
            requestBytes: outcome?.requestBytes ?? 0,
            response: {
              statusCode,
              headers: outcome?.headers ?? {},
              bodyLength: outcome?.responseBytes ?? 0,
            },
            connectionReused: false,
            ipDecision,
          });
        if (ipDecision === 'block') {
          refuseUpgrade(socket, 403, 'Forbidden');
          return done(403);
        }
        const options = {
          connect: channelsOf(session, peer).fresh,
          host,
          headers: forwardedHeaders(request, host, peer, true),
          timeoutMs: config.edgeResponseTimeoutMs,
          logger,
        };
        tunnelUpgrade(request, socket, head, options, (outcome) =>
          done(outcome.statusCode, outcome),
        );
      },
      (error: unknown) => {
        logger.error({ err: error }, 'edge: IP restriction check failed');
        refuseUpgrade(socket, 503, 'Service Unavailable');
      },
    );
  }

  /** Serves the edge on `server` at `port`; its port once listening. */
  async function listen(server: Server, port: number, name: ListenerName): Promise<number> {
    servers.push(server);
    server.on('request', onRequest);
    server.on('upgrade', onUpgrade);
    const limits = deps.connectionLimits;
    capServer(server, limits.listener(name), (socket, why) =>
      name === 'edge_http'
        ? limits.turnAway(name, socket, tooManyConnections(why, limits.perListener), 'after-data')
        : limits.turnAway(name, socket),
    );
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, config.host, () => resolve());
    });
    return (server.address() as AddressInfo).port;
  }

  function close(graceMs: number): Promise<void>[] {
    return servers.map((server) => {
      const closed = new Promise((resolve) => server.close(resolve));
      server.closeIdleConnections();
      const grace = setTimeout(() => server.closeAllConnections(), graceMs);
      return closed.then(() => clearTimeout(grace));
    });
  }

  try {
    const plain = createServer(serverOptions);
    plain.on('connection', (socket: Socket) => connectedAt.set(socket, Date.now()));
    const port =
      config.edgeHttpPort === undefined
        ? undefined
        : await listen(plain, config.edgeHttpPort, 'edge_http');
    const httpsPort =
      config.edgeHttpsPort === undefined || deps.sni === undefined
        ? undefined
        : await listen(
            httpsServer(deps.sni, connectedAt, serverOptions),
            config.edgeHttpsPort,
            'edge_https',
          );
    return {
      port,
      httpsPort,
      // A relayed request is never relayed again: its owner answers 502 if the session is gone.
      serveRelayed: (request, response, peer) =>
        serve(hostOf(request), request, response, peer, undefined),
      upgradeRelayed: (request, socket, head, peer) =>
        upgrade(hostOf(request), request, socket, head, peer, undefined),
      async close(graceMs) {
        const closing = close(graceMs);
        for (const socket of upgraded) socket.destroy();
        await Promise.all(closing);
        await publisher.drain();
      },
    };
  } catch (error) {
    await Promise.all(close(0));
    throw error;
  }

  /** The HTTPS listener: no default certificate, each handshake's chosen by its server name. */
  function httpsServer(
    sni: SniCertificates,
    startedAt: WeakMap<Socket, number>,
    options: typeof serverOptions,
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
    server.on('secureConnection', (socket: Socket) => startedAt.set(socket, Date.now()));
    server.on('tlsClientError', (error: Error) =>
      logger.debug({ err: error }, 'edge: TLS handshake failed'),
    );
    return server as unknown as Server;
  }
}
