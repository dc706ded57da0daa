import { AppError } from '../../shared/errors.ts';
import type { ExtraRoute, Field, JsonSchema, Resource } from './resource-types.ts';
import { TUNNEL_SESSION_ROUTES } from './tunnel-sessions/declaration.ts';
import { TUNNEL_ROUTES } from './tunnels/declaration.ts';

// What REST declarations share: the common fields, description and metadata, the tap and
// certificate-policy shapes; the routes of no resource; and what is derived alike for every
// resource (its 404, its audit event names). Each resource is declared in its family's
// resource.ts (objects/families.ts lists them); request checks (body-schema.ts), list routes,
// the OpenAPI document (openapi.ts) and the CLI derive from those declarations.

/** The query parameters every tap takes (src/data-plane/pipeline/taps.ts TAP_LIMITS). */
export const TAP_QUERY = {
  rate: 'events per second at most (1-100, default 10); above it, a sample, each message says so',
  max_seconds: 'how long the tap stays open (1-600, default 60)',
};

/** The query parameter of GET /pipeline/stats. */
export const STATS_QUERY = {
  max_seconds:
    'with Accept: text/event-stream, how long the stream stays open (1-600, default 60); it ends with an `end` event',
};

/** What a tap route does, for its summary. */
export const TAP_SUMMARY =
  'Stream (Server-Sent Events) what the subscription delivers now, after field selection; lossy, bounded';

/** One event of a tap's stream, as its `data` says (events named `event`). */
export const TAP_EVENT_SCHEMA = object({
  event: { type: 'object', description: 'the record as the destination gets it' },
  sampled: { type: 'boolean', description: 'true when skipped > 0: only a sample is shown' },
  skipped: {
    type: 'integer',
    description: 'matched since the previous message and not shown (rate cap, full buffer)',
  },
  matched: { type: 'integer', description: 'matched since the tap opened' },
  shown: { type: 'integer', description: 'shown since the tap opened, this one included' },
  dropped: { type: 'integer', description: 'dropped so far because the buffer was full' },
});

export const str = { type: 'string' } as const;
export const ref = { type: 'object', properties: { id: str, uri: str }, required: ['id', 'uri'] };

/** The fields every resource shows first. */
export const COMMON: Record<string, Field> = {
  id: { schema: str, serverAssigned: true, doc: 'unique identifier' },
  uri: { schema: str, serverAssigned: true, doc: 'URI of this object' },
  created_at: {
    schema: { ...str, format: 'date-time' },
    serverAssigned: true,
    doc: 'creation time',
  },
};

/** description and metadata, bounded in UTF-8 bytes or, for subscriptions, characters. */
export function describedBy(unit: 'maxBytes' | 'maxChars'): Record<string, Field> {
  const bound = (max: number) =>
    unit === 'maxBytes' ? { maxLength: max, 'x-max-utf8-bytes': max } : { maxLength: max };
  return {
    description: {
      schema: { ...str, ...bound(255) },
      text: { [unit]: 255 },
      doc: 'human-readable description',
    },
    metadata: {
      schema: { ...str, ...bound(4096) },
      text: { [unit]: 4096 },
      doc: 'arbitrary user-defined data',
    },
  };
}

/** A JSON object schema taking `properties`, of which `required` must be given. */
export function object(
  properties: Record<string, JsonSchema>,
  required: string[] = [],
): JsonSchema {
  return { type: 'object', properties, required, additionalProperties: false };
}

export const strings = { type: 'array', items: str } as const;

const count = (description: string): JsonSchema => ({ type: 'integer', description });

/** GET /pipeline/stats: the caller's account's counters on this instance since it started. */
const PIPELINE_STATS_SCHEMA = object({
  at: { type: 'string', format: 'date-time' },
  account_id: str,
  events_received: count('its events in acknowledged Publish requests'),
  events_matched: count('of those, the ones that matched at least one of its subscriptions'),
  events_rejected: count('its events in refused Publish requests'),
  records_delivered: count('records its destinations wrote'),
  records_spooled: count('records its destinations spooled while failing'),
  sink_errors: count('failed writes of its destinations'),
  backlog_records: count('records waiting in its destinations’ spools'),
  destinations: {
    type: 'array',
    items: object({
      id: str,
      status: { type: 'string', enum: ['ok', 'retrying', 'parked', 'unknown'] },
      last_error: { type: ['string', 'null'] },
      backlog_records: count('records waiting in its spool'),
      records_delivered: count('records it wrote'),
      records_spooled: count('records it spooled'),
      sink_errors: count('failed writes'),
    }),
  },
  subscriptions: {
    type: 'array',
    items: object({
      id: str,
      types: strings,
      events_matched: count('events it matched, after its filter and sampling'),
    }),
  },
});

/** An Agent Ingress's or reserved domain's certificate policy; an omitted value takes the first choice. */
export const CERT_POLICY_SHAPE = object({
  authority: { enum: ['letsencrypt'] },
  private_key_type: { enum: ['rsa', 'ecdsa'] },
});

/**
 * Routes of no resource, named `<group>.<operation>` (OpenAPI `Group.operation`, CLI
 * `api <group> <operation>`); their paths are absolute.
 */
export const TOP_LEVEL_ROUTES: readonly ExtraRoute[] = [
  {
    name: 'account.get',
    method: 'GET',
    path: '/account',
    summary: 'The calling API key’s account (whoami): its id is what published events carry',
    status: 200,
    response: ref,
  },
  {
    name: 'filters.preview',
    method: 'POST',
    path: '/filters/preview',
    summary:
      'Compile a filter and field selection (400 with the error position), then stream (SSE) what it would match now',
    status: 200,
    request: object(
      {
        type: { ...str, description: 'a traffic event type, e.g. http_request_complete.v0' },
        filter: { ...str, description: 'CEL filter; empty: every event' },
        fields: { ...strings, description: 'field selection; empty: every field' },
      },
      ['type'],
    ),
    query: TAP_QUERY,
    stream: true,
    response: TAP_EVENT_SCHEMA,
  },
  {
    name: 'pipeline.stats',
    method: 'GET',
    path: '/pipeline/stats',
    summary:
      "The caller's account's pipeline counters (events, subscriptions' matches, destinations) as JSON; with Accept: text/event-stream, one every second for max_seconds",
    status: 200,
    query: STATS_QUERY,
    response: PIPELINE_STATS_SCHEMA,
  },
  ...TUNNEL_SESSION_ROUTES,
  ...TUNNEL_ROUTES,
];

/** The 404 for an id of `resource` the caller's account does not hold. */
export function notFound(resource: Resource, id: string): AppError {
  return new AppError('ERR_NOT_FOUND', `${resource.title} "${id}" was not found`, { id });
}

/** The audit event type of a change to `resource`. */
export function auditEvent(resource: Resource, change: 'created' | 'updated' | 'deleted'): string {
  return `${resource.audit}_${change}.v0`;
}
