import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../../shared/logger.ts';
import type { LiveSession } from '../sessions/live-session.ts';
import { CLIENT_CLOSED_REQUEST, errorPage } from './edge-answers.ts';
import type { SessionFinder } from './find-session.ts';
import { forwardRequest } from './forward-request.ts';
import type { Peer } from './peer.ts';
import { forwardedHeaders } from './proxy-headers.ts';
import type { RecordRequest } from './record-event.ts';
import type { AgentStreams } from './stream-pool.ts';

// A request's way through the edge, one step per module: find the session (find-session.ts),
// open a stream (stream-pool.ts), forward (forward-request.ts), record the event
// (record-event.ts). Here they are put in order, with the edge's own answers between them.

export interface RequestSteps {
  finder: SessionFinder;
  /** The streams to a session for a request from `peer`. */
  streams: (session: LiveSession, peer: Peer) => AgentStreams;
  record: RecordRequest;
  timeoutMs: number;
  logger: Logger;
}

/**
 * Serves `request` for `host`: forwarded to this instance's session, or through `relay` to the
 * owner's (absent for a request relayed here: it is never relayed again).
 */
export async function serveRequest(
  steps: RequestSteps,
  host: string,
  request: IncomingMessage,
  response: ServerResponse,
  peer: Peer,
  relay: ((host: string) => Promise<boolean>) | undefined,
): Promise<void> {
  const route = await steps.finder.find(host, peer, relay);
  if ('relayed' in route) return;
  if ('missing' in route) {
    request.resume();
    return errorPage(response, route.failed === 'ip-check' ? 503 : 502, route.missing);
  }
  forward(steps, route.session, host, request, response, route.ipDecision, peer);
}

/** Counts the bytes that pass through a stream. */
function counted(stream: IncomingMessage): { bytes: number } {
  const tally = { bytes: 0 };
  stream.on('data', (chunk: Buffer) => {
    tally.bytes += chunk.length;
  });
  return tally;
}

function forward(
  steps: RequestSteps,
  session: LiveSession,
  host: string,
  request: IncomingMessage,
  response: ServerResponse,
  ipDecision: string,
  peer: Peer,
): void {
  const requestBody = counted(request);
  let answered: ReturnType<typeof forwardRequest> | undefined;
  // Every answer, the agent's or the edge's own 403/502/504, is one completed request; a
  // request whose client left before any answer is a 499.
  const completed = () =>
    steps.record(session, peer, request, {
      requestBytes: requestBody.bytes,
      response: {
        statusCode: response.headersSent ? response.statusCode : CLIENT_CLOSED_REQUEST,
        headers: answered?.headers ?? response.getHeaders(),
        bodyLength: answered?.bodyBytes ?? 0,
      },
      connectionReused: answered?.reused ?? false,
      ipDecision,
    });
  if (response.closed) return void completed();
  response.once('close', completed);
  if (ipDecision === 'block') {
    request.resume();
    errorPage(response, 403, 'Your address is not allowed by an IP restriction.');
    return;
  }
  // The client left while its address was checked: nothing goes to the agent.
  if (request.socket.destroyed) return;
  answered = forwardRequest(steps.streams(session, peer), request, response, {
    host,
    headers: forwardedHeaders(request, host, peer),
    timeoutMs: steps.timeoutMs,
    logger: steps.logger,
  });
}
