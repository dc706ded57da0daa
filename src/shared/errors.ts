import { Code, ConnectError } from '@connectrpc/connect';

/**
 * The closed set of error codes the service answers with. Each has its HTTP status, the Connect
 * code the ingest API uses for it, and whether a client may retry. README lists every code.
 */
export const ERROR_CODES = {
  ERR_UNAUTHORIZED: { status: 401, connect: Code.Unauthenticated, retriable: false },
  ERR_NOT_FOUND: { status: 404, connect: Code.NotFound, retriable: false },
  ERR_ROUTE_NOT_FOUND: { status: 404, connect: Code.Unimplemented, retriable: false },
  ERR_METHOD_NOT_ALLOWED: { status: 405, connect: Code.Unimplemented, retriable: false },
  ERR_UNSUPPORTED_MEDIA_TYPE: { status: 415, connect: Code.InvalidArgument, retriable: false },
  ERR_MALFORMED_JSON: { status: 400, connect: Code.InvalidArgument, retriable: false },
  ERR_BODY_TOO_LARGE: { status: 413, connect: Code.ResourceExhausted, retriable: false },
  ERR_UNKNOWN_FIELD: { status: 400, connect: Code.InvalidArgument, retriable: false },
  ERR_MISSING_FIELD: { status: 400, connect: Code.InvalidArgument, retriable: false },
  ERR_INVALID_FIELD: { status: 400, connect: Code.InvalidArgument, retriable: false },
  ERR_FIELD_TOO_LONG: { status: 400, connect: Code.InvalidArgument, retriable: false },
  ERR_FIELD_NOT_UPDATABLE: { status: 400, connect: Code.InvalidArgument, retriable: false },
  ERR_INVALID_DOMAIN: { status: 400, connect: Code.InvalidArgument, retriable: false },
  ERR_DOMAIN_TAKEN: { status: 409, connect: Code.AlreadyExists, retriable: false },
  ERR_ALREADY_EXISTS: { status: 409, connect: Code.AlreadyExists, retriable: false },
  ERR_IN_USE: { status: 409, connect: Code.FailedPrecondition, retriable: false },
  ERR_INVALID_EVENTS: { status: 400, connect: Code.InvalidArgument, retriable: false },
  ERR_INVALID_QUERY: { status: 400, connect: Code.InvalidArgument, retriable: false },
  ERR_INVALID_FILTER: { status: 400, connect: Code.InvalidArgument, retriable: false },
  ERR_INVALID_FIELDS: { status: 400, connect: Code.InvalidArgument, retriable: false },
  ERR_UNKNOWN_EVENT_TYPE: { status: 400, connect: Code.InvalidArgument, retriable: false },
  ERR_UNSUPPORTED_TARGET: { status: 400, connect: Code.InvalidArgument, retriable: false },
  ERR_INVALID_TARGET: { status: 400, connect: Code.InvalidArgument, retriable: false },
  ERR_DESTINATION_IN_USE: { status: 409, connect: Code.FailedPrecondition, retriable: false },
  ERR_DESTINATION_BACKLOG: { status: 409, connect: Code.FailedPrecondition, retriable: true },
  ERR_IP_RESTRICTED: { status: 403, connect: Code.PermissionDenied, retriable: false },
  ERR_IP_RESTRICTION_LOCKOUT: { status: 409, connect: Code.FailedPrecondition, retriable: false },
  ERR_AGENT_COMMAND_UNSUPPORTED: {
    status: 409,
    connect: Code.FailedPrecondition,
    retriable: false,
  },
  ERR_AGENT_COMMAND_FAILED: { status: 502, connect: Code.Unavailable, retriable: false },
  ERR_AGENT_ENDPOINT_READ_ONLY: { status: 409, connect: Code.FailedPrecondition, retriable: false },
  ERR_NO_FREE_PORT: { status: 409, connect: Code.ResourceExhausted, retriable: false },
  ERR_RATE_LIMITED: { status: 429, connect: Code.ResourceExhausted, retriable: true },
  ERR_BACKPRESSURE: { status: 503, connect: Code.ResourceExhausted, retriable: true },
  ERR_UNAVAILABLE: { status: 503, connect: Code.Unavailable, retriable: true },
  ERR_INTERNAL: { status: 500, connect: Code.Internal, retriable: true },
  // An ingest client that went away mid-request: counted under this code, never answered.
  ERR_CLIENT_GONE: { status: 499, connect: Code.Canceled, retriable: true },
  // Answered on the connection, before a request exists (Node's HTTP parser or the socket).
  ERR_MALFORMED_REQUEST: { status: 400, connect: Code.InvalidArgument, retriable: false },
  ERR_REQUEST_TIMEOUT: { status: 408, connect: Code.DeadlineExceeded, retriable: true },
  ERR_HEADERS_TOO_LARGE: { status: 431, connect: Code.ResourceExhausted, retriable: false },
  ERR_TOO_MANY_CONNECTIONS: { status: 503, connect: Code.Unavailable, retriable: true },
} as const;

/** A stable error code from ERROR_CODES. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** The one error type of the service: a code, a message for the client, and optional details. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;
  constructor(
    code: ErrorCode,
    message: string,
    details: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'AppError';
    this.code = code;
    this.details = details;
  }

  get status(): number {
    return ERROR_CODES[this.code].status;
  }

  get retriable(): boolean {
    return ERROR_CODES[this.code].retriable;
  }

  /** Any thrown value as an AppError; unknown errors become ERR_INTERNAL without leaking text. */
  static from(error: unknown): AppError {
    if (error instanceof AppError) return error;
    return new AppError('ERR_INTERNAL', 'internal error', {}, { cause: error });
  }

  /** The same error for a Connect client. */
  toConnect(): ConnectError {
    return new ConnectError(
      this.message,
      ERROR_CODES[this.code].connect,
      undefined,
      undefined,
      this,
    );
  }
}

/** The JSON error body (docs/decisions.md#error-body). */
export function errorBody(error: AppError, operationId: string) {
  return {
    error_code: error.code,
    status_code: error.status,
    msg: error.message,
    details: { operation_id: operationId, ...error.details },
  };
}
