import type { SlabRegistry } from './block-slabs.ts';
import { joinPublishResponses } from './publish-response.ts';
import type { TapSpec } from './tap-tee.ts';
import type { RoutePool } from './worker-pool.ts';
import type { RouteResult } from './worker-protocol.ts';

// A request's events routed by two workers at once when both are idle: its latency is then the
// routing of half its events, not all of them (under load every worker is busy and requests go
// whole). The halves are two PublishRequests cut at an event's boundary; their results are joined
// as one request's. Only a request that reads as plain repeated `events` is cut: anything else
// goes whole, and the worker answers it as it would.

type Routed = Extract<RouteResult, { kind: 'routed' }>;

/** Below this many events a request is not worth a second worker's hand-off. */
export const MIN_SPLIT_EVENTS = 64;

const EVENTS_TAG = (1 << 3) | 2; // PublishRequest.events = 1, length-delimited

/** A varint at `pos`: [value, next position], or undefined past `end` or beyond 32 bits. */
function varint(bytes: Uint8Array, pos: number, end: number): [number, number] | undefined {
  let value = 0;
  for (let shift = 0; shift < 35 && pos < end; shift += 7) {
    const b = bytes[pos++];
    value += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) return [value, pos];
  }
  return undefined;
}

/**
 * Where to cut a PublishRequest in two halves of whole events (the event boundary nearest its
 * middle), or undefined when it has fewer than `minEvents` events, more than `maxEvents`, or
 * anything but well-framed events.
 */
export function splitPoint(
  bytes: Uint8Array,
  minEvents = MIN_SPLIT_EVENTS,
  maxEvents = Number.POSITIVE_INFINITY,
): number | undefined {
  const middle = bytes.length / 2;
  let events = 0;
  let best: number | undefined;
  let pos = 0;
  while (pos < bytes.length) {
    if (bytes[pos] !== EVENTS_TAG) return undefined;
    const length = varint(bytes, pos + 1, bytes.length);
    if (length === undefined || length[0] > bytes.length - length[1]) return undefined;
    pos = length[1] + length[0];
    if (++events > maxEvents) return undefined;
    if (
      pos < bytes.length &&
      (best === undefined || Math.abs(pos - middle) < Math.abs(best - middle))
    ) {
      best = pos;
    }
  }
  return events >= minEvents ? best : undefined;
}

/** The two halves of a request, each in a buffer of its own (a task copies its whole buffer). */
export function halves(bytes: Uint8Array, at: number): [Uint8Array, Uint8Array] {
  const own = (start: number, end: number) => Uint8Array.prototype.slice.call(bytes, start, end);
  return [own(0, at), own(at, bytes.length)];
}

/** The halves' results as the whole request's, in order: the first half's records first. */
export function joinRouted(first: Routed, second: Routed): Routed {
  const tapped =
    first.tapped === undefined && second.tapped === undefined
      ? {}
      : { tapped: [...(first.tapped ?? []), ...(second.tapped ?? [])] };
  const slabs = [...(first.slabs ?? []), ...(second.slabs ?? [])];
  return {
    kind: 'routed',
    response: joinPublishResponses(first, second),
    accepted: first.accepted + second.accepted,
    matched: first.matched + second.matched,
    deliveries: [...first.deliveries, ...second.deliveries],
    bytes: first.bytes + second.bytes,
    tally: {
      accounts: [...first.tally.accounts, ...second.tally.accounts],
      subscriptions: [...first.tally.subscriptions, ...second.tally.subscriptions],
    },
    ...tapped,
    ...(slabs.length === 0 ? {} : { slabs }),
  };
}

/**
 * The request's result from one worker or, when two are idle, from both, each routing half of
 * its events. A half that is not routed (invalid, refused, failed) has the whole request routed
 * again by one worker, so that its answer is exactly the unsplit one; the other half's blocks
 * are given back first.
 */
export async function routeByIdleWorkers(
  pool: RoutePool,
  slabs: SlabRegistry,
  request: Uint8Array,
  receivedAt: number,
  taps?: readonly TapSpec[],
): ReturnType<RoutePool['route']> {
  const at = pool.idle() >= 2 ? splitPoint(request, MIN_SPLIT_EVENTS, pool.maxEvents) : undefined;
  if (at === undefined) return pool.route(request, receivedAt, taps);
  const results = await Promise.allSettled(
    halves(request, at).map((half) => pool.route(half, receivedAt, taps)),
  );
  const routed = results.flatMap((r) =>
    r.status === 'fulfilled' && r.value.kind === 'routed' ? [r.value] : [],
  );
  if (routed.length === 2) return joinRouted(routed[0], routed[1]);
  for (const result of routed) {
    slabs.learn(result.slabs);
    for (const delivery of result.deliveries) if ('slab' in delivery) slabs.free(delivery.slab);
  }
  return pool.route(request, receivedAt, taps);
}
