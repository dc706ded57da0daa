import { ConnectError } from '@connectrpc/connect';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../shared/errors.ts';
import { closedMidRequest, tellClosed } from '../../shared/http/http-errors.ts';
import type { Metrics } from '../../shared/metrics.ts';
import { bearerToken } from '../../shared/tokens.ts';
import type { Claim } from '../pipeline/admission.ts';
import type { Pipeline } from '../pipeline/pipeline.ts';
import { readUnary } from './read-request.ts';
import type { Wire } from './wire.ts';
import { answer } from './wire-answers.ts';

// Publish in every protocol: the request is admitted (a request slot, its bytes in the budget)
// before its body is read, its message goes to a worker as bytes, and any failure is answered
// in the request's protocol. A client's bad bytes are INVALID_ARGUMENT, never INTERNAL.

/** What Publish needs. */
export interface PublishDeps {
  pipeline: Pipeline;
  isIngestToken: (token: string) => boolean;
  metrics: Metrics;
  /** Largest request or stream message (MAX_INGEST_BYTES). */
  maxIngestBytes: number;
}

/** Throws ERR_UNAUTHORIZED unless the request carries a valid ingest token. */
export function authenticate(request: FastifyRequest, deps: PublishDeps): void {
  const token = bearerToken(request.headers.authorization);
  if (token === undefined || !deps.isIngestToken(token)) {
    throw new AppError(
      'ERR_UNAUTHORIZED',
      'a valid ingest token is required: "Authorization: Bearer <token>"',
    );
  }
}

/**
 * Answers a Publish or PublishStream in its protocol, and counts a refusal under its catalogue
 * code: the one place every protocol's refused requests are counted (successes are counted by
 * the pipeline, per published message).
 */
export function respond(
  request: FastifyRequest,
  reply: FastifyReply,
  wire: Wire,
  outcome: Uint8Array | ConnectError,
  deps: PublishDeps,
): FastifyReply {
  if (outcome instanceof ConnectError) {
    const cause = outcome.cause instanceof AppError ? outcome.cause : AppError.from(outcome);
    deps.metrics.ingestRequests.inc({ result: cause.code });
  }
  return answer(request, reply, wire, outcome);
}

/**
 * Any failure as the ConnectError the client gets; an unexpected one is logged (an upload the
 * client aborted is not: it is the client's doing, and logged at info).
 */
export function clientError(request: FastifyRequest, error: unknown): ConnectError {
  const closed = closedMidRequest(request.raw);
  if (closed) tellClosed(request);
  if (error instanceof ConnectError) return error;
  const appError = AppError.from(error);
  if (!closed && appError.status >= 500) request.log.error({ err: error }, 'publish failed');
  return appError.toConnect();
}

/** Serves one Publish. */
export async function publish(
  request: FastifyRequest,
  reply: FastifyReply,
  wire: Wire,
  deps: PublishDeps,
): Promise<FastifyReply> {
  let claim: Claim | undefined;
  try {
    authenticate(request, deps);
    claim = deps.pipeline.admit();
    const limits = { claim, maxBytes: deps.maxIngestBytes };
    const message = await readUnary(request.raw, wire, limits);
    const { response } = await deps.pipeline.publish(message, Date.now(), claim);
    return respond(request, reply, wire, response, deps);
  } catch (error) {
    return respond(request, reply, wire, clientError(request, error), deps);
  } finally {
    claim?.end();
  }
}
