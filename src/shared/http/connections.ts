import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyHttpOptions, FastifyInstance } from 'fastify';
import type { Config } from '../../config/load.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import type { Logger } from '../logger.ts';
import { type ConnectionLimits, capServer, type Refusal } from './connection-limits.ts';
import { fromClientError, rawErrorResponse } from './http-errors.ts';
import { lingering, lingerOnClose } from './lingering-close.ts';

// The HTTP/1.1 listener's connections, which Node and Fastify leave open-ended: how many there
// may be, what a client hears when it sends no valid request in time, and which ones a shutdown
// waits for (only those whose request has been received and is being answered).

/** The settings the connection policy follows. */
export type ConnectionConfig = Pick<
  Config,
  'requestTimeoutMs' | 'headersTimeoutMs' | 'keepAliveTimeoutMs'
>;

/** The connection policy of one HTTP/1.1 Fastify server. */
export interface Connections {
  /** Fastify options: Node's timeouts, and the documented error body for client errors. */
  serverOptions: FastifyHttpOptions<Server>;
  /** Applies the rest of the policy to the server built with serverOptions. */
  install(app: FastifyInstance): void;
}

/** The request a connection is busy with, if any. */
interface Exchange {
  request: IncomingMessage;
  response: ServerResponse;
}

/** Requests whose handler ends them itself at shutdown (open streams: see drainsItself). */
const selfDraining = new WeakSet<IncomingMessage>();

/**
 * Marks a request whose handler answers it promptly when the server closes (a PublishStream,
 * ended with the ids it made durable): the drain leaves its connection open for that answer,
 * although the request never arrives whole.
 */
export function drainsItself(request: IncomingMessage): void {
  selfDraining.add(request);
}

/** The raw 503 ERR_TOO_MANY_CONNECTIONS a connection beyond a listener's cap gets. */
export function tooManyConnections(why: Refusal, perListener: number): string {
  const error = new AppError(
    'ERR_TOO_MANY_CONNECTIONS',
    why === 'max_connections'
      ? `this listener holds ${perListener} connections, its limit; retry shortly`
      : 'the service holds as many connections as its open-file limit allows; retry shortly',
    { max_connections: perListener },
  );
  return rawErrorResponse(error, newId('op'));
}

/** Creates the policy; build the server with its serverOptions, then `install` it. */
export function createConnections(
  config: ConnectionConfig,
  logger: Logger,
  limits: ConnectionLimits,
): Connections {
  const { requestTimeoutMs, headersTimeoutMs } = config;
  const sockets = new Set<Socket>();
  const exchanges = new Map<Socket, Exchange>();
  let draining = false;

  /** True while the connection answers a request it has received whole, or that drains itself. */
  function answering(socket: Socket): boolean {
    const request = exchanges.get(socket)?.request;
    return request !== undefined && (request.complete || selfDraining.has(request));
  }

  /** At shutdown, only a connection answering a received request may stay until it is answered. */
  function closeUnlessAnswering(socket: Socket): void {
    if (!answering(socket)) socket.destroy();
  }

  /** Counts the connections Node's HTTP server gets, and answers those beyond the cap 503. */
  function capConnections(server: Server): void {
    server.on('connection', (socket: Socket) => {
      sockets.add(socket);
      lingerOnClose(socket, () => exchanges.get(socket)?.request, requestTimeoutMs);
      socket.once('close', () => {
        sockets.delete(socket);
        exchanges.delete(socket);
      });
    });
    // Without Node's HTTP parser: the answer goes once the request has started to arrive.
    capServer(server, limits.listener('api'), (socket, why) =>
      limits.turnAway('api', socket, tooManyConnections(why, limits.perListener), 'after-data'),
    );
  }

  /** Keeps each connection's current request, and closes it after its answer once draining. */
  function trackExchanges(server: Server): void {
    server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      const { socket } = request;
      exchanges.set(socket, { request, response });
      response.once('finish', () => {
        if (exchanges.get(socket)?.response === response) exchanges.delete(socket);
        // Once Node is done with the response (a next pipelined one may follow at once).
        if (draining) setImmediate(() => closeUnlessAnswering(socket));
      });
    });
  }

  /** Answers what Node's parser or timeouts report before a request exists, then closes. */
  function answerClientError(error: Error & { code?: string }, socket: Socket): void {
    if (socket.destroyed) return;
    // Already answered: the request timeout ends the rest of its lingering close.
    if (lingering(socket)) return void socket.destroy();
    const answer = fromClientError(error, { requestTimeoutMs, headersTimeoutMs });
    // Never write into a response already under way: that would corrupt it.
    if (answer === undefined || exchanges.get(socket)?.response.headersSent) {
      socket.destroy();
      return;
    }
    const operationId = newId('op');
    logger.info({ reqId: operationId, error_code: answer.code }, answer.message);
    socket.end(rawErrorResponse(answer, operationId), () => socket.destroy());
  }

  return {
    serverOptions: {
      requestTimeout: requestTimeoutMs,
      keepAliveTimeout: config.keepAliveTimeoutMs,
      http: {
        requestTimeout: requestTimeoutMs,
        headersTimeout: headersTimeoutMs,
        // How often Node looks for connections past either timeout (every 30 s by default).
        connectionsCheckingInterval: headersTimeoutMs / 4,
      },
      clientErrorHandler: answerClientError,
    },
    install(app) {
      capConnections(app.server);
      trackExchanges(app.server);
      // An answer sent before its request was received whole (a 401 to a body still coming):
      // the connection ends after it, with a lingering close (src/shared/http/lingering-close.ts).
      app.addHook('onSend', (request, reply, payload, done) => {
        if (!request.raw.complete) reply.header('connection', 'close');
        done(null, payload);
      });
      app.addHook('preClose', (done) => {
        draining = true;
        for (const socket of sockets) closeUnlessAnswering(socket);
        done();
      });
    },
  };
}
