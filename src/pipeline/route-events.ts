import { create, toBinary } from '@bufbuild/protobuf';
import { type DecodedEvent, decodePublishRequest, type EventJson } from '../catalogue/index.ts';
import type { AppError } from '../errors.ts';
import { PublishResponseSchema } from '../gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { newId } from '../ids.ts';
import type { EventRecord } from '../sinks/types.ts';
import { eventsByAccount, RequestTally } from './match-tally.ts';
import type { Routing } from './routing.ts';
import { sampled } from './sampling.ts';
import { createTee, type TapSpec } from './tap-tee.ts';
import type { Delivery, RouteResult } from './worker-protocol.ts';

const EVENT_ID = /^[\x21-\x7e]{1,128}$/;
const MAX_ACCOUNT_ID = 128;

/** Why an event makes its whole request invalid, or undefined when it is fine. */
function problem(event: DecodedEvent, index: number): string | undefined {
  if (event.accountId === '' || event.accountId.length > MAX_ACCOUNT_ID) {
    return `events[${index}].account_id must be 1-${MAX_ACCOUNT_ID} characters`;
  }
  if (event.type === undefined) {
    return `events[${index}] has no payload (http_request_complete or tcp_connection_closed)`;
  }
  if (event.eventId !== '' && !EVENT_ID.test(event.eventId)) {
    return `events[${index}].event_id must be 1-128 printable ASCII characters`;
  }
  if (event.eventTimestamp === null) {
    return `events[${index}].event_timestamp is out of range`;
  }
  return undefined;
}

/** The Kafka partition key: one host's events stay together, in order. */
function partitionKey(object: EventJson): string {
  const conn = object.conn as { server_name?: string; client_ip?: string } | undefined;
  return conn?.server_name || conn?.client_ip || '';
}

/**
 * The start of an event's envelope, everything but its (selected) object: made once per event
 * and shared by its projections. Key order and values are JSON.stringify's.
 */
function envelopeHead(
  eventId: string,
  eventType: string,
  timestamp: string,
  accountId: string,
): string {
  return `{"event_id":${JSON.stringify(eventId)},"event_type":${JSON.stringify(eventType)},"event_timestamp":${JSON.stringify(timestamp)},"account_id":${JSON.stringify(accountId)},"principal":null,"object":`;
}

/** One delivered record: the event's envelope around its (selected) object. */
function envelope(head: string, object: EventJson): string {
  return `${head}${JSON.stringify(object)}}`;
}

/**
 * The per-request work of the data plane: decode, validate every event (one bad event rejects
 * the request, so nothing of it is delivered), then for each event its account's routes: filter,
 * project, wrap in the envelope, serialize once per projection, and group by destination.
 */
export function routeRequest(
  routing: Routing,
  bytes: Uint8Array,
  receivedAt: number,
  maxEvents = Number.POSITIVE_INFINITY,
  taps?: readonly TapSpec[],
): RouteResult {
  let events: DecodedEvent[];
  try {
    events = decodePublishRequest(bytes, maxEvents);
  } catch (error) {
    if ((error as AppError).code === 'ERR_BODY_TOO_LARGE') {
      return {
        kind: 'too-many',
        message: `a request may carry at most ${maxEvents} events (MAX_INGEST_EVENTS); split it`,
      };
    }
    return {
      kind: 'invalid',
      message: `malformed PublishRequest: ${(error as Error).message}`,
      accounts: [],
    };
  }
  for (let i = 0; i < events.length; i++) {
    const why = problem(events[i], i);
    if (why !== undefined)
      return { kind: 'invalid', message: why, accounts: eventsByAccount(events) };
  }
  const received = new Date(receivedAt).toISOString();
  const byDestination = new Map<string, EventRecord[]>();
  const eventIds: string[] = new Array(events.length);
  let matched = 0;
  let jsonBytes = 0;
  const tee = createTee(taps);
  const tally = new RequestTally();
  for (let i = 0; i < events.length; i++) {
    const event = events[i];
    const eventId = event.eventId || newId('ev');
    eventIds[i] = eventId;
    const eventType = event.type!; // problem() checked every event
    const object = event.object!;
    const timestamp = event.eventTimestamp ?? received;
    const { accountId } = event;
    const routes = routing.routes(event.accountId, eventType);
    if (routes.length === 0 && tee === undefined) {
      tally.event(accountId, false);
      continue;
    }
    const head = envelopeHead(eventId, eventType, timestamp, accountId);
    if (tee !== undefined) {
      tee.event(accountId, eventType, object, (selected) => envelope(head, selected));
    }
    if (routes.length === 0) {
      tally.event(accountId, false);
      continue;
    }
    const key = partitionKey(object);
    // One serialization per distinct field selection, and one record per destination and
    // selection: subscriptions that agree share the work and never duplicate a line.
    const records = new Map<string, EventRecord>();
    let routedAny = false;
    for (const route of routes) {
      if (route.filter !== undefined && !route.filter.matches(object)) continue;
      if (!sampled(eventId, route.sampleBound)) continue;
      routedAny = true;
      tally.route(route);
      let record = records.get(route.projectionKey);
      if (record === undefined) {
        const selected = route.project === undefined ? object : route.project(object);
        const json = envelope(head, selected);
        record = { eventId, eventType, accountId: event.accountId, partitionKey: key, json };
        records.set(route.projectionKey, record);
        jsonBytes += json.length;
      }
      tee?.routed(route.subscriptionId, eventType, record.json);
      for (const destinationId of route.destinationIds) {
        const batch = byDestination.get(destinationId);
        if (batch === undefined) byDestination.set(destinationId, [record]);
        else if (!batch.includes(record, Math.max(0, batch.length - routes.length)))
          batch.push(record);
      }
    }
    if (routedAny) matched++;
    tally.event(accountId, routedAny);
  }
  const deliveries: Delivery[] = [];
  for (const [destinationId, records] of byDestination) deliveries.push({ destinationId, records });
  const response = toBinary(
    PublishResponseSchema,
    create(PublishResponseSchema, { accepted: events.length, eventIds }),
  );
  return {
    kind: 'routed',
    response,
    accepted: events.length,
    matched,
    deliveries,
    bytes: jsonBytes,
    tally: tally.result(),
    ...(tee === undefined ? {} : { tapped: tee.catches() }),
  };
}
