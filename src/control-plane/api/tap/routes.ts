import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isTrafficType } from '../../../catalogue/index.ts';
import type { TapTarget } from '../../../data-plane/pipeline/tap-tee.ts';
import {
  TAP_LIMITS,
  type TapBounds,
  type TapMessage,
  type Taps,
} from '../../../data-plane/pipeline/taps.ts';
import { AppError } from '../../../shared/errors.ts';
import { getEventSubscription, sourcesOf } from '../../../store/event-subscriptions.ts';
import type { ApiDeps } from '../deps.ts';
import { EVENT_SUBSCRIPTIONS } from '../event-subscriptions/resource.ts';
import { readSource } from '../event-subscriptions/sources.ts';
import { notFound, STATS_QUERY, TAP_QUERY, TOP_LEVEL_ROUTES } from '../resources.ts';
import { checkShape, FIELD_CODES } from '../validate.ts';
import { type EventStream, openEventStream } from './sse.ts';

// The live views of the pipeline: taps on a subscription (or one of its sources), a preview of
// a filter not saved yet, and the caller's account's counters. Each answers Server-Sent Events
// for at most max_seconds, within the account's places for long-lived answers
// (src/control-plane/api/long-lived.ts); every stream ends when the service closes, so none holds shutdown up.

const PREVIEW = TOP_LEVEL_ROUTES.find((route) => route.name === 'filters.preview')!;
const STATS = TOP_LEVEL_ROUTES.find((route) => route.name === 'pipeline.stats')!;
const STATS_INTERVAL_MS = 1_000;
/** How long a stream of the stats stays open: the taps' bounds. */
const STATS_SECONDS = TAP_LIMITS.maxSeconds;

type Params = { Params: { id: string } };
type SourceParams = { Params: { id: string; type: string } };

/** One bound from the query: an integer in [1, max], or the default when absent. */
function bound(
  query: Record<string, unknown>,
  name: string,
  limits: { default: number; max: number },
) {
  const value = query[name];
  if (value === undefined) return limits.default;
  const number = Number(value);
  if (!Number.isInteger(number) || number < 1 || number > limits.max) {
    throw new AppError(
      'ERR_INVALID_QUERY',
      `"${name}" must be an integer from 1 to ${limits.max}`,
      {
        field: name,
      },
    );
  }
  return number;
}

/** The query's parameters, when each is one `allowed` names. */
function queryOf(query: unknown, allowed: Record<string, string>): Record<string, unknown> {
  const params = (query ?? {}) as Record<string, unknown>;
  for (const key of Object.keys(params)) {
    if (!Object.hasOwn(allowed, key)) {
      throw new AppError(
        'ERR_INVALID_QUERY',
        `unknown query parameter "${key}"; allowed: ${Object.keys(allowed).join(', ')}`,
        { field: key },
      );
    }
  }
  return params;
}

/** The tap's bounds from `?rate=&max_seconds=`; any other parameter is refused. */
function readBounds(query: unknown): TapBounds {
  const params = queryOf(query, TAP_QUERY);
  return {
    ratePerSecond: bound(params, 'rate', TAP_LIMITS.rate),
    maxSeconds: bound(params, 'max_seconds', TAP_LIMITS.maxSeconds),
  };
}

/** A tap message as the `data` of its event: the record is spliced in, never parsed again. */
function dataOf(message: TapMessage): string {
  if (message.kind === 'end') {
    const { reason, matched, shown } = message;
    return JSON.stringify({ reason, matched, shown });
  }
  const { sampled, skipped, matched, shown, dropped } = message;
  const counts = JSON.stringify({ sampled, skipped, matched, shown, dropped });
  return `${counts.slice(0, -1)},"event":${message.json}}`;
}

/** The live views' routes: taps, the filter preview, the account's pipeline stats. */
export async function tapRoutes(app: FastifyInstance, deps: ApiDeps): Promise<void> {
  const streams = new LiveStreams(deps);
  app.addHook('preClose', async () => streams.closeAll());
  app.get<Params>('/event_subscriptions/:id/tap', (request, reply) =>
    subscriptionTap(streams, deps, request, reply),
  );
  app.get<SourceParams>('/event_subscriptions/:id/sources/:type/tap', (request, reply) =>
    sourceTap(streams, deps, request, reply),
  );
  app.post(PREVIEW.path, (request, reply) => previewTap(streams, deps, request, reply));
  app.get(STATS.path, (request, reply) => pipelineStats(streams, deps, request, reply));
}

type StatsEnd = 'max_duration' | 'shutdown';

/** The event streams open on this instance, each within its account's places; all end at close. */
class LiveStreams {
  private readonly deps: ApiDeps;
  private readonly open = new Set<EventStream>();
  /** How each open stats stream ends, saying why. */
  private readonly statsEnds = new Set<(reason: StatsEnd) => void>();

  constructor(deps: ApiDeps) {
    this.deps = deps;
  }

  // Taps and stats streams say why they end; the other streams just close.
  closeAll(): void {
    this.deps.taps?.closeAll();
    for (const end of this.statsEnds) end('shutdown');
    for (const stream of this.open) stream.end();
  }

  /** Opens an event stream once the account has a place for it (ERR_RATE_LIMITED if not). */
  openStream(request: FastifyRequest, reply: FastifyReply): EventStream {
    const release = this.deps.longLived.take(request.caller.accountId);
    const stream = openEventStream(request, reply);
    this.open.add(stream);
    stream.onClose(() => {
      this.open.delete(stream);
      release();
    });
    return stream;
  }

  /** Opens the stream and the tap; the request has been checked. */
  tap(
    request: FastifyRequest,
    reply: FastifyReply,
    taps: Taps,
    spec: TapTarget,
    bounds: TapBounds,
  ) {
    const stream = this.openStream(request, reply);
    const close = taps.open(request.caller.accountId, spec, bounds, (message) => {
      stream.send(message.kind, dataOf(message));
      if (message.kind === 'end') stream.end();
    });
    stream.send(
      'open',
      JSON.stringify({ rate: bounds.ratePerSecond, max_seconds: bounds.maxSeconds }),
    );
    stream.onClose(close);
  }

  // A stream of the stats ends after max_seconds, as a tap does, with an `end` event saying so.
  statsStream(
    request: FastifyRequest,
    reply: FastifyReply,
    stats: () => unknown,
    maxSeconds: number,
  ) {
    const stream = this.openStream(request, reply);
    const send = () => stream.send('stats', JSON.stringify(stats()));
    const end = (reason: StatsEnd) => {
      stream.send('end', JSON.stringify({ reason }));
      stream.end();
    };
    const timer = setInterval(send, STATS_INTERVAL_MS);
    const deadline = setTimeout(() => end('max_duration'), maxSeconds * 1000);
    this.statsEnds.add(end);
    stream.onClose(() => {
      clearInterval(timer);
      clearTimeout(deadline);
      this.statsEnds.delete(end);
    });
    send();
  }
}

function available<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new AppError('ERR_UNAVAILABLE', `${what} is not available here`);
  return value;
}

/** The caller's subscription, or 404 (another account's is not found either). */
async function subscriptionOf(deps: ApiDeps, request: FastifyRequest<Params>) {
  const row = await getEventSubscription(deps.db, request.caller.accountId, request.params.id);
  if (row === undefined) throw notFound(EVENT_SUBSCRIPTIONS, request.params.id);
  return row;
}

/** GET /event_subscriptions/{id}/tap */
async function subscriptionTap(
  streams: LiveStreams,
  deps: ApiDeps,
  request: FastifyRequest<Params>,
  reply: FastifyReply,
): Promise<void> {
  const bounds = readBounds(request.query);
  const row = await subscriptionOf(deps, request);
  const taps = available(deps.taps, 'the tap');
  streams.tap(request, reply, taps, { kind: 'subscription', subscriptionId: row.id }, bounds);
}

/** GET /event_subscriptions/{id}/sources/{type}/tap */
async function sourceTap(
  streams: LiveStreams,
  deps: ApiDeps,
  request: FastifyRequest<SourceParams>,
  reply: FastifyReply,
): Promise<void> {
  const bounds = readBounds(request.query);
  const row = await subscriptionOf(deps, request);
  const { type } = request.params;
  if (!(await sourcesOf(deps.db, [row.id])).get(row.id)!.some((source) => source.type === type)) {
    throw new AppError(
      'ERR_NOT_FOUND',
      `event subscription "${row.id}" has no source of type "${type}"`,
      {
        id: row.id,
        type,
      },
    );
  }
  const taps = available(deps.taps, 'the tap');
  streams.tap(request, reply, taps, { kind: 'subscription', subscriptionId: row.id, type }, bounds);
}

// Compiled here, so a bad filter is a 400 with its position before any stream opens.
async function previewTap(
  streams: LiveStreams,
  deps: ApiDeps,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<void> {
  const bounds = readBounds(request.query);
  // The preview's own shape first (no sample_rate: a preview shows every match), then the
  // checks a source gets when it is saved.
  checkShape(request.body, PREVIEW.request!, '', FIELD_CODES);
  const source = readSource(request.body, '');
  if (!isTrafficType(source.type)) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `a preview shows traffic events; "${source.type}" is not one`,
      {
        field: 'type',
        type: source.type,
      },
    );
  }
  const taps = available(deps.taps, 'the preview');
  const { accountId } = request.caller;
  const { type, filter, fields } = source;
  streams.tap(request, reply, taps, { kind: 'preview', accountId, type, filter, fields }, bounds);
}

/** GET /pipeline/stats: the counters once, or as a stream when the client accepts one. */
async function pipelineStats(
  streams: LiveStreams,
  deps: ApiDeps,
  request: FastifyRequest,
  reply: FastifyReply,
) {
  const maxSeconds = bound(queryOf(request.query, STATS_QUERY), 'max_seconds', STATS_SECONDS);
  const stats = available(deps.stats, 'the pipeline');
  const { accountId } = request.caller;
  if (!request.headers.accept?.includes('text/event-stream')) return stats(accountId);
  streams.statsStream(request, reply, () => stats(accountId), maxSeconds);
}
