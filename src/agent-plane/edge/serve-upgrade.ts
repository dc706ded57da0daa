import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { refuseUpgrade } from './edge-answers.ts';
import type { Peer } from './peer.ts';
import { forwardedHeaders } from './proxy-headers.ts';
import type { RequestSteps } from './serve-request.ts';
import { tunnelUpgrade, type UpgradeOutcome } from './upgrade-tunnel.ts';

// An Upgrade's way through the edge: the same steps as a request's (serve-request.ts), on a
// fresh stream of its own, recorded once when its connection closes.

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
  const done = (statusCode: number, outcome?: UpgradeOutcome) =>
    steps.record(session, peer, request, {
      requestBytes: outcome?.requestBytes ?? 0,
      response: {
        statusCode,
        headers: outcome?.headers ?? {},
        bodyLength: outcome?.responseBytes ?? 0,
      },
      connectionReused: false,
      ipDecision,
    });
  if (ipDecision === 'block') {
    refuseUpgrade(socket, 403, 'Forbidden');
    return done(403);
  }
  const options = {
    connect: steps.streams(session, peer).fresh,
    host,
    headers: forwardedHeaders(request, host, peer, true),
    timeoutMs: steps.timeoutMs,
    logger: steps.logger,
  };
  tunnelUpgrade(request, socket, head, options, (outcome) => done(outcome.statusCode, outcome));
}
