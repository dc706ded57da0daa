import { type DescField, type DescMessage, ScalarType } from '@bufbuild/protobuf';
import type { Timestamp } from '@bufbuild/protobuf/wkt';
import type { TrafficEventType } from '../../catalogue/event-types.ts';
import { fieldKindOf } from '../../catalogue/fields.ts';
import { EventSchema, PublishRequestSchema } from '../../gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { requestEnvelope } from './envelope.ts';
import type { Int64Json } from './int64-json.ts';
import { timestampToJson } from './timestamp-json.ts';
import type { EventJson } from './to-json.ts';
import * as reader from './wire-reader.ts';
import { type MessageInfo, RECURSION_LIMIT, tagOf, WIRE_LEN, WIRE_VARINT } from './wire-reader.ts';
import { stringListEntry, struct } from './wire-struct.ts';

// Decodes the protobuf wire format of a PublishRequest straight to the catalogue's JSON shape:
// for every event, the object `trafficToJson(type)(fromBinary(...))` would give, without the
// protobuf-es message in between (measured when it was the worker's decoder: ~15 µs per event
// for fromBinary + trafficToJson, ~5 µs for this, of which ~1.7 µs was V8 building the header
// objects). The worker now writes text (request-text.ts; bench/decode-micro.ts measures it) and
// decodes objects with this only off the hot path and for payloads whose fields come out of
// order. Like to-json, each message type gets a function generated from its descriptor
// (docs/decisions.md#catalogue: the descriptors stay the one source of truth): one `switch` over the tags it declares, writing constant property
// names. The generated source holds only numbers, property names checked to be plain
// identifiers, and descriptor names in comments, reduced to [A-Za-z0-9_.].
//
// The result is the same as to-json's: every field present with its default (an unset group
// with its defaults, '' / 0 / false, headers {}, logs []), int64 as int64-json.ts has it, an unset
// timestamp null, RFC 3339 timestamps by timestampToJson (null out of range), headers
// {Name: [values]}, traffic_policy.logs as plain JSON. Protobuf's rules for a field that occurs
// more than once hold: the last scalar wins, repeated fields and map entries accumulate, and a
// singular message merges into the earlier occurrence — which is why timestamps stay
// {seconds, nanos} while an event is decoded and are formatted at its end. Malformed input
// throws ERR_INVALID_EVENTS (see wire-reader.ts for where this is stricter than protobuf-es).

/** What the generated code calls: the reader's primitives and the two nested shapes. */
const runtime = { ...reader, stringListEntry, struct };

/** One event of a PublishRequest: its envelope fields and its payload as catalogue JSON. */
export interface DecodedEvent {
  accountId: string;
  eventId: string;
  /** RFC 3339; undefined when the event has none, null when it is out of range (invalid). */
  eventTimestamp: string | null | undefined;
  /** The payload's kind; undefined when the event has no payload (invalid). */
  type: TrafficEventType | undefined;
  /** The payload as catalogue JSON (to-json's shape); undefined exactly when `type` is. */
  object: EventJson | undefined;
}

/** Decodes one message of a catalogue type from bytes[start, end) to its JSON object. */
export type WireToJson = (bytes: Uint8Array, start?: number, end?: number) => EventJson;

type GeneratedDecoder = (buf: Uint8Array, pos: number, end: number, o: object, d: number) => void;

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** A descriptor name for a comment of the generated source: nothing that could end it. */
function comment(name: string): string {
  return `// ${name.replace(/[^A-Za-z0-9_.]/g, '?')}`;
}

function identifier(desc: DescMessage, field: DescField): string {
  if (!IDENTIFIER.test(field.name)) {
    throw new Error(`wire decode: field name ${desc.typeName}.${field.name} is not an identifier`);
  }
  return field.name;
}

// The length of a length-delimited value into `n`, checked against the message's end.
const READ_LENGTH =
  'let n = buf[pos]; if (n < 128 && pos < end) pos++; else { n = varint32(c, buf, pos, end); pos = c.pos; }\n' +
  '        if (n > end - pos) overrun(n, pos, end);';

// A varint value into `target` by `slow` (int32 | int64 | bool); one-byte values inline.
function readVarint(target: string, slow: string, small: string): string {
  return `{ const b = buf[pos]; if (b < 128 && pos < end) { ${target} = ${small}; pos++; } else { ${target} = ${slow}(c, buf, pos, end); pos = c.pos; } break; }`;
}

/**
 * One compilation unit: the generated source of every message reachable from its roots, in one
 * `new Function`, so that the decoders call each other directly.
 */
class Unit {
  private readonly index = new Map<DescMessage, number>();
  private readonly visiting = new Set<DescMessage>();
  private readonly chunks: string[] = [];
  readonly infos: MessageInfo[] = [];

  /** The number `i` of a message's generated `n{i}()` (its default JSON) and `d{i}(...)`. */
  message(desc: DescMessage): number {
    const known = this.index.get(desc);
    if (known !== undefined) return known;
    if (this.visiting.has(desc)) {
      throw new Error(
        `wire decode: ${desc.typeName} contains itself; the catalogue has no kind for that`,
      );
    }
    this.visiting.add(desc);
    const defaults: string[] = [];
    const cases: string[] = [];
    const wireTypes = new Map<number, number>();
    for (const field of desc.fields) {
      if (field.oneof !== undefined) {
        throw new Error(
          `wire decode: ${desc.typeName}.${field.name} is in a oneof; the catalogue has no kind for that`,
        );
      }
      const name = identifier(desc, field);
      const slot = `o.${name}`;
      const kind = fieldKindOf(field);
      let wireType = WIRE_LEN;
      let body: string;
      let initial: string;
      switch (kind) {
        case undefined: {
          const child = this.message((field as DescField & { fieldKind: 'message' }).message);
          initial = `n${child}()`;
          body = `{ ${READ_LENGTH}\n        d${child}(buf, pos, pos + n, ${slot}, depth + 1); pos += n; break; }`;
          break;
        }
        case 'timestamp': {
          // Kept as {seconds, nanos} (a later occurrence merges into it) until f{i}() formats it.
          const ts = this.message((field as DescField & { fieldKind: 'message' }).message);
          initial = 'null';
          body = `{ ${READ_LENGTH}\n        let ts = ${slot}; if (ts === null) ${slot} = ts = n${ts}();\n        d${ts}(buf, pos, pos + n, ts, depth + 1); pos += n; break; }`;
          break;
        }
        case 'string':
          initial = "''";
          body = `{ ${READ_LENGTH}\n        ${slot} = string(buf, pos, pos + n); pos += n; break; }`;
          break;
        case 'string_list':
          initial = '[]';
          body = `{ ${READ_LENGTH}\n        ${slot}.push(string(buf, pos, pos + n)); pos += n; break; }`;
          break;
        case 'string_list_map':
          if ((field as DescField & { fieldKind: 'map' }).mapKey !== ScalarType.STRING) {
            throw new Error(`wire decode: map ${desc.typeName}.${field.name} has no string keys`);
          }
          initial = '{}';
          body = `{ ${READ_LENGTH}\n        stringListEntry(c, buf, pos, pos + n, ${slot}, depth); pos += n; break; }`;
          break;
        case 'json':
          initial = '[]';
          body = `{ ${READ_LENGTH}\n        const s = {}; struct(c, buf, pos, pos + n, s, depth + 1); ${slot}.push(s); pos += n; break; }`;
          break;
        case 'int32':
          wireType = WIRE_VARINT;
          initial = '0';
          body = readVarint(slot, 'int32', 'b');
          break;
        case 'int64':
          wireType = WIRE_VARINT;
          initial = '0';
          body = readVarint(slot, 'int64', 'b');
          break;
        case 'bool':
          wireType = WIRE_VARINT;
          initial = 'false';
          body = readVarint(slot, 'bool', 'b !== 0');
          break;
        default:
          throw new Error(`wire decode: no wire decoding for kind ${kind satisfies never}`);
      }
      wireTypes.set(field.number, wireType);
      defaults.push(`${name}: ${initial}`);
      cases.push(`      case ${tagOf(field.number, wireType)}: ${comment(name)}\n        ${body}`);
    }
    this.visiting.delete(desc);
    const i = this.infos.push(reader.messageInfo(desc, wireTypes)) - 1;
    this.index.set(desc, i);
    this.chunks.push(
      `${comment(desc.typeName)}\nfunction n${i}() {\n  return { ${defaults.join(', ')} };\n}\n` +
        `function d${i}(buf, pos, end, o, depth) {\n  if (depth > ${RECURSION_LIMIT}) tooDeep(I[${i}].typeName);\n` +
        loop(cases, `I[${i}]`) +
        '}',
    );
    return i;
  }

  /** `f{i}(o)`: formats the timestamps of a decoded root message in place. */
  finisher(desc: DescMessage): string {
    const i = this.message(desc);
    const lines: string[] = [];
    const walk = (d: DescMessage, path: string) => {
      for (const field of d.fields) {
        const kind = fieldKindOf(field);
        const at = `${path}.${identifier(d, field)}`;
        if (kind === undefined) walk((field as DescField & { fieldKind: 'message' }).message, at);
        else if (kind === 'timestamp') lines.push(`  if (${at} !== null) ${at} = fmt(${at});`);
      }
    };
    walk(desc, 'o');
    this.chunks.push(`function f${i}(o) {\n${lines.join('\n')}\n}`);
    return `f${i}`;
  }

  add(source: string): void {
    this.chunks.push(source);
  }

  compile(exports: string): Record<string, unknown> {
    const source = [
      "'use strict';",
      'const { tag, varint32, int32, int64, bool, string, skip, overrun, tooDeep, tooManyEvents, stringListEntry, struct } = R;',
      'const c = R.newCursor();',
      ...this.chunks,
      `return { ${exports} };`,
    ].join('\n');
    const factory = new Function('R', 'I', 'fmt', source) as (
      r: typeof runtime,
      infos: MessageInfo[],
      fmt: (ts: { seconds: Int64Json; nanos: number }) => string | null,
    ) => Record<string, unknown>;
    return factory(runtime, this.infos, formatTimestamp);
  }
}

// The tag loop of a message: one switch over the tags it reads; anything else is skipped.
function loop(cases: string[], info: string): string {
  return (
    '  while (pos < end) {\n' +
    '    let t = buf[pos]; if (t < 128) pos++; else { t = tag(c, buf, pos, end); pos = c.pos; }\n' +
    '    switch (t) {\n' +
    `${cases.join('\n')}\n` +
    `      default:\n        pos = skip(c, buf, pos, end, t, depth, ${info});\n` +
    '    }\n  }\n'
  );
}

/** A decoded Timestamp message as RFC 3339, or null out of range (as to-json has it). */
export function formatTimestamp(ts: { seconds: Int64Json; nanos: number }): string | null {
  // Seconds beyond 2^53 (raw JSON, not a number) are far outside RFC 3339's years.
  if (typeof ts.seconds !== 'number') return null;
  // timestampToJson reads Number(seconds): a number is as good as the bigint here.
  return timestampToJson(ts as unknown as Timestamp);
}

const compiled = new Map<DescMessage, WireToJson>();

/** The generated wire decoder of any catalogue message (a traffic payload or one of its groups). */
export function wireToJson(desc: DescMessage): WireToJson {
  let fn = compiled.get(desc);
  if (fn === undefined) {
    const unit = new Unit();
    const i = unit.message(desc);
    const finish = unit.finisher(desc);
    const { create, decode, finishOne } = unit.compile(
      `create: n${i}, decode: d${i}, finishOne: ${finish}`,
    ) as { create: () => EventJson; decode: GeneratedDecoder; finishOne: (o: EventJson) => void };
    fn = (bytes, start = 0, end = bytes.length) => {
      if (start < 0 || end > bytes.length || start > end) {
        throw new RangeError(`wire decode: range ${start}-${end} outside ${bytes.length} bytes`);
      }
      const o = create();
      decode(bytes, start, end, o, 1);
      finishOne(o);
      return o;
    };
    compiled.set(desc, fn);
  }
  return fn;
}

// The envelope (envelope.ts): PublishRequest.events, and per Event account_id, event_id,
// event_timestamp and the payload oneof.
function compileRequestDecoder(): RequestDecoders {
  const unit = new Unit();
  const { events, accountId, eventId, eventTimestamp, payloads } = requestEnvelope();
  const ts = unit.message(eventTimestamp.message);
  const payloadCases: string[] = [];
  const finishes: string[] = [];
  for (const { field, type } of payloads) {
    const i = unit.message(field.message);
    const literal = JSON.stringify(type);
    payloadCases.push(
      `      case ${tagOf(field.number, WIRE_LEN)}: { ${comment(field.name)}\n` +
        `        ${READ_LENGTH}\n` +
        // Another member of the oneof replaces the payload; the same one merges into it.
        `        if (type !== ${literal}) { type = ${literal}; object = n${i}(); }\n` +
        `        d${i}(buf, pos, pos + n, object, depth + 1); pos += n; break; }`,
    );
    finishes.push(`  if (type === ${literal}) ${unit.finisher(field.message)}(object);`);
  }
  const fields = [accountId, eventId, eventTimestamp, ...payloads.map((p) => p.field)];
  const wireTypes = new Map(fields.map((f) => [f.number, WIRE_LEN] as [number, number]));
  const eventInfo = unit.infos.push(reader.messageInfo(EventSchema, wireTypes)) - 1;
  const requestInfo =
    unit.infos.push(
      reader.messageInfo(PublishRequestSchema, new Map([[events.number, WIRE_LEN]])),
    ) - 1;
  unit.add(
    `${comment(EventSchema.typeName)}\nfunction decodeEvent(buf, pos, end, depth) {\n` +
      `  if (depth > ${RECURSION_LIMIT}) tooDeep(I[${eventInfo}].typeName);\n` +
      "  let accountId = '', eventId = '', eventTimestamp, type, object;\n" +
      loop(
        [
          `      case ${tagOf(accountId.number, WIRE_LEN)}: { ${comment(accountId.name)}\n        ${READ_LENGTH}\n        accountId = string(buf, pos, pos + n); pos += n; break; }`,
          `      case ${tagOf(eventId.number, WIRE_LEN)}: { ${comment(eventId.name)}\n        ${READ_LENGTH}\n        eventId = string(buf, pos, pos + n); pos += n; break; }`,
          `      case ${tagOf(eventTimestamp.number, WIRE_LEN)}: { ${comment(eventTimestamp.name)}\n        ${READ_LENGTH}\n        if (eventTimestamp === undefined) eventTimestamp = n${ts}();\n        d${ts}(buf, pos, pos + n, eventTimestamp, depth + 1); pos += n; break; }`,
          ...payloadCases,
        ],
        `I[${eventInfo}]`,
      ) +
      `${finishes.join('\n')}\n` +
      '  return { accountId, eventId, eventTimestamp: eventTimestamp === undefined ? undefined : fmt(eventTimestamp), type, object };\n}\n' +
      `${comment(PublishRequestSchema.typeName)}\nfunction decodeRequest(buf, maxEvents) {\n` +
      '  const end = buf.length; const events = []; let pos = 0;\n' +
      '  while (pos < end) {\n' +
      '    let t = buf[pos]; if (t < 128) pos++; else { t = tag(c, buf, pos, end); pos = c.pos; }\n' +
      `    if (t === ${tagOf(events.number, WIRE_LEN)}) {\n` +
      `      ${READ_LENGTH}\n` +
      '      if (events.length === maxEvents) tooManyEvents(maxEvents);\n' +
      '      events.push(decodeEvent(buf, pos, pos + n, 2)); pos += n;\n' +
      `    } else pos = skip(c, buf, pos, end, t, 1, I[${requestInfo}]);\n` +
      '  }\n  return events;\n}',
  );
  return unit.compile('decodeRequest, decodeEvent') as unknown as RequestDecoders;
}

interface RequestDecoders {
  decodeRequest(bytes: Uint8Array, maxEvents: number): DecodedEvent[];
  decodeEvent(bytes: Uint8Array, start: number, end: number, depth: number): DecodedEvent;
}
let decoders: RequestDecoders | undefined;

function requestDecoders(): RequestDecoders {
  decoders ??= compileRequestDecoder();
  return decoders;
}

/**
 * Decodes a binary PublishRequest to its events, each payload in the catalogue's JSON shape.
 * Throws ERR_INVALID_EVENTS on malformed input, and ERR_BODY_TOO_LARGE before decoding an event
 * past `maxEvents`. Validation (account id, payload present, event id, timestamp range) is the
 * caller's: the envelope's values are returned as sent.
 */
export function decodePublishRequest(
  bytes: Uint8Array,
  maxEvents = Number.POSITIVE_INFINITY,
): DecodedEvent[] {
  return requestDecoders().decodeRequest(bytes, maxEvents);
}

/**
 * Decodes one Event message, bytes[start, end) of a PublishRequest (as decodePublishRequest
 * decodes each of its events): for events wire-json.ts cannot write in one pass.
 */
export function decodeEventAt(bytes: Uint8Array, start: number, end: number): DecodedEvent {
  return requestDecoders().decodeEvent(bytes, start, end, 2);
}
