import { createSocket, type Socket } from 'node:dgram';
import { once } from 'node:events';
import { createServer, isIPv6, type Server, type Socket as TcpSocket } from 'node:net';
import dnsPacket, { type Packet } from 'dns-packet';
import type { ListenerLimit } from '../../shared/http/connection-limits.ts';
import type { Logger } from '../../shared/logger.ts';

/** Answers one decoded query. */
export type Answerer = (query: Packet) => Promise<Packet>;

/** The DNS server: where it listens, and how to stop it. */
export interface DnsServer {
  port: number;
  close(): Promise<void>;
}

/** How long TCP connections may stay open, and how many at once. */
export interface DnsTcpLimits {
  /** MAX_CONNECTIONS of the TCP listener; beyond, a connection is closed. */
  limit: ListenerLimit;
  /** A connection with no query outstanding is closed after this, ms (RFC 7766 6.2.3). */
  idleTimeoutMs: number;
  /** The longest a connection stays open, however busy, ms. */
  timeoutMs: number;
}

/** A TCP client may send this many bytes of queries before answers are read (RFC 7766 pipelining). */
const MAX_TCP_BUFFER = 64 * 1024;
/** A UDP answer larger than this is truncated (TC), so the resolver asks again over TCP. */
const UDP_MAX = 512;

async function respond(message: Buffer, answer: Answerer): Promise<Packet | undefined> {
  let query: Packet;
  try {
    query = dnsPacket.decode(message);
  } catch {
    return undefined; // not DNS: no answer (as for any garbage datagram)
  }
  if (query.type !== 'query') return undefined;
  return answer(query);
}

function udpBytes(response: Packet): Buffer {
  const bytes = dnsPacket.encode(response);
  if (bytes.length <= UDP_MAX) return bytes;
  const flags = (response.flags ?? 0) | dnsPacket.TRUNCATED_RESPONSE;
  return dnsPacket.encode({ ...response, flags, answers: [], authorities: [], additionals: [] });
}

function serveUdp(socket: Socket, answer: Answerer, logger: Logger): void {
  socket.on('message', (message, peer) => {
    respond(message, answer)
      .then((response) => {
        if (response !== undefined) socket.send(udpBytes(response), peer.port, peer.address);
      })
      .catch((error) => logger.error({ err: error }, 'dns: answering a UDP query failed'));
  });
}

/**
 * Reads length-prefixed queries from a TCP connection and answers each in order. The connection
 * is idle while no query is outstanding: bytes of a query not yet whole do not keep it open.
 */
function serveTcp(
  connection: TcpSocket,
  answer: Answerer,
  logger: Logger,
  limits: DnsTcpLimits,
): void {
  let buffered = Buffer.alloc(0);
  let chain = Promise.resolve();
  let outstanding = 0;
  const cut = (why: 'idle_timeout' | 'timeout') => () => {
    limits.limit.cut(why);
    connection.destroy();
  };
  let idle = setTimeout(cut('idle_timeout'), limits.idleTimeoutMs);
  const lifetime = setTimeout(cut('timeout'), limits.timeoutMs);
  connection.once('close', () => {
    clearTimeout(idle);
    clearTimeout(lifetime);
  });
  connection.on('error', () => connection.destroy());
  connection.on('data', (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    if (buffered.length > MAX_TCP_BUFFER) return connection.destroy();
    while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
      const message = buffered.subarray(2, 2 + buffered.readUInt16BE(0));
      buffered = buffered.subarray(2 + message.length);
      outstanding += 1;
      clearTimeout(idle);
      chain = chain
        .then(() => respond(message, answer))
        .then((response) => {
          if (response === undefined) return void connection.destroy();
          if (connection.destroyed) return;
          connection.write(dnsPacket.streamEncode(response));
          outstanding -= 1;
          if (outstanding === 0) idle = setTimeout(cut('idle_timeout'), limits.idleTimeoutMs);
        })
        .catch((error) => {
          logger.error({ err: error }, 'dns: answering a TCP query failed');
          connection.destroy();
        });
    }
  });
}

/** Listens for DNS over UDP and TCP on one port (0: any free port, the same for both). */
export async function startDnsServer(options: {
  host: string;
  port: number;
  answer: Answerer;
  logger: Logger;
  tcp: DnsTcpLimits;
}): Promise<DnsServer> {
  const { host, answer, logger } = options;
  const connections = new Set<TcpSocket>();
  const tcp: Server = createServer((connection) => {
    if (options.tcp.limit.admit(connection) !== undefined) return void connection.destroy();
    connections.add(connection);
    connection.on('close', () => connections.delete(connection));
    serveTcp(connection, answer, logger, options.tcp);
  });
  tcp.listen(options.port, host);
  await once(tcp, 'listening');
  const port = (tcp.address() as { port: number }).port;
  const udp = createSocket(isIPv6(host) ? 'udp6' : 'udp4');
  try {
    udp.bind(port, host);
    await once(udp, 'listening');
  } catch (error) {
    tcp.close();
    throw error;
  }
  serveUdp(udp, answer, logger);
  return {
    port,
    async close() {
      udp.close();
      for (const connection of connections) connection.destroy();
      await new Promise<void>((resolve) => tcp.close(() => resolve()));
    },
  };
}
