import { createServer, type Server, type Socket } from 'node:net';
import type { Config } from '../../config/load.ts';
import type { ListenerLimit } from '../../shared/http/connection-limits.ts';
import type { Logger } from '../../shared/logger.ts';
import {
  connectionValues,
  createExchange,
  type EndpointPolicies,
  type Exchange,
  runPhase,
} from '../policy/index.ts';
import type { DecideEndpointIp } from '../sessions/ip-allowed.ts';
import type { LiveSession } from '../sessions/live-session.ts';
import type { EdgePublisher } from './publisher.ts';
import { splice } from './splice.ts';
import { combinedIpDecision, publishConnectionOf } from './traffic-event.ts';

// A TCP endpoint: the port of one of the account's reserved addresses, listened on while the
// session that bound it lives. Each connection is one stream to the agent, bytes both ways,
// and a tcp_connection_closed.v0 when it closes. An enforced `endpoints` IP restriction refuses
// a client by closing its connection (ip_policy.decision `block`); so does the on_tcp_connect
// of a cloud endpoint on the address (`tcp://host:port`, the same account's), which runs
// before the agent is dialled; so does the endpoint's MAX_CONNECTIONS (no event: nothing
// reached the agent).

export interface TcpEndpointDeps {
  config: Config;
  logger: Logger;
  publisher: EdgePublisher;
  endpointIp: DecideEndpointIp;
  /** The cloud endpoints whose on_tcp_connect runs on their address; absent: none. */
  policies?: EndpointPolicies;
  /** This endpoint's own MAX_CONNECTIONS. */
  limit: ListenerLimit;
}

/** An open endpoint; close() stops it and cuts its connections. */
export interface TcpEndpoint {
  close(): Promise<void>;
}

/** Listens on `port` for `session` (whose metadata is the reserved address). */
export async function openTcpEndpoint(
  session: LiveSession,
  address: { host: string; port: number },
  deps: TcpEndpointDeps,
): Promise<TcpEndpoint> {
  const connections = new Set<Socket>();
  const server: Server = createServer((socket) => {
    if (deps.limit.admit(socket) !== undefined) return void socket.destroy();
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
    const target = { serverName: address.host, serverPort: address.port };
    serveRawConnection(session, target, socket, deps).catch((error: unknown) => {
      deps.logger.debug({ err: error }, 'tcp endpoint connection failed');
      socket.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, deps.config.host, () => resolve());
  });
  return {
    close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of connections) socket.destroy();
      return closed;
    },
  };
}

/** What a raw connection needs: a TCP endpoint's deps; a TLS passthrough's have no policies. */
type RawConnectionDeps = Pick<TcpEndpointDeps, 'publisher' | 'endpointIp' | 'logger' | 'policies'>;

/**
 * Carries one client connection's bytes to `session` and back, unread (a TCP endpoint's, a TLS
 * endpoint's passed through), and reports it as a tcp_connection_closed.v0 once it closes.
 * `client`: the client's address, when `socket` is another instance's relay of its connection.
 */
export async function serveRawConnection(
  session: LiveSession,
  target: { serverName: string; serverPort: number },
  socket: Socket,
  deps: RawConnectionDeps,
  client = {
    ip: socket.remoteAddress ?? '',
    port: socket.remotePort ?? 0,
    serverIp: socket.localAddress ?? '',
  },
): Promise<void> {
  const startMs = Date.now();
  const { accountId } = session.facts.credential;
  const clientIp = client.ip;
  socket.pause();
  const restriction = await deps.endpointIp(accountId, clientIp);
  const x =
    restriction === 'block'
      ? undefined
      : await connectPhase(session, target, socket, startMs, deps);
  const closed = {
    accountId,
    clientIp,
    serverIp: client.serverIp,
    ...target,
    startMs,
    ipDecision: combinedIpDecision(restriction, x?.decisions.ipPolicy),
    logs: x?.decisions.logs,
  };
  const report = (bytesIn: number, bytesOut: number) =>
    deps.publisher.publish(
      publishConnectionOf({ ...closed, bytesIn, bytesOut, endMs: Date.now() }),
    );
  if (restriction === 'block' || x?.close === true) {
    socket.destroy();
    report(0, 0);
    return;
  }
  const stream = await session.openStream({ ip: client.ip, port: client.port });
  let bytesIn = 0;
  let bytesOut = 0;
  socket.on('data', (chunk: Buffer) => {
    bytesIn += chunk.length;
  });
  stream.on('data', (chunk: Buffer) => {
    bytesOut += chunk.length;
  });
  splice(socket, stream, () => report(bytesIn, bytesOut));
  socket.resume();
}

/**
 * Runs the on_tcp_connect of the cloud endpoint on this address, when there is one of the
 * session's account: the exchange says what it decided (close, ip_policy, logs).
 */
async function connectPhase(
  session: LiveSession,
  target: { serverName: string; serverPort: number },
  socket: Socket,
  startMs: number,
  deps: RawConnectionDeps,
): Promise<Exchange | undefined> {
  const { accountId } = session.facts.credential;
  const addr = `${target.serverName}:${target.serverPort}`;
  // A failed look-up closes the connection: a policy that may block never fails open.
  const endpoint = await deps.policies?.forHost(addr).catch((error: unknown) => {
    deps.logger.error({ err: error, addr }, 'edge: endpoint policy look-up failed');
    throw error;
  });
  if (endpoint === undefined || endpoint.accountId !== accountId) return undefined;
  const x = createExchange({
    accountId,
    endpointId: endpoint.id,
    services: deps.policies!.services,
    values: connectionValues({
      clientIp: socket.remoteAddress ?? '',
      clientPort: socket.remotePort ?? 0,
      serverIp: socket.localAddress ?? '',
      serverPort: target.serverPort,
      startMs,
      endpoint: { id: endpoint.id, url: endpoint.url, protocol: 'tcp' },
    }),
  });
  await runPhase(endpoint.policy, 'on_tcp_connect', x);
  return x;
}
