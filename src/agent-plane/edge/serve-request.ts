import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../../shared/logger.ts';
import type { EndpointPolicies, EndpointPolicy, Exchange } from '../policy/index.ts';
import type { LiveSession } from '../sessions/live-session.ts';
import { CLIENT_CLOSED_REQUEST, errorPage } from './edge-answers.ts';
import { type ChainSteps, type RelayTo, runChain, settleRequest } from './endpoint-chain.ts';
import type { SessionFinder } from './find-session.ts';
import { forwardRequest } from './forward-request.ts';
import type { Peer } from './peer.ts';
import { responder } from './policy-gate.ts';
import { forwardedHeaders } from './proxy-headers.ts';
import type { RecordRequest } from './record-event.ts';
import type { AgentStreams } from './stream-pool.ts';

// A request's way through the edge, one step per module: find the session (find-session.ts),
// run the endpoints' Traffic Policies (endpoint-chain.ts: the cloud endpoint's, then the agent
// endpoint's or forward-internal's target; policy-gate.ts), open a stream (stream-pool.ts), forward
// (forward-request.ts), record the event (record-event.ts). Here they are put in order, with the
// edge's own answers between them.

export interface RequestSteps {
  finder: SessionFinder;
  /** The account's internal endpoints other instances hold (forward-internal through the relay). */
  internalElsewhere?: ChainSteps['internalElsewhere'];
  /** The streams to a session for a request from `peer`. */
  streams: (session: LiveSession, peer: Peer) => AgentStreams;
  record: RecordRequest;
  /** The cloud endpoints whose policies run for their hostnames; absent: none. */
  policies?: EndpointPolicies;
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
  relay: RelayTo | undefined,
): Promise<void> {
  const route = await steps.finder.find(host, peer, relay);
  if ('relayed' in route) return;
  const session = 'session' in route ? route.session : undefined;
  let endpoint: EndpointPolicy | undefined;
  try {
    endpoint = await steps.policies?.forHost(host);
  } catch (error) {
    steps.logger.error({ err: error, host }, 'edge: endpoint policy look-up failed');
    request.resume();
    return errorPage(response, 503, 'The endpoint policy cannot be looked up; retry.');
  }
  // A policy applies to the hostname's agent only when both are one account's.
  if (session !== undefined && endpoint?.accountId !== session.facts.credential.accountId) {
    endpoint = undefined;
  }
  if ('missing' in route && (endpoint === undefined || route.failed !== undefined)) {
    request.resume();
    return errorPage(response, route.failed === 'ip-check' ? 503 : 502, route.missing);
  }
  const ipDecision = 'ipDecision' in route ? route.ipDecision : 'invalid';
  // A cloud endpoint with no agent behind it answers with its policy alone.
  await forward(steps, { session, endpoint }, host, request, response, ipDecision, peer, relay);
}

/** Counts the bytes that pass through a stream. */
function counted(stream: IncomingMessage): { bytes: number } {
  const tally = { bytes: 0 };
  stream.on('data', (chunk: Buffer) => {
    tally.bytes += chunk.length;
  });
  return tally;
}

/** The body length of a policy's answer (writeAnswer sets Content-Length), none for HEAD. */
function policyBodyLength(request: IncomingMessage, response: ServerResponse): number {
  return request.method === 'HEAD' ? 0 : Number(response.getHeader('content-length') ?? 0);
}

/** Who serves the request: the agent's session, the cloud endpoint's policy, or both. */
interface Target {
  session: LiveSession | undefined;
  endpoint: EndpointPolicy | undefined;
}

async function forward(
  steps: RequestSteps,
  { session, endpoint }: Target,
  host: string,
  request: IncomingMessage,
  response: ServerResponse,
  ipDecision: string,
  peer: Peer,
  relay: RelayTo | undefined,
): Promise<void> {
  const requestBody = counted(request);
  let answered: ReturnType<typeof forwardRequest> | undefined;
  let exchange: Exchange | undefined;
  const accountId = session?.facts.credential.accountId ?? endpoint!.accountId;
  // Every answer, the agent's, the policy's or the edge's own 403/502/504, is one completed
  // request; a request whose client left before any answer is a 499.
  const completed = () => {
    const statusCode = response.headersSent ? response.statusCode : CLIENT_CLOSED_REQUEST;
    for (const after of exchange?.afterResponse ?? []) after(statusCode);
    steps.record(accountId, peer, request, {
      requestBytes: requestBody.bytes,
      response: {
        statusCode,
        headers: answered?.headers ?? response.getHeaders(),
        // Not the agent's answer: the policy's says its length (the edge's own pages: 0).
        bodyLength: answered?.bodyBytes ?? policyBodyLength(request, response),
      },
      connectionReused: answered?.reused ?? false,
      ipDecision,
      decisions: exchange?.decisions,
    });
  };
  if (response.closed) return void completed();
  response.once('close', completed);
  if (ipDecision === 'block') {
    request.resume();
    errorPage(response, 403, 'Your address is not allowed by an IP restriction.');
    return;
  }
  const chain = await runChain(
    { ...steps, services: steps.policies?.services },
    { session, endpoint },
    host,
    request,
    peer,
    settleRequest(request, response),
    relay,
  );
  // The instance that got it records its event.
  if (chain.relayed === true) return void response.off('close', completed);
  exchange = chain.runs.at(-1)?.x;
  if (chain.handled) return;
  const agent = chain.session;
  if (agent === undefined) {
    request.resume();
    return errorPage(response, 502, `No agent is connected for ${host}.`);
  }
  // The client left while its address was checked: nothing goes to the agent.
  if (request.socket.destroyed) return;
  const { via } = chain;
  answered = forwardRequest(steps.streams(agent, peer), request, response, {
    host,
    headers: forwardedHeaders(request, host, peer, false, via.headers),
    timeoutMs: steps.timeoutMs,
    logger: steps.logger,
    target: via.target,
    body: via.body,
    // on_http_response runs nearest the agent first.
    respond: chain.runs.length === 0 ? undefined : responder(chain.runs.toReversed(), request),
  });
}
