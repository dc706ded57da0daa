import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, errorBody } from '../errors.ts';

/** The log message for a request whose connection closed before all of it arrived. */
export const CLOSED_MID_REQUEST = 'the connection closed before the whole request arrived';

/**
 * True when the connection closed mid-request (the client aborted its upload, or it was cut for
 * being too slow): reading the body failed, but nothing was accepted and nobody is left to answer.
 */
export function closedMidRequest(request: { destroyed: boolean; complete: boolean }): boolean {
  return request.destroyed && !request.complete;
}

const toldClosed = new WeakSet<FastifyRequest>();

/**
 * Logs, once per request and at info, that its client left before the whole request arrived:
 * the abort hook, the error handler and a route's own failure path may each see it.
 */
export function tellClosed(request: FastifyRequest): void {
  if (toldClosed.has(request)) return;
  toldClosed.add(request);
  request.log.info(CLOSED_MID_REQUEST);
}

/** Fastify's own request errors, mapped to the service's stable codes. */
function fromFastify(error: FastifyError): AppError | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError(
        'ERR_UNSUPPORTED_MEDIA_TYPE',
        'request bodies must be JSON (Content-Type: application/json)',
      );
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('ERR_BODY_TOO_LARGE', 'the request body is larger than the limit');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError('ERR_MALFORMED_JSON', 'the body is empty but Content-Type says JSON');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new AppError('ERR_MALFORMED_JSON', 'the Content-Length does not match the body');
  }
  if (error instanceof SyntaxError || error.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return new AppError('ERR_MALFORMED_JSON', `the body is not valid JSON: ${error.message}`);
  }
  return undefined;
}

/**
 * Every 4xx/5xx gets the error body of docs/decisions.md#error-body; unexpected errors are logged, never shown.
 * Requests that arrive while the server closes get 503 ERR_UNAVAILABLE (Fastify's own
 * return503OnClosing answers with another body, so it is off).
 */
export function installErrorHandlers(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onRequest', (request, reply, done) => {
    if (!closing) return done();
    const error = new AppError('ERR_UNAVAILABLE', 'the service is shutting down; retry');
    reply.code(503).send(errorBody(error, request.id));
  });
  // Said here when the client left while its request waited (e.g. on the store, authenticating).
  app.addHook('onRequestAbort', (request, done) => {
    if (!request.raw.complete) tellClosed(request);
    done();
  });
  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const appError =
      error instanceof AppError ? error : (fromFastify(error) ?? AppError.from(error));
    if (closedMidRequest(request.raw)) tellClosed(request);
    else if (appError.status >= 500) request.log.error({ err: error }, 'request failed');
    else request.log.info({ error_code: appError.code }, appError.message);
    if (appError.code === 'ERR_METHOD_NOT_ALLOWED' && Array.isArray(appError.details.allowed)) {
      reply.header('allow', appError.details.allowed.join(', '));
    }
    return reply.code(appError.status).send(errorBody(appError, request.id));
  });
  app.setNotFoundHandler((request, reply) => {
    const error = new AppError(
      'ERR_ROUTE_NOT_FOUND',
      `no route for ${request.method} ${request.url.split('?')[0]}`,
    );
    return reply.code(404).send(errorBody(error, request.id));
  });
}

/**
 * Fastify's `frameworkErrors` option: errors its router raises before any route or hook runs (a
 * path that does not percent-decode, a path parameter over maxParamLength), which otherwise get
 * Fastify's own body instead of ours (docs/decisions.md#error-body).
 */
export function frameworkErrors(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  const path = request.url.split('?')[0];
  let appError: AppError;
  if (error.code === 'FST_ERR_BAD_URL') {
    appError = new AppError(
      'ERR_ROUTE_NOT_FOUND',
      `no route for ${request.method} ${path}: the path is not valid percent-encoded UTF-8`,
    );
  } else if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    appError = new AppError('ERR_NOT_FOUND', `no object has an id as long as the one in ${path}`);
  } else {
    appError = AppError.from(error);
    request.log.error({ err: error }, 'request failed');
  }
  reply.code(appError.status).send(errorBody(appError, request.id));
}

/** Timeouts the HTTP/1.1 server enforces, for the message of ERR_REQUEST_TIMEOUT. */
export interface ReceiveTimeouts {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
}

/**
 * What Node's HTTP server reports on a connection before (or instead of) a request, as the
 * answer to send; undefined for errors that leave nothing to answer (a reset, a socket error).
 */
export function fromClientError(
  error: Error & { code?: string; reason?: unknown },
  timeouts: ReceiveTimeouts,
): AppError | undefined {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return new AppError(
      'ERR_REQUEST_TIMEOUT',
      `the request was not received in time (headers within ${timeouts.headersTimeoutMs} ms, ` +
        `all of it within ${timeouts.requestTimeoutMs} ms)`,
      {
        headers_timeout_ms: timeouts.headersTimeoutMs,
        request_timeout_ms: timeouts.requestTimeoutMs,
      },
    );
  }
  if (error.code === 'HPE_HEADER_OVERFLOW') {
    return new AppError(
      'ERR_HEADERS_TOO_LARGE',
      `the request line and headers are larger than ${maxHeaderSize} bytes`,
      { max_bytes: maxHeaderSize },
    );
  }
  if (error.code?.startsWith('HPE_')) {
    // llhttp's reason is a fixed description ("Invalid method encountered"), never client bytes.
    const reason = typeof error.reason === 'string' ? `: ${error.reason}` : '';
    return new AppError('ERR_MALFORMED_REQUEST', `the request is not valid HTTP/1.1${reason}`);
  }
  return undefined;
}

/** A whole HTTP/1.1 response carrying the error body, for a socket that has no request to reply to. */
export function rawErrorResponse(error: AppError, operationId: string): string {
  const body = JSON.stringify(errorBody(error, operationId));
  return (
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  );
}
