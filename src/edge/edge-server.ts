import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { IpAllowed } from '../agents/ip-allowed.ts';
import { type LiveSession, type SessionRegistry, TOO_MANY_CHANNELS } from '../agents/registry.ts';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import { channelAgent } from './channel-agent.ts';
import type { EdgePublisher } from './publisher.ts';
import { type CompletedRequest, publishRequestOf } from './traffic-event.ts';

// The edge (EDGE_HTTP_PORT): a request's Host names the live session that serves it; the request
// goes to the agent through an SSH channel and the answer streams back. Each completed request
// becomes an http_request_complete.v0 of the session's account. No session: 502; an agent that
// does not answer within EDGE_RESPONSE_TIMEOUT_MS: 504.

export interface EdgeDeps {
  config: Config;
  logger: Logger;
  registry: SessionRegistry;
  publisher: EdgePublisher;
  /** Enforced `endpoints` IP restrictions; absent: not checked (ip_policy.decision `invalid`). */
  ipAllowed?: IpAllowed;
}

export interface Edge {
  port: number;
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

/** The request's headers for the agent, with who asked (X-Forwarded-For, -Host, -Proto). */
function forwardedHeaders(request: IncomingMessage, host: string): IncomingMessage['headers'] {
  const client = request.socket.remoteAddress ?? '';
  const before = request.headers['x-forwarded-for'];
  return {
    ...request.headers,
    'x-forwarded-for': before === undefined ? client : `${before}, ${client}`,
    'x-forwarded-host': host,
    'x-forwarded-proto': 'http',
  };
}

/** A plain-text error page (the edge's own answers). */
function errorPage(response: ServerResponse, status: number, text: string): void {
  if (response.headersSent) {
    response.destroy();
    return;
  }
  response.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' });
  response.end(`${text}\n`);
}

/** Counts the bytes that pass through a stream. */
function counted(stream: IncomingMessage): { bytes: number } {
  const tally = { bytes: 0 };
  stream.on('data', (chunk: Buffer) => {
    tally.bytes += chunk.length;
  });
  return tally;
}

export async function startEdge(deps: EdgeDeps): Promise<Edge> {
  const { config, logger, registry, publisher } = deps;
  const connectedAt = new WeakMap<Socket, number>();
  const server: Server = createServer({ keepAliveTimeout: config.keepAliveTimeoutMs });
  server.on('connection', (socket: Socket) => connectedAt.set(socket, Date.now()));
  const origin = () => ({ ip: config.host, port: (server.address() as AddressInfo).port });

  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const host = hostOf(request);
    const session = registry.byHost(host);
    if (session === undefined) {
      request.resume();
      return errorPage(response, 502, `No agent is connected for ${host || 'this host'}.`);
    }
    admit(session, request).then(
      (decision) => forward(session, host, request, response, decision),
      (error: unknown) => {
        logger.error({ err: error }, 'edge: IP restriction check failed');
        errorPage(response, 503, 'The IP restriction check failed; retry.');
      },
    );
  });

  /** ip_policy.decision: the one call site of `endpoints` IP restrictions. */
  async function admit(session: LiveSession, request: IncomingMessage): Promise<string> {
    if (deps.ipAllowed === undefined) return 'invalid';
    const { accountId } = session.facts.credential;
    const ok = await deps.ipAllowed(accountId, 'endpoints', request.socket.remoteAddress ?? '');
    return ok ? 'allow' : 'block';
  }

  function forward(
    session: LiveSession,
    host: string,
    request: IncomingMessage,
    response: ServerResponse,
    ipDecision: string,
  ): void {
    const requestBody = counted(request);
    const socket = request.socket;
    // Read now: a closed socket forgets its addresses.
    const conn = {
      clientIp: socket.remoteAddress ?? '',
      serverIp: socket.localAddress ?? '',
      serverName: host,
      serverPort: socket.localPort ?? 0,
      startMs: connectedAt.get(socket) ?? Date.now(),
    };
    const seen = { headers: {} as IncomingMessage['headers'], bytes: 0, reused: false, ipDecision };
    // Every answer, the agent's or the edge's own 403/502/504, is one completed request.
    response.once('close', () => report(session, conn, request, response, requestBody.bytes, seen));
    if (ipDecision === 'block') {
      request.resume();
      errorPage(response, 403, 'Your address is not allowed by an IP restriction.');
      return;
    }
    const upstream = httpRequest({
      agent: channelAgent(session, origin()),
      method: request.method,
      path: request.url,
      headers: forwardedHeaders(request, host),
    });
    const timer = setTimeout(() => {
      upstream.destroy();
      errorPage(response, 504, `The agent for ${host} did not answer in time.`);
    }, config.edgeResponseTimeoutMs);
    upstream.on('response', (answer) => {
      clearTimeout(timer);
      seen.headers = answer.headers;
      seen.reused = upstream.reusedSocket;
      answer.on('data', (chunk: Buffer) => {
        seen.bytes += chunk.length;
      });
      response.writeHead(answer.statusCode ?? 502, answer.rawHeaders);
      answer.pipe(response);
    });
    upstream.on('error', (error) => {
      clearTimeout(timer);
      logger.debug({ err: error, host }, 'edge: agent request failed');
      const busy = (error as NodeJS.ErrnoException).code === TOO_MANY_CHANNELS;
      errorPage(
        response,
        busy ? 503 : 502,
        `The agent for ${host} is not reachable: ${error.message}.`,
      );
    });
    request.pipe(upstream);
  }

  function report(
    session: LiveSession,
    conn: CompletedRequest['conn'],
    request: IncomingMessage,
    response: ServerResponse,
    requestBytes: number,
    seen: {
      headers: IncomingMessage['headers'];
      bytes: number;
      reused: boolean;
      ipDecision: string;
    },
  ): void {
    publisher.publish(
      publishRequestOf({
        accountId: session.facts.credential.accountId,
        conn,
        request: {
          method: request.method ?? '',
          host: conn.serverName,
          target: request.url ?? '/',
          headers: request.headers,
          bodyLength: requestBytes,
        },
        response: {
          statusCode: response.statusCode,
          headers: Object.keys(seen.headers).length > 0 ? seen.headers : response.getHeaders(),
          bodyLength: seen.bytes,
        },
        connectionReused: seen.reused,
        ipDecision: seen.ipDecision,
        endMs: Date.now(),
      }),
    );
  }

  const upgraded = new Set<Duplex>();
  server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    upgraded.add(socket);
    socket.once('close', () => upgraded.delete(socket));
    const session = registry.byHost(hostOf(request));
    if (session === undefined) {
      socket.end('HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    session.openChannel(origin()).then(
      (channel) => tunnelUpgrade(request, socket, head, channel),
      () =>
        socket.end('HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\ncontent-length: 0\r\n\r\n'),
    );
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.edgeHttpPort, config.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    async close(graceMs) {
      const closed = new Promise((resolve) => server.close(resolve));
      server.closeIdleConnections();
      const grace = setTimeout(() => server.closeAllConnections(), graceMs);
      for (const socket of upgraded) socket.destroy();
      await closed;
      clearTimeout(grace);
      await publisher.drain();
    },
  };
}

/** A WebSocket (any Upgrade): the request head goes to the agent, then bytes flow both ways. */
function tunnelUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer, channel: Duplex) {
  const lines = [`${request.method} ${request.url} HTTP/1.1`];
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    lines.push(`${request.rawHeaders[i]}: ${request.rawHeaders[i + 1]}`);
  }
  channel.write(`${lines.join('\r\n')}\r\n\r\n`);
  if (head.length > 0) channel.write(head);
  channel.pipe(socket).pipe(channel);
  const end = () => {
    socket.destroy();
    channel.destroy();
  };
  socket.once('close', end);
  channel.once('close', end);
  socket.on('error', end);
  channel.on('error', end);
}
