import {
  CREDENTIAL_HEADERS,
  HEADER_NAME,
  MAX_REDACT_HEADERS,
  REDACTED,
  TOKEN_QUERY_PARAMS,
} from '../../../data-plane/redaction/policy.ts';
import type { JsonSchema, Resource } from '../resource-types.ts';
import {
  COMMON,
  describedBy,
  object,
  ref,
  str,
  strings,
  TAP_EVENT_SCHEMA,
  TAP_QUERY,
  TAP_SUMMARY,
} from '../resources.ts';

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
  redact_headers: {
    type: 'array',
    maxItems: MAX_REDACT_HEADERS,
    items: { type: 'string', pattern: HEADER_NAME.source },
    description: `http_request_complete.v0: header names (case-insensitive, at most ${MAX_REDACT_HEADERS}) whose values are delivered as "${REDACTED}" on top of ${CREDENTIAL_HEADERS.join(', ')}`,
  },
  keep_credentials: {
    type: 'boolean',
    description: `http_request_complete.v0: true delivers ${CREDENTIAL_HEADERS.join(', ')} and the token query parameters (${TOKEN_QUERY_PARAMS.join(', ')}) in clear; false (default) as "${REDACTED}" (docs/security.md)`,
  },
});

/** An event source: its event type, filter, field selection, sample rate and redaction. */
export const SOURCE_SCHEMA = object(
  {
    type: { ...str, description: 'event type, e.g. http_request_complete.v0' },
    ...(SOURCE_UPDATE_SCHEMA.properties as Record<string, JsonSchema>),
    uri: { ...str, readOnly: true },
  },
  ['type'],
);

/** Event subscriptions: which events go to which destinations; sources are a sub-collection. */
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
