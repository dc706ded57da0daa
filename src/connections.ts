import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyHttpOptions, FastifyInstance } from 'fastify';
import { fromClientError, rawErrorResponse } from './api/http-errors.ts';
import type { Config } from './config.ts';
import { AppError } from './errors.ts';
import { newId } from './ids.ts';
import type { Logger } from './logger.ts';

// The HTTP/1.1 listener's connections, which Node and Fastify leave open-ended: how many there
// may be, what a client hears when it sends no valid request in time, and which ones a shutdown
// waits for (only those whose request has been received and is being answered).

/** How long a refused connection may take to read its answer before it is dropped. */
const REFUSAL_LINGER_MS = 1000;

/** The settings the connection policy follows. */
export type ConnectionConfig = Pick<
  Config,
  'requestTimeoutMs' | 'headersTimeoutMs' | 'keepAliveTimeoutMs' | 'maxConnections'
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

/** Creates the policy; build the server with its serverOptions, then `install` it. */
export function createConnections(config: ConnectionConfig, logger: Logger): Connections {
  const { requestTimeoutMs, headersTimeoutMs, maxConnections } = config;
  const sockets = new Set<Socket>();
  const exchanges = new Map<Socket, Exchange>();
  let draining = false;
  let full = false;

  /** True while the connection answers a request it has received whole, or that drains itself. */
  function answering(socket: Socket): boolean {
    const request = exchanges.get(socket)?.request;
    return request !== undefined && (request.complete || selfDraining.has(request));
  }

  /** At shutdown, only a connection answering a received request may stay until it is answered. */
  function closeUnlessAnswering(socket: Socket): void {
    if (!answering(socket)) socket.destroy();
  }

  /** Answers a connection beyond the cap with 503 and closes it, without Node's HTTP parser. */
  function refuse(socket: Socket): void {
    if (!full) {
      full = true;
      logger.warn({ max_connections: maxConnections }, 'MAX_CONNECTIONS reached: refusing');
    }
    const error = new AppError(
      'ERR_TOO_MANY_CONNECTIONS',
      `the service holds ${maxConnections} connections, its limit; retry shortly`,
      { max_connections: maxConnections },
    );
    socket.on('error', () => socket.destroy());
    // Answer once the client has sent (the start of) its request, as HTTP clients expect, and
    // read and drop the rest of it, so that closing does not reset the answer away.
    socket.once('data', () => socket.end(rawErrorResponse(error, newId('op'))));
    socket.resume();
    socket.once('end', () => socket.destroy());
    const timer = setTimeout(() => socket.destroy(), REFUSAL_LINGER_MS);
    socket.once('close', () => clearTimeout(timer));
  }

  /** Counts the connections Node's HTTP server gets and hands it only those under the cap. */
  function capConnections(server: Server): void {
    const serve = server.listeners('connection') as ((socket: Socket) => void)[];
    server.removeAllListeners('connection');
    server.on('connection', (socket: Socket) => {
      if (sockets.size >= maxConnections) return refuse(socket);
      sockets.add(socket);
      socket.once('close', () => {
        sockets.delete(socket);
        exchanges.delete(socket);
        if (sockets.size < maxConnections) full = false;
      });
      for (const listener of serve) listener.call(server, socket);
    });
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
      // close rather than keep reading the rest.
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
