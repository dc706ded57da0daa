import { type IncomingMessage, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Decisions } from '../policy/index.ts';
import { refuseUpgrade } from './edge-answers.ts';
import type { Peer } from './peer.ts';
import { nextPhases, requestPhases, toNodeHeaders } from './policy-gate.ts';
import { forwardedHeaders } from './proxy-headers.ts';
import type { RequestSteps } from './serve-request.ts';
import { tunnelUpgrade, type UpgradeOutcome } from './upgrade-tunnel.ts';

// An Upgrade's way through the edge: the same steps as a request's (serve-request.ts), on a
// fresh stream of its own, recorded once when its connection closes. The endpoint's policy runs
// on its head as on a request's; an answer of the policy refuses the Upgrade with its status.

/** Serves an Upgrade for `host`: to this instance's session, else through `relay` to its owner's. */
export async function serveUpgrade(
  steps: RequestSteps,
  host: string,
  request: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  peer: Peer,
  relay: ((host: string) => Promise<boolean>) | undefined,
): Promise<void> {
  // Bytes the client sends before the tunnel exists wait in the socket (the pipe resumes it).
  socket.pause();
  const route = await steps.finder.find(host, peer, relay);
  if ('relayed' in route) return;
  if ('missing' in route) {
    const unavailable = route.failed === 'ip-check';
    return refuseUpgrade(
      socket,
      unavailable ? 503 : 502,
      unavailable ? 'Service Unavailable' : 'Bad Gateway',
    );
  }
  const { session, ipDecision } = route;
  let decisions: Decisions | undefined;
  const done = (statusCode: number, outcome?: UpgradeOutcome) =>
    steps.record(session.facts.credential.accountId, peer, request, {
      requestBytes: outcome?.requestBytes ?? 0,
      response: {
        statusCode,
        headers: outcome?.headers ?? {},
        bodyLength: outcome?.responseBytes ?? 0,
      },
      connectionReused: false,
      ipDecision,
      decisions,
    });
  if (ipDecision === 'block') {
    refuseUpgrade(socket, 403, 'Forbidden');
    return done(403);
  }
  let fields = request.headers;
  const cloud = await steps.policies?.forHost(host);
  const endpoint =
    cloud !== undefined && cloud.accountId === session.facts.credential.accountId
      ? cloud
      : session.policy;
  if (endpoint !== undefined) {
    let { x } = await requestPhases(endpoint, steps.policies!.services, request, host, peer);
    // The agent endpoint's own policy runs after the cloud one's (docs/decisions.md#policy-chain).
    if (endpoint === cloud && session.policy !== undefined && !x.answer && !x.close && !x.forward) {
      x = await nextPhases(session.policy, x);
    }
    decisions = x.decisions;
    const status = x.answer?.statusCode ?? (x.close || x.forward ? 502 : undefined);
    if (status !== undefined) {
      refuseUpgrade(socket, status, STATUS_CODES[status] ?? 'Refused');
      return done(status);
    }
    fields = toNodeHeaders(x.request?.headers ?? {});
  }
  const options = {
    connect: steps.streams(session, peer).fresh,
    host,
    headers: forwardedHeaders(request, host, peer, true, fields),
    timeoutMs: steps.timeoutMs,
    logger: steps.logger,
  };
  tunnelUpgrade(request, socket, head, options, (outcome) => done(outcome.statusCode, outcome));
}
