import type { IncomingMessage } from 'node:http';
import { httpEventBytes } from './http-event-bytes.ts';
import type { Peer } from './peer.ts';
import type { EdgePublisher } from './publisher.ts';
import type { CompletedRequest } from './traffic-event.ts';

// Step four of a request's way through the edge, "record the event": every answer, the agent's
// or the edge's own, is one http_request_complete.v0 of the session's account (a WebSocket is
// one when its connection closes), handed to the pipeline as a Publish would be.

/** What the edge learnt of one request's answer. */
export type Answer = Pick<
  CompletedRequest,
  'response' | 'connectionReused' | 'ipDecision' | 'decisions'
> & {
  requestBytes: number;
};

/** Records completed requests of an account's endpoints (its agents' or its cloud ones). */
export type RecordRequest = (
  accountId: string,
  peer: Peer,
  request: IncomingMessage,
  answer: Answer,
) => void;

export function requestRecorder(publisher: EdgePublisher): RecordRequest {
  return (accountId, { conn, tls }, request, answer) =>
    publisher.publish(
      httpEventBytes({
        accountId,
        conn,
        tls,
        request: {
          method: request.method ?? '',
          host: conn.serverName,
          target: request.url ?? '/',
          headers: request.headers,
          bodyLength: answer.requestBytes,
        },
        response: answer.response,
        connectionReused: answer.connectionReused,
        ipDecision: answer.ipDecision,
        decisions: answer.decisions,
        endMs: Date.now(),
      }),
    );
}
