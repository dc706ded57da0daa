import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Logger } from '../../shared/logger.ts';
import type { EndpointPolicy, Exchange, PolicyServices } from '../policy/index.ts';
import { endpointKey } from '../sessions/internal-endpoints.ts';
import type { LiveSession } from '../sessions/live-session.ts';
import type { SessionFinder } from './find-session.ts';
import type { Peer } from './peer.ts';
import {
  nextPhases,
  type PolicyRun,
  requestPhases,
  toNodeHeaders,
  writeAnswer,
} from './policy-gate.ts';

// The endpoints a request meets, in ngrok's order (docs/decisions.md#policy-chain): the cloud
// endpoint on the Host, whose forward-internal may hand it to an internal endpoint of the same
// account; then the policy of the agent endpoint that gets it (an ngrok agent's Bind). At most
// two policies run, on one exchange's decisions, so the request's event is written once.
// An internal endpoint another instance holds gets the request through the relay, untouched:
// that instance runs the whole chain and writes the event (docs/decisions.md#policy-chain).

/** How the request goes on after the policies' request phases. */
export interface Chain {
  /** The policies that ran, in the order they ran. */
  runs: PolicyRun[];
  /** True when a policy answered or closed the connection: nothing goes to an agent. */
  handled: boolean;
  /** The agent that gets the request (forward-internal's target, or the Host's). */
  session?: LiveSession;
  /** The request as the policies left it, for the agent. */
  via: { target?: string; headers: IncomingMessage['headers']; body?: Readable };
  /** True when forward-internal's target is another instance's, which got the request. */
  relayed?: boolean;
}

/**
 * Relays the request to the instance serving the registry key `key` (false: none does); `body`
 * is the request's body when a policy has read it.
 */
export type RelayTo = (key: string, body?: Readable) => Promise<boolean>;

/** What the chain needs of the edge. */
export interface ChainSteps {
  finder: Pick<SessionFinder, 'internal'>;
  services: PolicyServices | undefined;
  /** The account's internal endpoints other instances hold; absent: none is looked up. */
  internalElsewhere?: (accountId: string) => Promise<ReadonlySet<string>>;
  logger: Logger;
}

const NONE: ReadonlySet<string> = new Set();

/**
 * The account's internal endpoints other instances hold, looked up only when `first` may
 * forward-internal and the request may still be relayed. A failed look-up counts none (logged).
 */
async function internalsElsewhere(
  steps: ChainSteps,
  first: EndpointPolicy,
  relay: RelayTo | undefined,
): Promise<ReadonlySet<string>> {
  const { internalElsewhere } = steps;
  if (relay === undefined || internalElsewhere === undefined) return NONE;
  if (!first.policy.types.has('forward-internal')) return NONE;
  return internalElsewhere(first.accountId).catch((error: unknown) => {
    steps.logger.error({ err: error }, 'edge: internal endpoints look-up failed');
    return NONE;
  });
}

/** Ends the request when a policy answered or closed it (true then), else false. */
export type Settle = (x: Exchange) => boolean;

/** A request's Settle: the policy's answer, or the connection closed. */
export function settleRequest(request: IncomingMessage, response: ServerResponse): Settle {
  return (x) => {
    if (x.close) {
      request.socket.destroy();
      return true;
    }
    if (x.answer === undefined) return false;
    request.resume();
    writeAnswer(response, x.answer, x.setCookies);
    return true;
  };
}

/** Runs the request phases of the endpoints `request` meets; the body waits meanwhile. */
export async function runChain(
  steps: ChainSteps,
  target: { session?: LiveSession; endpoint?: EndpointPolicy },
  host: string,
  request: IncomingMessage,
  peer: Peer,
  settle: Settle,
  relay?: RelayTo,
): Promise<Chain> {
  let { session } = target;
  const first = target.endpoint ?? session?.policy;
  if (first === undefined)
    return { runs: [], handled: false, session, via: { headers: request.headers } };
  // The service always has them; an edge wired without them must not skip a policy.
  if (steps.services === undefined) throw new Error('the edge has no policy services');
  const { accountId } = first;
  // The body waits while the policies run (a byte counter made it flow): nothing of it is lost.
  request.pause();
  const elsewhere = await internalsElsewhere(steps, first, relay);
  const online = (hostname: string) =>
    steps.finder.internal(accountId, hostname) !== undefined || elsewhere.has(hostname);
  const ran = await requestPhases(first, steps.services, request, host, peer, online);
  let x = ran.x;
  const runs: PolicyRun[] = [{ endpoint: first, x }];
  if (settle(x)) return { runs, handled: true, via: { headers: {} } };
  let second: EndpointPolicy | undefined;
  if (x.forward !== undefined) {
    session = steps.finder.internal(accountId, x.forward.hostname);
    if (session === undefined && relay !== undefined) {
      const key = endpointKey(accountId, x.forward.hostname);
      // A failed look-up leaves no agent here: the edge's 502.
      const relayed = await relay(key, ran.body()).catch((error: unknown) => {
        steps.logger.error({ err: error, key }, 'edge: relay look-up failed');
        return false;
      });
      if (relayed) return { runs: [], handled: true, relayed, via: { headers: {} } };
    }
    second = session?.policy;
  } else if (first === target.endpoint) {
    second = session?.policy;
  }
  if (second !== undefined) {
    x = await nextPhases(second, x);
    runs.push({ endpoint: second, x });
    if (settle(x)) return { runs, handled: true, via: { headers: {} } };
  }
  const via = {
    target: x.request?.target,
    headers: toNodeHeaders(x.request?.headers ?? {}),
    body: ran.body(),
  };
  // Flows again from the next tick, once forwardRequest listens.
  if (via.body === undefined) request.resume();
  return { runs, handled: false, session, via };
}
