import {
  create,
  type DescField,
  type DescMessage,
  type JsonObject,
  type JsonValue,
  ScalarType,
  toBinary,
} from '@bufbuild/protobuf';
import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { StructSchema, TimestampSchema } from '@bufbuild/protobuf/wkt';
import fc from 'fast-check';
import {
  HttpRequestCompleteSchema,
  TcpConnectionClosedSchema,
} from '../../src/gen/agent_ingress/events/v0/traffic_pb.ts';
import {
  type Event,
  EventSchema,
  PublishRequestSchema,
} from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';

// Random PublishRequests for the wire readers' property tests: Events built with protobuf-es's
// create over the real descriptors, and a byte-level rewrite that adds what protobuf-es never
// writes (unknown fields anywhere, message occurrences split in two).

export function requestBytes(events: Event[]): Uint8Array {
  return toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }));
}

// ---- Arbitraries: random Events built with protobuf-es's create over the real descriptors ----

export const text: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 2, arbitrary: fc.constantFrom('allow', 'block', 'Accept', 'api.example.com', 'get') },
  // Credentials the writer redacts (headers, query parameters), in the cases edges send them.
  fc.constantFrom(
    'Authorization',
    'set-cookie',
    'COOKIE',
    'a=1&access_token=t0k',
    'https://h.example/p?Id_Token=x&b#f',
    'access_token=',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.string({ unit: 'binary-ascii', minLength: 60, maxLength: 70 }),
  fc.constantFrom(
    '',
    '__proto__',
    'constructor',
    'toString',
    '0',
    '10',
    '4294967295',
    '\u0000',
    '\ufeffbom',
    '\ud800',
    'x\udc00y',
    '😀',
    'é'.repeat(40),
    'x'.repeat(64),
    'x'.repeat(65),
    'x'.repeat(300),
  ),
);

const int32 = fc.oneof(
  fc.integer({ min: -2147483648, max: 2147483647 }),
  fc.constantFrom(0, 1, -1, 127, 128, 16383, 16384, -2147483648, 2147483647),
);

const int64 = fc.oneof(
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
  fc.bigInt({ min: 0n, max: 2n ** 35n }),
  fc.constantFrom(
    0n,
    1n,
    -1n,
    127n,
    128n,
    2n ** 31n,
    2n ** 32n - 1n,
    2n ** 32n,
    2n ** 53n,
    2n ** 53n + 1n,
    2n ** 54n + 3n,
    2n ** 63n - 1n,
    -(2n ** 63n),
    -(2n ** 53n) - 1n,
  ),
);

const MIN_SECONDS = -62135596800n;
export const MAX_SECONDS = 253402300799n;
const timestamp = fc.record(
  {
    seconds: fc.oneof(
      fc.bigInt({ min: MIN_SECONDS, max: MAX_SECONDS }),
      fc.bigInt({ min: 1_600_000_000n, max: 1_900_000_000n }),
      fc.constantFrom(MIN_SECONDS, MAX_SECONDS, MIN_SECONDS - 1n, MAX_SECONDS + 1n, 0n, -1n),
      int64,
    ),
    nanos: fc.oneof(
      fc.integer({ min: 0, max: 999_999_999 }),
      fc.integer({ min: 0, max: 999 }).map((n) => n * 1_000_000),
      fc.integer({ min: 0, max: 999_999 }).map((n) => n * 1_000),
      fc.constantFrom(0, 1, 999_999_999, 1_000_000_000, -1),
      int32,
    ),
  },
  { requiredKeys: [] },
);

// Struct values: every Value kind, numbers at the edges (NaN, -0, ±Infinity), keys that are
// integers (which JS objects order first) or __proto__.
const { jsonObject } = fc.letrec<{ value: JsonValue; jsonObject: JsonObject; list: JsonValue[] }>(
  (tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      fc.constant(null),
      fc.double(),
      fc.integer(),
      text,
      fc.boolean(),
      tie('jsonObject'),
      tie('list'),
    ),
    jsonObject: fc.dictionary(text, tie('value'), { maxKeys: 4 }),
    list: fc.array(tie('value'), { maxLength: 4 }),
  }),
);

/** An init of any catalogue message, field by field from its descriptor; any field may be absent. */
export function messageInit(desc: DescMessage): fc.Arbitrary<Record<string, unknown>> {
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const field of desc.fields) model[field.localName] = fieldInit(field);
  return fc.record(model, { requiredKeys: [] });
}

function fieldInit(field: DescField): fc.Arbitrary<unknown> {
  switch (field.fieldKind) {
    case 'scalar':
      switch (field.scalar) {
        case ScalarType.STRING:
          return text;
        case ScalarType.INT32:
          return int32;
        case ScalarType.INT64:
          return int64;
        case ScalarType.BOOL:
          return fc.boolean();
      }
      break;
    case 'message':
      return field.message.typeName === TimestampSchema.typeName
        ? timestamp
        : messageInit(field.message);
    case 'list':
      if (field.listKind === 'scalar' && field.scalar === ScalarType.STRING) {
        return fc.array(text, { maxLength: 3 });
      }
      if (field.listKind === 'message' && field.message.typeName === StructSchema.typeName) {
        return fc.array(jsonObject, { maxLength: 3 });
      }
      break;
    case 'map':
      return fc.dictionary(text, fc.record({ values: fc.array(text, { maxLength: 3 }) }), {
        maxKeys: 4,
      });
  }
  throw new Error(`no arbitrary for ${field.toString()}`);
}

export const eventArb: fc.Arbitrary<Event> = fc
  .record(
    {
      accountId: text,
      eventId: text,
      eventTimestamp: timestamp,
      payload: fc.oneof(
        {
          weight: 3,
          arbitrary: messageInit(HttpRequestCompleteSchema).map((value) => ({
            case: 'httpRequestComplete' as const,
            value,
          })),
        },
        {
          weight: 2,
          arbitrary: messageInit(TcpConnectionClosedSchema).map((value) => ({
            case: 'tcpConnectionClosed' as const,
            value,
          })),
        },
        { weight: 1, arbitrary: fc.constant({ case: undefined }) },
      ),
    },
    { requiredKeys: ['payload'] },
  )
  .map((init) => create(EventSchema, init as never));

// ---- Byte-level rewriting: unknown fields anywhere, message occurrences split in two ----

/** A message or a map entry (key = 1, value = 2), for walking the wire format. */
export type Node = DescMessage | { entryOf: DescField & { fieldKind: 'map' } };

function childNode(node: Node, fieldNo: number): Node | undefined {
  if ('entryOf' in node) {
    const map = node.entryOf;
    return fieldNo === 2 && map.mapKind === 'message' ? map.message : undefined;
  }
  const field = node.fields.find((f) => f.number === fieldNo);
  if (field === undefined) return undefined;
  if (field.fieldKind === 'message') return field.message;
  if (field.fieldKind === 'list' && field.listKind === 'message') return field.message;
  if (field.fieldKind === 'map') return { entryOf: field };
  return undefined;
}

function declared(node: Node): Set<number> {
  return 'entryOf' in node ? new Set([1, 2]) : new Set(node.fields.map((f) => f.number));
}

// One unknown field of any wire type (groups with nested unknown fields).
function writeUnknown(w: BinaryWriter, fieldNo: number, random: () => number, depth = 0): void {
  const pick = Math.floor(random() * (depth < 2 ? 5 : 4));
  switch (pick) {
    case 0:
      w.tag(fieldNo, WireType.Varint).uint64(BigInt(Math.floor(random() * 2 ** 53)) * 2048n);
      break;
    case 1:
      w.tag(fieldNo, WireType.Bit64).fixed64(BigInt(Math.floor(random() * 2 ** 53)));
      break;
    case 2:
      w.tag(fieldNo, WireType.LengthDelimited).bytes(
        Uint8Array.from({ length: Math.floor(random() * 12) }, () => Math.floor(random() * 256)),
      );
      break;
    case 3:
      w.tag(fieldNo, WireType.Bit32).fixed32(Math.floor(random() * 2 ** 32));
      break;
    default: {
      w.tag(fieldNo, WireType.StartGroup);
      const inner = Math.floor(random() * 3);
      for (let i = 0; i < inner; i++) {
        writeUnknown(w, 1 + Math.floor(random() * 100), random, depth + 1);
      }
      w.tag(fieldNo, WireType.EndGroup);
    }
  }
}

function unknownNumber(node: Node, random: () => number): number {
  const taken = declared(node);
  for (;;) {
    const n =
      random() < 0.8 ? 1 + Math.floor(random() * 40) : 1 + Math.floor(random() * (2 ** 29 - 1));
    if (!taken.has(n)) return n;
  }
}

// Field boundaries of a message's bytes.
function boundaries(bytes: Uint8Array): number[] {
  const reader = new BinaryReader(bytes);
  const at = [0];
  while (reader.pos < reader.len) {
    const [no, wt] = reader.tag();
    reader.skip(wt, no);
    at.push(reader.pos);
  }
  return at;
}

/**
 * The same message with unknown fields inserted between fields at every level (map entries and
 * Structs included), and occurrences of message fields split in two at a field boundary (for a
 * singular message field protobuf merges them back; for a list element or map entry it makes two).
 */
export function rewrite(bytes: Uint8Array, node: Node, random: () => number, pUnknown: number) {
  const reader = new BinaryReader(bytes);
  const w = new BinaryWriter();
  const maybeUnknown = () => {
    if (random() < pUnknown) writeUnknown(w, unknownNumber(node, random), random);
  };
  while (reader.pos < reader.len) {
    maybeUnknown();
    const [no, wt] = reader.tag();
    const child = wt === WireType.LengthDelimited ? childNode(node, no) : undefined;
    if (child !== undefined) {
      const sub = rewrite(reader.bytes(), child, random, pUnknown);
      const cuts = boundaries(sub);
      if (cuts.length > 2 && random() < 0.3) {
        const cut = cuts[1 + Math.floor(random() * (cuts.length - 2))];
        w.tag(no, wt).bytes(sub.subarray(0, cut));
        w.tag(no, wt).bytes(sub.subarray(cut));
      } else {
        w.tag(no, wt).bytes(sub);
      }
    } else {
      const start = reader.pos;
      reader.skip(wt, no);
      w.tag(no, wt).raw(bytes.subarray(start, reader.pos));
    }
  }
  maybeUnknown();
  return w.finish();
}
