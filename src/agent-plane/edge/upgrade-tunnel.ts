import { request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import { pipeline } from 'node:stream';
import type { Logger } from '../../shared/logger.ts';
import { TOO_MANY_STREAMS } from '../sessions/live-session.ts';
import { CLIENT_CLOSED_REQUEST, invalidStatus, refuseUpgrade } from './edge-answers.ts';
import { endToEndFields, responseHead } from './proxy-headers.ts';
import { splice } from './splice.ts';
import type { StreamConnector } from './stream-pool.ts';

// A WebSocket (any Upgrade) through the edge: the request goes to the agent on a stream of its
// own, as any request's head does (its fields rewritten the same way); a 101 joins the client's
// socket and the stream, and bytes flow both ways untouched until either side closes. An agent
// that answers anything else has its answer passed on, and the connection ends there: no raw
// tunnel is left for later requests to ride without events or rewritten fields.

/** What passed through one upgraded connection, known when it closes. */
export interface UpgradeOutcome {
  /** The agent's status code, or the edge's own (502, 503, 504, and 499 when the client left). */
  statusCode: number;
  headers: NodeJS.Dict<string | string[]>;
  /** Bytes from the client after its request head (WebSocket frames, both directions framed). */
  requestBytes: number;
  /** Bytes from the agent after its answer head. */
  responseBytes: number;
}

export interface UpgradeOptions {
  /** Opens the upgrade's stream. */
  connect: StreamConnector;
  /** The routed host, for logs. */
  host: string;
  headers: OutgoingHttpHeaders;
  timeoutMs: number;
  logger: Logger;
}

/** How long a refused upgrade's connection may stay half-closed, waiting for the client's end. */
const LINGER_MS = 5000;

/**
 * Sends the Upgrade request to the agent and carries what follows (`head`: the client's bytes
 * read past its head); `onClose` gets the outcome once the client's connection closed.
 */
export function tunnelUpgrade(
  request: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  { connect, host, headers, timeoutMs, logger }: UpgradeOptions,
  onClose: (outcome: UpgradeOutcome) => void,
): void {
  const outcome: UpgradeOutcome = {
    statusCode: 0,
    headers: {},
    requestBytes: head.length,
    responseBytes: 0,
  };
  // The client left while its address was checked: nothing goes to the agent.
  if (socket.destroyed) return void onClose({ ...outcome, statusCode: CLIENT_CLOSED_REQUEST });
  const upstream = httpRequest({
    method: request.method,
    path: request.url,
    headers,
    createConnection: connect,
  });
  /** The edge's own answer instead of the agent's. */
  const refuse = (status: number, reason: string) => {
    clearTimeout(timer);
    outcome.statusCode = status;
    upstream.destroy();
    refuseUpgrade(socket, status, reason);
  };
  const timer = setTimeout(() => {
    logger.info({ host, timeoutMs }, 'edge: the agent did not answer an upgrade in time (504)');
    refuse(504, 'Gateway Timeout');
  }, timeoutMs);
  socket.once('close', () => {
    clearTimeout(timer);
    upstream.destroy();
    if (outcome.statusCode === 0) outcome.statusCode = CLIENT_CLOSED_REQUEST;
    onClose(outcome);
  });
  socket.on('data', (chunk: Buffer) => {
    outcome.requestBytes += chunk.length;
  });

  upstream.on('upgrade', (answer, stream: Duplex, agentHead: Buffer) => {
    clearTimeout(timer);
    Object.assign(outcome, { statusCode: 101, headers: answer.headers });
    outcome.responseBytes += agentHead.length;
    stream.on('data', (chunk: Buffer) => {
      outcome.responseBytes += chunk.length;
    });
    socket.write(responseHead(answer, endToEndFields(answer.rawHeaders, true)));
    if (agentHead.length > 0) socket.write(agentHead);
    if (head.length > 0) stream.write(head);
    splice(socket, stream, () => {});
  });
  upstream.on('response', (answer) => {
    clearTimeout(timer);
    if (invalidStatus(answer.statusCode)) {
      logger.warn(
        { host, status: answer.statusCode },
        'edge: the agent answered an invalid status',
      );
      return refuse(502, 'Bad Gateway');
    }
    Object.assign(outcome, { statusCode: answer.statusCode, headers: answer.headers });
    answer.on('data', (chunk: Buffer) => {
      outcome.responseBytes += chunk.length;
    });
    // Framed by the connection's end: the client's further bytes are read and dropped.
    const fields = endToEndFields(answer.rawHeaders).concat('Connection', 'close');
    socket.write(responseHead(answer, fields));
    socket.resume();
    pipeline(answer, socket, () => {});
    socket.once('finish', () => {
      const linger = setTimeout(() => socket.destroy(), LINGER_MS).unref();
      socket.once('close', () => clearTimeout(linger));
    });
  });
  upstream.on('error', (error) => {
    if (outcome.statusCode !== 0 || socket.destroyed) return;
    const busy = (error as NodeJS.ErrnoException).code === TOO_MANY_STREAMS;
    logger.info({ err: error, host }, 'edge: the upgrade request to the agent failed');
    refuse(busy ? 503 : 502, busy ? 'Service Unavailable' : 'Bad Gateway');
  });
  upstream.end();
}
