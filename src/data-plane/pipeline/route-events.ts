import type { AppError } from '../../shared/errors.ts';
import { newId } from '../../shared/ids.ts';
import type { SpanProjection } from '../filter/index.ts';
import { redactObject } from '../redaction/event-object.ts';
import { DEFAULT_REDACTION } from '../redaction/policy.ts';
import { BlockWriter, RecordMeta } from '../sinks/record-block.ts';
import { type RequestText, readPublishRequest, type TextEvent } from '../wire-json/request-text.ts';
import type { EventJson } from '../wire-json/to-json.ts';
import { type ReservedSlab, type SlabPool, slabBytes } from './block-slabs.ts';
import { eventsByAccount, RequestTally } from './match-tally.ts';
import { encodePublishResponse } from './publish-response.ts';
import type { RoutePlan } from './route-plan.ts';
import type { Route, Routing } from './routing.ts';
import { sampled } from './sampling.ts';
import { createTee, type TapSpec } from './tap-tee.ts';
import type { Delivery, RouteResult } from './worker-protocol.ts';

const EVENT_ID = /^[\x21-\x7e]{1,128}$/;
const MAX_ACCOUNT_ID = 128;
const CLOSE = 0x7d; // the envelope's closing brace

/** Why an event makes its whole request invalid, or undefined when it is fine. */
function problem(event: TextEvent, index: number): string | undefined {
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
function partitionKey(filterable: EventJson): string {
  const conn = filterable.conn as { server_name?: string; client_ip?: string } | undefined;
  return conn?.server_name || conn?.client_ip || '';
}

/** An event's envelope as text, around an object (for preview taps, off the hot path). */
function envelopeText(
  eventId: string,
  eventType: string,
  timestamp: string,
  accountId: string,
  object: EventJson,
): string {
  return JSON.stringify({
    event_id: eventId,
    event_type: eventType,
    event_timestamp: timestamp,
    account_id: accountId,
    principal: null,
    object,
  });
}

/**
 * Writes a record's envelope: its head (text[head, headEnd)), the selected fields (spans from
 * `spanBase`), the brace.
 */
function writeRecord(
  writer: BlockWriter,
  request: RequestText,
  head: number,
  headEnd: number,
  projection: SpanProjection,
  spans: Int32Array,
  spanBase: number,
): void {
  const { text } = request;
  writer.bytes(text, head, headEnd);
  for (const op of projection) {
    if (typeof op === 'number') {
      writer.bytes(text, spans[spanBase + 2 * op], spans[spanBase + 2 * op + 1]);
    } else {
      writer.bytes(op, 0, op.length);
    }
  }
  writer.ensure(1);
  writer.buf[writer.pos++] = CLOSE;
}

// Writers kept between requests (a worker routes one request at a time): their buffers grow to
// the largest request's needs once, instead of being allocated for every request.
// Bounded, so a rare huge request or many destinations do not pin memory for good.
const spareWriters: BlockWriter[] = [];
const MAX_SPARE_WRITERS = 16;
const MAX_SPARE_BYTES = 8 * 2 ** 20;

// Where the current event's record of each field selection (a plan's group) was written:
// valid for a group once RoutePlan.written says so for this event.
const groupWriter: BlockWriter[] = [];
const groupRecord: number[] = [];
/** Requests routed by this thread: tells RoutePlan when its outputs are another request's. */
let requests = 0;

/** A destination's block being written: into a slab reserved for it, when one was free. */
interface Output {
  writer: BlockWriter;
  reserved: ReservedSlab | undefined;
}

// Slab bytes each destination's last block needed, with room for a larger one: what to reserve
// for its next block, so its text is written into the slab directly (no copy at the end).
const expectedBytes = new Map<string, number>();
const MAX_EXPECTED = 1024;

/** A writer for a destination's block, writing into a slab reserved for it when one is free. */
function openOutput(destinationId: string, slabs: SlabPool | undefined): Output {
  const writer = spareWriters.pop() ?? new BlockWriter();
  const reserved = slabs?.reserve(expectedBytes.get(destinationId) ?? 0);
  if (reserved !== undefined) writer.writeInto(reserved.text);
  return { writer, reserved };
}

/** The output of a plan's destination `d` in this request, opened at its first record. */
function outputOf(
  plan: RoutePlan<Route>,
  d: number,
  outputs: Map<string, Output>,
  slabs: SlabPool | undefined,
): Output {
  let output = plan.outputs[d] as Output | undefined;
  if (output !== undefined) return output;
  // Another plan of this request (an account's other event type) may have opened it.
  const destinationId = plan.destinationIds[d];
  output = outputs.get(destinationId);
  if (output === undefined) {
    output = openOutput(destinationId, slabs);
    outputs.set(destinationId, output);
  }
  plan.outputs[d] = output;
  return output;
}

/** The slab an output's block is in: its reserved one if the block fits, else one taken now. */
function slabOf(output: Output, slabs: SlabPool | undefined) {
  if (slabs === undefined) return undefined;
  const { writer, reserved } = output;
  const { count, textBytes, metaBytes } = writer.sizes;
  if (reserved !== undefined) {
    if (writer.writesInto(reserved.text)) {
      const slab = slabs.commit(reserved, count, textBytes, metaBytes);
      if (slab !== undefined) return slab;
    } else {
      slabs.release(reserved);
    }
  }
  return slabs.take(count, textBytes, metaBytes);
}

/**
 * Each destination's block: in its slab (written there directly, or copied into one) when one
 * is free, or else in buffers of its own; the writers kept for the next request.
 */
function handOff(outputs: Map<string, Output>, slabs: SlabPool | undefined) {
  const deliveries: Delivery[] = [];
  let bytes = 0;
  if (expectedBytes.size > MAX_EXPECTED) expectedBytes.clear();
  for (const [destinationId, output] of outputs) {
    const { writer } = output;
    const { count, textBytes, metaBytes } = writer.sizes;
    bytes += textBytes + metaBytes;
    expectedBytes.set(destinationId, Math.ceil(slabBytes(count, textBytes, metaBytes) * 1.25));
    const slab = slabOf(output, slabs);
    if (slab === undefined) {
      deliveries.push({ destinationId, parts: writer.copyOut().parts() });
    } else {
      writer.copyTo(slab.parts);
      deliveries.push({ destinationId, slab: slab.block });
    }
    if (spareWriters.length < MAX_SPARE_WRITERS && writer.capacity <= MAX_SPARE_BYTES) {
      spareWriters.push(writer);
    }
  }
  return { deliveries, bytes };
}

/**
 * The per-request work of the data plane: read the request (every event's JSON text written
 * once), validate every event (one bad event rejects the request, so nothing of it is
 * delivered), then for each event its account's routes: filter on its Filterable leaves, copy
 * its selected fields into an envelope once per field selection, and group by destination.
 */
export function routeRequest(
  routing: Routing,
  bytes: Uint8Array,
  receivedAt: number,
  maxEvents = Number.POSITIVE_INFINITY,
  taps?: readonly TapSpec[],
  slabs?: SlabPool,
): RouteResult {
  let request: RequestText;
  try {
    request = readPublishRequest(bytes, maxEvents, routing.redaction);
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
  const { events } = request;
  for (let i = 0; i < events.length; i++) {
    const why = problem(events[i], i);
    if (why !== undefined)
      return { kind: 'invalid', message: why, accounts: eventsByAccount(events) };
  }
  const received = new Date(receivedAt).toISOString();
  const outputs = new Map<string, Output>();
  const serial = ++requests;
  const eventIds: string[] = new Array(events.length);
  let matched = 0;
  const tee = createTee(taps);
  const tally = new RequestTally();
  const meta = new RecordMeta();
  let plan: RoutePlan<Route> | undefined;
  try {
    for (let i = 0; i < events.length; i++) {
      const event = events[i];
      const eventId = event.eventId || newId('ev');
      eventIds[i] = eventId;
      const eventType = event.type!; // problem() checked every event
      const timestamp = event.eventTimestamp ?? received;
      const { accountId } = event;
      const next = routing.plan(accountId, eventType);
      if (next !== plan) {
        plan = next;
        plan.forRequest(serial);
      }
      const { routes } = plan;
      if (tee !== undefined) {
        tee.event(
          accountId,
          eventType,
          // A preview shows what a source that says nothing of redaction would deliver.
          () => redactObject(request.object(i), DEFAULT_REDACTION),
          (selected) => envelopeText(eventId, eventType, timestamp, accountId, selected),
        );
      }
      if (routes.length === 0) {
        tally.event(accountId, false);
        continue;
      }
      const filterable = request.filterable(i);
      const head = request.appendHead(eventId, eventType, timestamp, accountId);
      const headEnd = request.at;
      meta.set(eventId, eventType, accountId, partitionKey(filterable));
      // One envelope per distinct field selection (group), copied as bytes to each further
      // destination that wants it; a destination never gets the same record twice.
      plan.nextEvent();
      let routedAny = false;
      for (let r = 0; r < routes.length; r++) {
        const route = routes[r];
        if (route.filter !== undefined && !route.filter.matches(filterable)) continue;
        if (!sampled(eventId, route.sampleBound)) continue;
        routedAny = true;
        tally.route(route);
        const g = plan.group[r];
        for (const d of plan.destinations[r]) {
          if (plan.sent(g, d)) continue;
          const { writer } = outputOf(plan, d, outputs, slabs);
          if (plan.written(g)) {
            writer.copyRecord(groupWriter[g], groupRecord[g]);
            continue;
          }
          // A route redacting otherwise than the text was written copies from its own rewrite.
          if (route.redaction.key === event.redaction!.key) {
            writeRecord(
              writer,
              request,
              head,
              headEnd,
              route.projection,
              request.spans,
              event.spanBase,
            );
          } else {
            const spans = request.rewrite(i, route.redaction);
            writeRecord(writer, request, head, headEnd, route.projection, spans, 0);
          }
          writer.endRecordMeta(meta);
          groupWriter[g] = writer;
          groupRecord[g] = writer.records - 1;
        }
        if (tee !== undefined) {
          tee.routed(route.subscriptionId, eventType, groupWriter[g].recordText(groupRecord[g]));
        }
      }
      if (routedAny) matched++;
      tally.event(accountId, routedAny);
    }
  } catch (error) {
    // The slabs reserved for this request's blocks go back, or a bug would hold them for good.
    for (const { reserved } of outputs.values())
      if (reserved !== undefined) slabs?.release(reserved);
    throw error;
  }
  const response = encodePublishResponse(events.length, eventIds);
  const handedOff = handOff(outputs, slabs);
  return {
    kind: 'routed',
    response,
    accepted: events.length,
    matched,
    deliveries: handedOff.deliveries,
    bytes: handedOff.bytes,
    slabs: slabs?.announce(),
    tally: tally.result(),
    ...(tee === undefined ? {} : { tapped: tee.catches() }),
  };
}
