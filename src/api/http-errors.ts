import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, errorBody } from '../errors.ts';

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

/** Every 4xx/5xx gets the error body of DESIGN.md §4; unexpected errors are logged, never shown. */
export function installErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const appError =
      error instanceof AppError ? error : (fromFastify(error) ?? AppError.from(error));
    if (appError.status >= 500) request.log.error({ err: error }, 'request failed');
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
 * Fastify's own body instead of DESIGN.md §4's.
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
