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

export async function tapRoutes(app: FastifyInstance, deps: ApiDeps): Promise<void> {
  const { db } = deps;
  const open = new Set<EventStream>();
  /** How each open stats stream ends, saying why. */
  const statsEnds = new Set<(reason: 'max_duration' | 'shutdown') => void>();
  // Taps and stats streams say why they end; the other streams just close.
  app.addHook('preClose', async () => {
    deps.taps?.closeAll();
    for (const end of statsEnds) end('shutdown');
    for (const stream of open) stream.end();
  });

  /** Opens an event stream once the account has a place for it (ERR_RATE_LIMITED if not). */
  function openStream(request: FastifyRequest, reply: FastifyReply): EventStream {
    const release = deps.longLived.take(request.caller.accountId);
    const stream = openEventStream(request, reply);
    open.add(stream);
    stream.onClose(() => {
      open.delete(stream);
      release();
    });
    return stream;
  }

  function available<T>(value: T | undefined, what: string): T {
    if (value === undefined) throw new AppError('ERR_UNAVAILABLE', `${what} is not available here`);
    return value;
  }

  /** Opens the stream and the tap; the request has been checked. */
  function tap(
    request: FastifyRequest,
    reply: FastifyReply,
    taps: Taps,
    spec: TapTarget,
    bounds: TapBounds,
  ) {
    const stream = openStream(request, reply);
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

  /** The caller's subscription, or 404 (another account's is not found either). */
  async function subscriptionOf(request: FastifyRequest<Params>) {
    const row = await getEventSubscription(db, request.caller.accountId, request.params.id);
    if (row === undefined) throw notFound(EVENT_SUBSCRIPTIONS, request.params.id);
    return row;
  }

  app.get<Params>('/event_subscriptions/:id/tap', async (request, reply) => {
    const bounds = readBounds(request.query);
    const row = await subscriptionOf(request);
    const taps = available(deps.taps, 'the tap');
    tap(request, reply, taps, { kind: 'subscription', subscriptionId: row.id }, bounds);
  });

  app.get<SourceParams>('/event_subscriptions/:id/sources/:type/tap', async (request, reply) => {
    const bounds = readBounds(request.query);
    const row = await subscriptionOf(request);
    const { type } = request.params;
    if (!(await sourcesOf(db, [row.id])).get(row.id)!.some((source) => source.type === type)) {
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
    tap(request, reply, taps, { kind: 'subscription', subscriptionId: row.id, type }, bounds);
  });

  // Compiled here, so a bad filter is a 400 with its position before any stream opens.
  app.post(PREVIEW.path, async (request, reply) => {
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
    tap(request, reply, taps, { kind: 'preview', accountId, type, filter, fields }, bounds);
  });

  // A stream of them ends after max_seconds, as a tap does, with an `end` event saying so.
  app.get(STATS.path, async (request, reply) => {
    const maxSeconds = bound(queryOf(request.query, STATS_QUERY), 'max_seconds', STATS_SECONDS);
    const stats = available(deps.stats, 'the pipeline');
    const { accountId } = request.caller;
    if (!request.headers.accept?.includes('text/event-stream')) return stats(accountId);
    const stream = openStream(request, reply);
    const send = () => stream.send('stats', JSON.stringify(stats(accountId)));
    const end = (reason: 'max_duration' | 'shutdown') => {
      stream.send('end', JSON.stringify({ reason }));
      stream.end();
    };
    const timer = setInterval(send, STATS_INTERVAL_MS);
    const deadline = setTimeout(() => end('max_duration'), maxSeconds * 1000);
    statsEnds.add(end);
    stream.onClose(() => {
      clearInterval(timer);
      clearTimeout(deadline);
      statsEnds.delete(end);
    });
    send();
  });
}
