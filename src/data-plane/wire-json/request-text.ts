import { Buffer } from 'node:buffer';
import { TimestampSchema } from '@bufbuild/protobuf/wkt';
import { type TrafficEventType, trafficEventSchemas } from '../../catalogue/event-types.ts';
import { filterableFields } from '../../catalogue/fields.ts';
import { EventSchema, PublishRequestSchema } from '../../gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { redactObject } from '../redaction/event-object.ts';
import { DEFAULT_REDACTION, type Redaction } from '../redaction/policy.ts';
import { requestEnvelope } from './envelope.ts';
import { writeJsString } from './json-bytes.ts';
import type { EventJson } from './to-json.ts';
import { decodeEventAt, formatTimestamp, wireToJson } from './wire-decode.ts';
import { jsonShape, jsonWriters, maxSpans, OUT_OF_ORDER, writeFromObject } from './wire-json.ts';
import {
  messageInfo,
  newCursor,
  overrun,
  skip,
  string,
  tag,
  tagOf,
  tooManyEvents,
  varint32,
  WIRE_LEN,
} from './wire-reader.ts';

// A PublishRequest read for routing: its events' envelopes, and each payload's JSON text written
// once (wire-json.ts) with the spans of its fields, so that routing copies text instead of
// serializing objects. The text of every event, the spans and the Filterable leaves' positions
// live in buffers this module keeps and reuses: a RequestText is valid until the next request
// is read (a worker reads one at a time). Malformed input throws ERR_INVALID_EVENTS, and
// ERR_BODY_TOO_LARGE before reading an event past `maxEvents`, as decodePublishRequest does.
// Each payload is written under its route's redaction (docs/security.md#redacted), asked once
// per run of one account's events of one kind; a route with another one gets the event written
// again under its own (`rewrite`), so a redacted value never reaches the text it copies from.

/** The redaction an event's text is first written with: its first route's, or the default. */
export type RedactionOf = (accountId: string, type: TrafficEventType) => Redaction;

/** One event of a request: its envelope as sent, and where its JSON is. */
export interface TextEvent {
  accountId: string;
  eventId: string;
  /** RFC 3339; undefined when the event has none, null when it is out of range (invalid). */
  eventTimestamp: string | null | undefined;
  /** The payload's kind; undefined when the event has none (invalid). */
  type: TrafficEventType | undefined;
  /** Where its spans start in `spans` (span 0 is the payload's whole JSON). */
  spanBase: number;
  /** The decoder's object when the event was written from it; otherwise undefined. */
  object: EventJson | undefined;
  /** The payload's bytes in the request. */
  payloadStart: number;
  payloadEnd: number;
  /** What its text was written with (undefined for an invalid event, never written). */
  redaction: Redaction | undefined;
}

const envelope = requestEnvelope();
const EVENTS_TAG = tagOf(envelope.events.number, WIRE_LEN);
const ACCOUNT_TAG = tagOf(envelope.accountId.number, WIRE_LEN);
const EVENT_ID_TAG = tagOf(envelope.eventId.number, WIRE_LEN);
const TIMESTAMP_TAG = tagOf(envelope.eventTimestamp.number, WIRE_LEN);
/** Payload tag → its traffic kind. */
const PAYLOADS = new Map<number, TrafficEventType>(
  envelope.payloads.map(({ field, type }) => [tagOf(field.number, WIRE_LEN), type]),
);
const REQUEST_INFO = messageInfo(
  PublishRequestSchema,
  new Map([[envelope.events.number, WIRE_LEN]]),
);
const EVENT_INFO = messageInfo(
  EventSchema,
  new Map(EventSchema.fields.map((f) => [f.number, WIRE_LEN] as [number, number])),
);

// The partition key (a host's events together) is read from the Filterable leaves.
for (const type of Object.keys(trafficEventSchemas) as TrafficEventType[]) {
  const names = filterableFields(type).map((f) => f.name);
  if (!names.includes('conn.server_name') || !names.includes('conn.client_ip')) {
    throw new Error(`request text: ${type} lost the Filterable leaves its partition key reads`);
  }
}

const timestamp = wireToJson(TimestampSchema);
const c = newCursor();

// Reused from request to request, grown as needed.
let text: Buffer = Buffer.allocUnsafeSlow(256 * 1024);
let spans = new Int32Array(0);
let tuples = new Int32Array(0);
// Another redaction's spans of the event last rewritten (and Filterable slots nobody reads).
const rewritten = new Map<string, Int32Array>();
let rewrittenEvent = -1;
let scratchTuples = new Int32Array(0);

/** A request's events and their JSON text; valid until the next readPublishRequest. */
export class RequestText {
  readonly events: TextEvent[];
  readonly bytes: Uint8Array;
  /** The text: every payload's JSON, then what `append` adds. */
  text: Buffer;
  at: number;
  readonly spans: Int32Array;
  private readonly tuples: Int32Array;

  constructor(bytes: Uint8Array, events: TextEvent[], text: Buffer, at: number) {
    this.bytes = bytes;
    this.events = events;
    this.text = text;
    this.at = at;
    this.spans = spans;
    this.tuples = tuples;
  }

  /**
   * Event i's Filterable leaves, shaped as filters read them (`{conn: {client_ip, …}}`): only
   * those are decoded to values.
   */
  filterable(i: number): EventJson {
    const event = this.events[i];
    const type = event.type!;
    if (event.object !== undefined) return pick(event.object, type);
    return viewMaker(type)(this.bytes, this.tuples, i * tupleStride(), string);
  }

  /** Event i's whole payload as the decoder's object (for preview taps, off the hot path). */
  object(i: number): EventJson {
    const event = this.events[i];
    return (
      event.object ??
      wireToJson(trafficEventSchemas[event.type!])(this.bytes, event.payloadStart, event.payloadEnd)
    );
  }

  /** Appends an event's envelope head (all but its object) and returns where it starts. */
  appendHead(eventId: string, type: string, timestamp: string, accountId: string): number {
    const start = this.at;
    const room = 96 + 3 * (eventId.length + type.length + timestamp.length) + 18 * accountId.length;
    this.reserve(room);
    const t = this.text;
    let p = start;
    p = putBytes(t, p, HEAD_EVENT_ID);
    p = writeJsString(t, p, eventId);
    p = putBytes(t, p, HEAD_EVENT_TYPE);
    p = writeJsString(t, p, type);
    p = putBytes(t, p, HEAD_TIMESTAMP);
    p = writeJsString(t, p, timestamp);
    p = putBytes(t, p, HEAD_ACCOUNT_ID);
    p = writeJsString(t, p, accountId);
    p = putBytes(t, p, HEAD_OBJECT);
    this.at = p;
    return start;
  }

  /**
   * Event i's payload written again under `redaction` (after the text so far), for a route
   * whose redaction is not the one its text was written with: the spans to copy its fields
   * from. Kept for the event until another is rewritten.
   */
  rewrite(i: number, redaction: Redaction): Int32Array {
    if (rewrittenEvent !== i) {
      rewritten.clear();
      rewrittenEvent = i;
    }
    const known = rewritten.get(redaction.key);
    if (known !== undefined) return known;
    const event = this.events[i];
    const type = event.type!;
    const out = new Int32Array(2 * maxSpans());
    if (event.object !== undefined) {
      const target = { text: this.text, at: this.at };
      writeFromObject(target, jsonShape(type), redactObject(event.object, redaction), out, 0);
      this.text = target.text;
      this.at = target.at;
    } else {
      const writers = jsonWriters();
      if (scratchTuples.length < tupleStride()) scratchTuples = new Int32Array(tupleStride());
      writers.target(this.text, this.at, out, 0, scratchTuples, 0);
      writers.redact(redaction);
      // The same bytes were written once already: no OUT_OF_ORDER now.
      writers.roots.get(type)!(this.bytes, event.payloadStart, event.payloadEnd);
      this.text = writers.text();
      this.at = writers.at();
    }
    text = this.text;
    rewritten.set(redaction.key, out);
    return out;
  }

  private reserve(n: number): void {
    if (this.at + n <= this.text.length) return;
    const next = Buffer.allocUnsafeSlow(Math.max(this.text.length * 2, this.at + n));
    this.text.copy(next, 0, 0, this.at);
    this.text = next;
    text = next;
  }
}

// The constant parts of an envelope head, as bytes: a short copy in JS costs less than a call
// to Buffer#write, which crosses into C++ for each.
const ascii = (s: string) => Uint8Array.from(s, (ch) => ch.charCodeAt(0));
const HEAD_EVENT_ID = ascii('{"event_id":');
const HEAD_EVENT_TYPE = ascii(',"event_type":');
const HEAD_TIMESTAMP = ascii(',"event_timestamp":');
const HEAD_ACCOUNT_ID = ascii(',"account_id":');
const HEAD_OBJECT = ascii(',"principal":null,"object":');

function putBytes(out: Uint8Array, pos: number, bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; i++) out[pos++] = bytes[i];
  return pos;
}

function pick(object: EventJson, type: TrafficEventType): EventJson {
  const view: Record<string, Record<string, unknown>> = {};
  for (const { path } of filterableFields(type)) {
    const group = object[path[0]] as Record<string, unknown>;
    setLeaf(view, path, group[path[1]]);
  }
  return view as EventJson;
}

// The Filterable leaves are conn.* (group.leaf): checked at the top of the module.
function setLeaf(
  view: Record<string, Record<string, unknown>>,
  path: readonly string[],
  value: unknown,
) {
  let group = view[path[0]];
  if (group === undefined) {
    group = {};
    view[path[0]] = group;
  }
  group[path[1]] = value;
}

type ViewMaker = (
  bytes: Uint8Array,
  tuples: Int32Array,
  base: number,
  str: typeof string,
) => EventJson;
const viewMakers = new Map<TrafficEventType, ViewMaker>();

// Per kind, a function returning the view as one object literal: a fixed shape built in one
// go, instead of a store per leaf under keys read from the catalogue (which V8 cannot predict).
// The keys come in the order the stores made them: groups as they first appear, leaves in order.
function viewMaker(type: TrafficEventType): ViewMaker {
  let make = viewMakers.get(type);
  if (make !== undefined) return make;
  const groups = new Map<string, string[]>();
  filterableFields(type).forEach(({ path, kind }, k) => {
    // In a literal, `__proto__:` would set the prototype instead of a key.
    if (path.includes('__proto__')) throw new Error(`request text: ${type} has a __proto__ leaf`);
    const [a, b] = [`T[base + ${2 * k}]`, `T[base + ${2 * k + 1}]`];
    // A leaf the payload lacks (end -1) reads as its default.
    const value = kind === 'int32' ? `${b} < 0 ? 0 : ${a}` : `${b} < 0 ? '' : str(B, ${a}, ${b})`;
    const leaves = groups.get(path[0]) ?? [];
    leaves.push(`${JSON.stringify(path[1])}: ${value}`);
    groups.set(path[0], leaves);
  });
  const object = [...groups].map(([g, leaves]) => `${JSON.stringify(g)}: { ${leaves.join(', ')} }`);
  make = new Function('B', 'T', 'base', 'str', `return { ${object.join(', ')} };`) as ViewMaker;
  viewMakers.set(type, make);
  return make;
}

let stride = 0;
/** Two slots per Filterable leaf of the kind with the most. */
function tupleStride(): number {
  if (stride === 0) {
    for (const type of Object.keys(trafficEventSchemas) as TrafficEventType[]) {
      stride = Math.max(stride, 2 * filterableFields(type).length);
    }
  }
  return stride;
}

function grow(count: number): void {
  const spanStride = 2 * maxSpans();
  if (spans.length < count * spanStride) {
    const next = new Int32Array(Math.max(count * spanStride, spans.length * 2));
    next.set(spans);
    spans = next;
  }
  if (tuples.length < count * tupleStride()) {
    const next = new Int32Array(Math.max(count * tupleStride(), tuples.length * 2));
    next.set(tuples);
    tuples = next;
  }
}

const defaultRedaction: RedactionOf = () => DEFAULT_REDACTION;

/**
 * Reads a binary PublishRequest: every event's envelope, and its payload's JSON text written
 * under `redactionOf` its account and kind.
 */
export function readPublishRequest(
  bytes: Uint8Array,
  maxEvents = Number.POSITIVE_INFINITY,
  redactionOf: RedactionOf = defaultRedaction,
): RequestText {
  const writers = jsonWriters();
  rewrittenEvent = -1;
  // Requests mostly carry runs of one account's events of one kind.
  let lastAccount: string | undefined;
  let lastType: TrafficEventType | undefined;
  let redaction = DEFAULT_REDACTION;
  const spanStride = 2 * maxSpans();
  const out: TextEvent[] = [];
  let at = 0;
  let pos = 0;
  const end = bytes.length;
  while (pos < end) {
    let t = bytes[pos];
    if (t < 0x80) pos++;
    else {
      t = tag(c, bytes, pos, end);
      pos = c.pos;
    }
    if (t !== EVENTS_TAG) {
      pos = skip(c, bytes, pos, end, t, 1, REQUEST_INFO);
      continue;
    }
    let n = bytes[pos];
    if (n < 0x80 && pos < end) pos++;
    else {
      n = varint32(c, bytes, pos, end);
      pos = c.pos;
    }
    if (n > end - pos) overrun(n, pos, end);
    if (out.length === maxEvents) tooManyEvents(maxEvents);
    grow(out.length + 1);
    const event = readEvent(bytes, pos, pos + n, out.length * spanStride);
    if (event.type !== undefined) {
      if (event.accountId !== lastAccount || event.type !== lastType) {
        lastAccount = event.accountId;
        lastType = event.type;
        redaction = redactionOf(lastAccount, lastType);
      }
      event.redaction = redaction;
    }
    if (event.type !== undefined && event.object === undefined) {
      const tupleBase = out.length * tupleStride();
      // A leaf the payload lacks keeps -1: its default, not the previous event's value.
      tuples.fill(-1, tupleBase, tupleBase + tupleStride());
      writers.target(text, at, spans, event.spanBase, tuples, tupleBase);
      writers.redact(redaction);
      try {
        writers.roots.get(event.type)!(bytes, event.payloadStart, event.payloadEnd);
        text = writers.text();
        at = writers.at();
      } catch (error) {
        if (error !== OUT_OF_ORDER) throw error;
        text = writers.text();
        // The decoder reads the whole Event again (the envelope's rules included).
        Object.assign(event, decodeEventAt(bytes, pos, pos + n));
      }
    }
    if (event.object !== undefined) {
      const target = { text, at };
      const object = redactObject(event.object, redaction);
      writeFromObject(target, jsonShape(event.type!), object, spans, event.spanBase);
      text = target.text;
      at = target.at;
    }
    out.push(event);
    pos += n;
  }
  return new RequestText(bytes, out, text, at);
}

// An Event's envelope fields. One that protobuf would merge or replace (a second timestamp or
// payload) is left to the decoder, which then reads the event as a whole.
function readEvent(bytes: Uint8Array, pos: number, end: number, spanBase: number): TextEvent {
  const start = pos;
  let accountId = '';
  let eventId = '';
  let eventTimestamp: string | null | undefined;
  let timestamps = 0;
  let type: TrafficEventType | undefined;
  let payloads = 0;
  let payloadStart = 0;
  let payloadEnd = 0;
  while (pos < end) {
    let t = bytes[pos];
    if (t < 0x80) pos++;
    else {
      t = tag(c, bytes, pos, end);
      pos = c.pos;
    }
    const kind = PAYLOADS.get(t);
    if (t !== ACCOUNT_TAG && t !== EVENT_ID_TAG && t !== TIMESTAMP_TAG && kind === undefined) {
      pos = skip(c, bytes, pos, end, t, 2, EVENT_INFO);
      continue;
    }
    let n = bytes[pos];
    if (n < 0x80 && pos < end) pos++;
    else {
      n = varint32(c, bytes, pos, end);
      pos = c.pos;
    }
    if (n > end - pos) overrun(n, pos, end);
    if (t === ACCOUNT_TAG) accountId = string(bytes, pos, pos + n);
    else if (t === EVENT_ID_TAG) eventId = string(bytes, pos, pos + n);
    else if (t === TIMESTAMP_TAG) {
      timestamps++;
      eventTimestamp = formatTimestamp(timestamp(bytes, pos, pos + n) as never);
    } else {
      payloads++;
      type = kind;
      payloadStart = pos;
      payloadEnd = pos + n;
    }
    pos += n;
  }
  const event: TextEvent = {
    accountId,
    eventId,
    eventTimestamp,
    type,
    spanBase,
    object: undefined,
    payloadStart,
    payloadEnd,
    redaction: undefined,
  };
  if (timestamps > 1 || payloads > 1) Object.assign(event, decodeEventAt(bytes, start, end));
  return event;
}
