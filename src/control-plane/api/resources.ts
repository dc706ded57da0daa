import { SINKS } from '../../data-plane/sinks/index.ts';
import { AppError } from '../../shared/errors.ts';
import type { ExtraRoute, Field, JsonSchema, Resource } from './resource-types.ts';
import { TUNNEL_SESSION_ROUTES } from './tunnel-sessions/declaration.ts';

// Every REST resource, declared once: its fields (JSON Schema, bounds, which are required,
// updatable, server-assigned, write-only or shown once), its id prefix, path, list key and audit
// event. Request checks (body.ts), list routes, not-found errors, audit event names and the
// OpenAPI document (openapi.ts) are derived from these; a route module keeps only what is truly
// its own (a domain's normalisation, a target's parsing, a filter's compilation).

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

const TAP_SUMMARY =
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

/** The target kinds this deployment delivers to: each sink's own settings schema. */
export const TARGET_SHAPES: Record<string, JsonSchema> = Object.fromEntries(
  SINKS.map((sink) => [sink.kind, { ...sink.settings, description: sink.doc }]),
);

/** An Agent Ingress's certificate policy; an omitted value takes the first choice. */
export const CERT_POLICY_SHAPE = object({
  authority: { enum: ['letsencrypt'] },
  private_key_type: { enum: ['rsa', 'ecdsa'] },
});

/** What PATCH of an event source takes (its type names it, so it cannot change). */
export const SOURCE_UPDATE_SCHEMA = object({
  filter: { ...str, description: 'CEL filter; empty: every event' },
  fields: { ...strings, description: 'field selection; empty: every field' },
  sample_rate: {
    type: 'number',
    exclusiveMinimum: 0,
    maximum: 1,
    description:
      'share of the events passing the filter that are delivered, chosen by event id (the same on every instance and retry); 1: every event',
  },
});

/** An event source: its event type, filter, field selection and sample rate. */
export const SOURCE_SCHEMA = object(
  {
    type: { ...str, description: 'event type, e.g. http_request_complete.v0' },
    ...(SOURCE_UPDATE_SCHEMA.properties as Record<string, JsonSchema>),
    uri: { ...str, readOnly: true },
  },
  ['type'],
);

/** The API key resource. */
export const API_KEYS: Resource = {
  path: 'api_keys',
  title: 'API key',
  idPrefix: 'ak',
  listKey: 'keys',
  audit: 'api_key',
  example: ({ tag }) => ({ description: tag }),
  fields: {
    ...COMMON,
    ...describedBy('maxBytes'),
    token: {
      schema: { type: ['string', 'null'] },
      serverAssigned: true,
      shownOnce: true,
      doc: 'the bearer token; shown only when the key is created, null afterwards',
    },
  },
};

/** The Agent Ingress resource. */
export const AGENT_INGRESSES: Resource = {
  path: 'agent_ingresses',
  title: 'Agent Ingress',
  idPrefix: 'agin',
  listKey: 'ingresses',
  audit: 'agent_ingress',
  example: ({ tag }) => ({ domain: `${tag}.example.org` }),
  fields: {
    ...COMMON,
    ...describedBy('maxBytes'),
    domain: {
      schema: str,
      text: {},
      required: true,
      notUpdatable: 'create a new Agent Ingress',
      doc: 'the domain agents connect to; lower-cased, unique across the service',
    },
    ns_targets: {
      schema: { type: 'array', items: str },
      serverAssigned: true,
      doc: 'name servers',
    },
    region_domains: {
      schema: { type: 'array', items: str },
      serverAssigned: true,
      doc: 'one domain per region',
    },
    certificate_management_policy: {
      schema: { ...CERT_POLICY_SHAPE, type: ['object', 'null'] },
      doc: 'automatic certificates; null turns them off',
    },
    certificate_management_status: {
      schema: { type: ['object', 'null'] },
      serverAssigned: true,
      doc: 'renewal time and the current provisioning job',
    },
  },
};

/** The event destination resource. */
export const EVENT_DESTINATIONS: Resource = {
  path: 'event_destinations',
  title: 'event destination',
  idPrefix: 'ed',
  listKey: 'event_destinations',
  audit: 'event_destination',
  example: ({ tag }) => ({ description: tag, target: { file: { path: `events-${tag}` } } }),
  fields: {
    ...COMMON,
    ...describedBy('maxBytes'),
    format: { schema: { enum: ['JSON', 'json'] }, doc: 'the only format is JSON (any case)' },
    target: {
      schema: {
        ...object(TARGET_SHAPES),
        minProperties: 1,
        maxProperties: 1,
        description: 'exactly one of file, kafka, clickhouse; passwords are write-only',
      },
      required: true,
      checkedByRoute: true,
      doc: 'where events go: file, kafka or clickhouse',
    },
    health: {
      schema: { type: 'object' },
      serverAssigned: true,
      sometimes: true,
      doc: 'delivery health, when the pipeline reports it',
    },
  },
  deleteQuery: { discard_backlog: 'true: drop the events still waiting in its spool' },
  extraRoutes: [
    {
      name: 'test',
      method: 'POST',
      path: '/{id}/test',
      summary: 'Send one test event through the pipeline',
      status: 200,
      response: { type: 'object' },
    },
  ],
};

/** The event subscription resource, with its sources as a sub-collection. */
export const EVENT_SUBSCRIPTIONS: Resource = {
  path: 'event_subscriptions',
  title: 'event subscription',
  idPrefix: 'esb',
  listKey: 'event_subscriptions',
  audit: 'event_subscription',
  example: ({ tag, idOf }) => ({
    description: tag,
    sources: [{ type: 'http_request_complete.v0', filter: 'conn.server_port == 443' }],
    destination_ids: [idOf('event_destinations')],
  }),
  fields: {
    ...COMMON,
    ...describedBy('maxChars'),
    sources: { schema: { type: 'array', items: SOURCE_SCHEMA }, doc: 'event types to deliver' },
    destination_ids: {
      schema: { type: 'array', items: str, writeOnly: true },
      writeOnly: true,
      doc: 'destinations to deliver to, in order',
    },
    destinations: {
      schema: { type: 'array', items: ref },
      serverAssigned: true,
      doc: 'destinations',
    },
  },
  extraRoutes: [
    {
      name: 'sources.list',
      method: 'GET',
      path: '/{id}/sources',
      summary: 'List the sources',
      status: 200,
      response: {
        type: 'object',
        properties: { sources: { type: 'array', items: SOURCE_SCHEMA }, uri: str },
      },
    },
    {
      name: 'sources.create',
      method: 'POST',
      path: '/{id}/sources',
      summary: 'Add a source',
      status: 201,
      request: SOURCE_SCHEMA,
      response: SOURCE_SCHEMA,
    },
    {
      name: 'sources.get',
      method: 'GET',
      path: '/{id}/sources/{type}',
      summary: 'Get a source',
      status: 200,
      response: SOURCE_SCHEMA,
    },
    {
      name: 'sources.update',
      method: 'PATCH',
      path: '/{id}/sources/{type}',
      summary: 'Change a source’s filter or fields',
      status: 200,
      request: SOURCE_UPDATE_SCHEMA,
      response: SOURCE_SCHEMA,
    },
    {
      name: 'sources.delete',
      method: 'DELETE',
      path: '/{id}/sources/{type}',
      summary: 'Remove a source',
      status: 204,
    },
    {
      name: 'tap',
      method: 'GET',
      path: '/{id}/tap',
      summary: TAP_SUMMARY,
      status: 200,
      query: TAP_QUERY,
      stream: true,
      response: TAP_EVENT_SCHEMA,
    },
    {
      name: 'sources.tap',
      method: 'GET',
      path: '/{id}/sources/{type}/tap',
      summary: `${TAP_SUMMARY} (one source)`,
      status: 200,
      query: TAP_QUERY,
      stream: true,
      response: TAP_EVENT_SCHEMA,
    },
  ],
};

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
];

/** The 404 for an id of `resource` the caller's account does not hold. */
export function notFound(resource: Resource, id: string): AppError {
  return new AppError('ERR_NOT_FOUND', `${resource.title} "${id}" was not found`, { id });
}

/** The audit event type of a change to `resource`. */
export function auditEvent(resource: Resource, change: 'created' | 'updated' | 'deleted'): string {
  return `${resource.audit}_${change}.v0`;
}
