import { type IncomingMessage, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Decisions } from '../policy/index.ts';
import type { LiveSession } from '../sessions/live-session.ts';
import { refuseUpgrade } from './edge-answers.ts';
import { type RelayTo, runChain } from './endpoint-chain.ts';
import type { Peer } from './peer.ts';
import { forwardedHeaders } from './proxy-headers.ts';
import type { RequestSteps } from './serve-request.ts';
import { tunnelUpgrade, type UpgradeOutcome } from './upgrade-tunnel.ts';

// An Upgrade's way through the edge: the same steps as a request's (serve-request.ts), on a
// fresh stream of its own, recorded once when its connection closes. The endpoints' policies run
// on its head as on a request's (forward-internal too); an answer refuses the Upgrade with its
// status.

/** Serves an Upgrade for `host`: to this instance's session, else through `relay` to its owner's. */
export async function serveUpgrade(
  steps: RequestSteps,
  host: string,
  request: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  peer: Peer,
  relay: RelayTo | undefined,
): Promise<void> {
  // Bytes the client sends before the tunnel exists wait in the socket (the pipe resumes it).
  socket.pause();
  const route = await steps.finder.find(host, peer, relay);
  if ('relayed' in route) return;
  const session = 'session' in route ? route.session : undefined;
  const cloud = await steps.policies?.forHost(host);
  // A cloud endpoint applies to the hostname's agent only when both are one account's.
  const endpoint =
    cloud !== undefined && (session === undefined || cloud.accountId === accountOf(session))
      ? cloud
      : undefined;
  if ('missing' in route && (endpoint === undefined || route.failed !== undefined)) {
    const unavailable = route.failed === 'ip-check';
    return refuseUpgrade(
      socket,
      unavailable ? 503 : 502,
      unavailable ? 'Service Unavailable' : 'Bad Gateway',
    );
  }
  const ipDecision = 'ipDecision' in route ? route.ipDecision : 'invalid';
  let decisions: Decisions | undefined;
  const done = (statusCode: number, outcome?: UpgradeOutcome) =>
    steps.record(session ? accountOf(session) : endpoint!.accountId, peer, request, {
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
  const refuse = (status: number) => {
    refuseUpgrade(socket, status, STATUS_CODES[status] ?? 'Refused');
    done(status);
    return true;
  };
  if (ipDecision === 'block') return void refuse(403);
  // The same endpoints as a request meets (endpoint-chain.ts); an answer refuses the Upgrade.
  const chain = await runChain(
    { ...steps, services: steps.policies?.services },
    { session, endpoint },
    host,
    request,
    peer,
    (x) => {
      decisions = x.decisions;
      return x.answer !== undefined || x.close ? refuse(x.answer?.statusCode ?? 502) : false;
    },
    relay,
  );
  if (chain.handled) return;
  if (chain.session === undefined) return void refuse(502);
  const options = {
    connect: steps.streams(chain.session, peer).fresh,
    host,
    headers: forwardedHeaders(request, host, peer, true, chain.via.headers),
    timeoutMs: steps.timeoutMs,
    logger: steps.logger,
  };
  tunnelUpgrade(request, socket, head, options, (outcome) => done(outcome.statusCode, outcome));
}

const accountOf = (session: LiveSession) => session.facts.credential.accountId;
