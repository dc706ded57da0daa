import { create, type DescField, type DescMessage, fromBinary, toBinary } from '@bufbuild/protobuf';
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { timestampToJson, trafficToJson } from '../../src/data-plane/wire-json/to-json.ts';
import {
  type DecodedEvent,
  decodePublishRequest,
  wireToJson,
} from '../../src/data-plane/wire-json/wire-decode.ts';
import {
  HttpRequestCompleteSchema,
  TcpConnectionClosedSchema,
} from '../../src/gen/agent_ingress/events/v0/traffic_pb.ts';
import {
  EventSchema,
  PublishRequestSchema,
} from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { generateEvents, seededRandom } from '../helpers/events.ts';
import { fuzzParams } from '../helpers/fuzz.ts';
import {
  eventArb,
  MAX_SECONDS,
  messageInit,
  requestBytes,
  rewrite,
} from '../helpers/wire-arbitraries.ts';

// The generated wire decoder against the oracle it replaces: protobuf-es's fromBinary followed
// by the catalogue's trafficToJson (and timestampToJson for the envelope's timestamp). Valid
// input must give exactly the oracle's objects (toEqual, and the same key order: JSON.stringify
// equality). Malformed input must throw whenever the oracle throws; where the oracle accepts,
// the decoder either gives the same result or throws (it is stricter on purpose: a known field
// with the wrong wire type, a field running past its message). FUZZ_SEED=<n> replays a run.

const params = fuzzParams;

const PAYLOAD_TYPES = {
  httpRequestComplete: 'http_request_complete.v0',
  tcpConnectionClosed: 'tcp_connection_closed.v0',
} as const;

/** The oracle: what route-events.ts computes today from the same bytes. */
function oracle(bytes: Uint8Array): DecodedEvent[] {
  return fromBinary(PublishRequestSchema, bytes).events.map((e) => {
    const type = e.payload.case === undefined ? undefined : PAYLOAD_TYPES[e.payload.case];
    return {
      accountId: e.accountId,
      eventId: e.eventId,
      eventTimestamp:
        e.eventTimestamp === undefined ? undefined : timestampToJson(e.eventTimestamp),
      type,
      object: type === undefined ? undefined : trafficToJson(type)(e.payload.value),
    };
  });
}

type Outcome<T> = { ok: true; value: T } | { ok: false; error: Error };

function attempt<T>(fn: () => T): Outcome<T> {
  try {
    return { ok: true, value: fn() };
  } catch (error) {
    return { ok: false, error: error as Error };
  }
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('hex');
}

/**
 * Where two values differ, or undefined: same types, primitives by Object.is (NaN, -0), arrays
 * element by element, objects by own keys in order and then by prototype (a header named
 * `__proto__` makes to-json set the object's prototype, see the report; toEqual cannot compare
 * such objects when they also have a `constructor` key).
 */
function difference(a: unknown, b: unknown, path = '$'): string | undefined {
  if (Object.is(a, b)) return undefined;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) {
    return `${path}: ${String(a)} ≠ ${String(b)}`;
  }
  if (Array.isArray(a) !== Array.isArray(b)) return `${path}: array and non-array`;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.join('\u0000') !== kb.join('\u0000')) return `${path}: keys ${ka} ≠ ${kb}`;
  for (const k of ka) {
    const d = difference(
      (a as Record<string, unknown>)[k],
      (b as Record<string, unknown>)[k],
      `${path}.${k}`,
    );
    if (d !== undefined) return d;
  }
  const pa = Object.getPrototypeOf(a);
  const pb = Object.getPrototypeOf(b);
  if (pa === pb) return undefined;
  if (pa === Object.prototype || pb === Object.prototype) return `${path}: prototypes differ`;
  return difference(pa, pb, `${path}.__proto__`);
}

/** Same objects, same key order. */
function expectSameJson(actual: unknown, expected: unknown, what: string): void {
  expect(difference(actual, expected), what).toBeUndefined();
  expect(JSON.stringify(actual), what).toBe(JSON.stringify(expected));
}

/** Valid input (or input cut at any byte): exactly the oracle's outcome. */
function expectExact(bytes: Uint8Array): Outcome<DecodedEvent[]> {
  const expected = attempt(() => oracle(bytes));
  const actual = attempt(() => decodePublishRequest(bytes));
  const what = `bytes ${hex(bytes).slice(0, 400)}`;
  if (!expected.ok) {
    expect(actual.ok, `${what}: protobuf-es threw ${expected.error?.message}`).toBe(false);
  } else {
    if (!actual.ok) throw new Error(`${what}: the decoder threw ${actual.error.message}`);
    expectSameJson(actual.value, expected.value, what);
  }
  return actual;
}

/** Malformed input: throw when the oracle throws, and when the oracle accepts, agree or throw. */
function expectSafe(bytes: Uint8Array, tally?: Record<string, number>): void {
  const expected = attempt(() => oracle(bytes));
  const actual = attempt(() => decodePublishRequest(bytes));
  const what = `bytes ${hex(bytes).slice(0, 400)}`;
  const key = `${expected.ok ? 'accepted' : 'rejected'}/${actual.ok ? 'accepted' : 'rejected'}`;
  if (tally) tally[key] = (tally[key] ?? 0) + 1;
  if (!actual.ok) {
    expect(actual.error).toMatchObject({ name: 'AppError', code: 'ERR_INVALID_EVENTS' });
    return;
  }
  expect(expected.ok, `${what}: protobuf-es rejects what the decoder accepted`).toBe(true);
  if (expected.ok) expectSameJson(actual.value, expected.value, what);
}

// ---- Tests ----

describe('decodePublishRequest on valid input', () => {
  it('gives exactly fromBinary + trafficToJson for the generated traffic of test/helpers', () => {
    const events = generateEvents(2000, { accounts: ['ac_1', 'ac_2', 'ac_3'], seed: 7 });
    const bytes = requestBytes(events);
    const decoded = expectExact(bytes);
    expect(decoded.ok && decoded.value.length).toBe(2000);
    // A second pass (warm caches, optimized code) gives the same.
    expectExact(bytes);
    // A view at an offset into a larger buffer (a Buffer from Node's pool is one).
    const pooled = new Uint8Array(bytes.length + 11);
    pooled.set(bytes, 7);
    expectExact(Buffer.from(pooled.buffer, 7, bytes.length));
    expectExact(pooled.subarray(7, 7 + bytes.length));
    expectExact(requestBytes(generateEvents(50, { accounts: ['a'], tcpShare: 1, seed: 2 })));
    expectExact(requestBytes(generateEvents(50, { accounts: ['a'], tcpShare: 0, seed: 3 })));
  });

  it('gives exactly the oracle’s events for random requests', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { maxLength: 4 }), (events) => {
        expectExact(requestBytes(events));
      }),
      params(400),
    );
  });

  it('ignores unknown fields of every wire type at every level and merges split messages', () => {
    fc.assert(
      fc.property(
        fc.array(eventArb, { minLength: 1, maxLength: 3 }),
        fc.integer(),
        fc.constantFrom(0.05, 0.3, 1),
        (events, s, p) => {
          const bytes = rewrite(requestBytes(events), PublishRequestSchema, seededRandom(s), p);
          expectExact(bytes);
        },
      ),
      params(300),
    );
  });

  it('merges two encodings of an event: last scalar wins, groups and timestamps merge', () => {
    fc.assert(
      fc.property(eventArb, eventArb, (a, b) => {
        const w = new BinaryWriter();
        w.tag(1, WireType.LengthDelimited).bytes(
          new Uint8Array([...toBinary(EventSchema, a), ...toBinary(EventSchema, b)]),
        );
        expectExact(w.finish());
      }),
      params(300),
    );
  });

  it('decodes one payload message with wireToJson like trafficToJson(fromBinary(...))', () => {
    fc.assert(
      fc.property(messageInit(HttpRequestCompleteSchema), fc.integer(), (init, s) => {
        const message = create(HttpRequestCompleteSchema, init as never);
        const bytes = rewrite(
          toBinary(HttpRequestCompleteSchema, message),
          HttpRequestCompleteSchema,
          seededRandom(s),
          0.2,
        );
        const expected = trafficToJson('http_request_complete.v0')(
          fromBinary(HttpRequestCompleteSchema, bytes),
        );
        expectSameJson(wireToJson(HttpRequestCompleteSchema)(bytes), expected, hex(bytes));
        // A range inside a larger buffer.
        const padded = new Uint8Array([0xff, ...bytes, 0xff]);
        expectSameJson(
          wireToJson(HttpRequestCompleteSchema)(padded, 1, padded.length - 1),
          expected,
          hex(bytes),
        );
      }),
      params(150),
    );
    expect(wireToJson(TcpConnectionClosedSchema)(new Uint8Array())).toEqual(
      trafficToJson('tcp_connection_closed.v0')(undefined),
    );
  });
});

// Hand-written wire input for the cases random encodings do not produce.
function event(build: (w: BinaryWriter) => void): Uint8Array {
  const e = new BinaryWriter();
  build(e);
  return new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(e.finish()).finish();
}

function message(build: (w: BinaryWriter) => void): Uint8Array {
  const w = new BinaryWriter();
  build(w);
  return w.finish();
}

// Field numbers of the hand-written cases (checked against the descriptors below).
const EVENT_ACCOUNT = 1;
const EVENT_HTTP = 10;
const EVENT_TCP = 11;
const HTTP_CONN = 5;
const HTTP_HTTP = 6;
const HTTP_BACKEND = 1;
const HTTP_TRAFFIC_POLICY = 10;
const CONN_PORT = 4;
const CONN_START = 5;
const HTTP_REQUEST = 1;
const REQUEST_HEADERS = 2;
const TCP_CONN = 1;
const TCP_BYTES_IN = 1;

function decodedObject(bytes: Uint8Array): Record<string, any> {
  const [decoded] = expectExact(bytes).ok ? decodePublishRequest(bytes) : [];
  return decoded.object as Record<string, any>;
}

describe('decodePublishRequest on edge cases of the wire format', () => {
  it('uses the field numbers the descriptors have', () => {
    const n = (d: DescMessage, name: string) => d.fields.find((f) => f.name === name)?.number;
    const H = HttpRequestCompleteSchema;
    expect(n(EventSchema, 'account_id')).toBe(EVENT_ACCOUNT);
    expect(n(EventSchema, 'http_request_complete')).toBe(EVENT_HTTP);
    expect(n(EventSchema, 'tcp_connection_closed')).toBe(EVENT_TCP);
    expect([n(H, 'conn'), n(H, 'http'), n(H, 'backend'), n(H, 'traffic_policy')]).toEqual([
      HTTP_CONN,
      HTTP_HTTP,
      HTTP_BACKEND,
      HTTP_TRAFFIC_POLICY,
    ]);
    const conn = H.fields.find((f) => f.name === 'conn') as DescField & { message: DescMessage };
    expect([n(conn.message, 'server_port'), n(conn.message, 'start_ts')]).toEqual([
      CONN_PORT,
      CONN_START,
    ]);
  });

  it('reads varints like protobuf-es: 10-byte negatives, dropped high bits, overlong bools', () => {
    const cases = [
      [0xff, 0xff, 0xff, 0xff, 0x0f], // -1 as 5 bytes
      [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], // -1 as 10 bytes
      [0xfe, 0xff, 0xff, 0xff, 0x7f], // bits above 32 in the 5th byte are dropped
      [0x80, 0x80, 0x80, 0x80, 0x88, 0x80, 0x80, 0x80, 0x80, 0x00], // 2^31 plus dropped bits
      [0x81, 0x80, 0x00], // overlong 1
    ];
    for (const raw of cases) {
      const bytes = event((w) => {
        w.tag(EVENT_ACCOUNT, WireType.LengthDelimited).string('a');
        w.tag(EVENT_HTTP, WireType.LengthDelimited).bytes(
          message((h) => {
            h.tag(HTTP_CONN, WireType.LengthDelimited).bytes(
              message((c) => c.tag(CONN_PORT, WireType.Varint).raw(new Uint8Array(raw))),
            );
            h.tag(HTTP_BACKEND, WireType.LengthDelimited).bytes(
              message((b) => b.tag(1, WireType.Varint).raw(new Uint8Array(raw))),
            );
          }),
        );
      });
      decodedObject(bytes);
    }
    const port = decodedObject(
      event((w) =>
        w
          .tag(EVENT_HTTP, WireType.LengthDelimited)
          .bytes(
            message((h) =>
              h
                .tag(HTTP_CONN, WireType.LengthDelimited)
                .bytes(message((c) => c.tag(CONN_PORT, WireType.Varint).int32(-5))),
            ),
          ),
      ),
    ).conn.server_port;
    expect(port).toBe(-5);
    // bool: 0x80 0x00 is an overlong false; 0x80 0x80 ... 0x01 (bit 63) is true.
    for (const [raw, value] of [
      [[0x80, 0x00], false],
      [[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01], true],
      [[0x02], true],
    ] as const) {
      const backend = decodedObject(
        event((w) =>
          w
            .tag(EVENT_HTTP, WireType.LengthDelimited)
            .bytes(
              message((h) =>
                h
                  .tag(HTTP_BACKEND, WireType.LengthDelimited)
                  .bytes(message((b) => b.tag(1, WireType.Varint).raw(new Uint8Array(raw)))),
              ),
            ),
        ),
      ).backend;
      expect(backend.connection_reused).toBe(value);
    }
  });

  it('keeps every int64 exact: a number up to 2^53, beyond it the exact digits in the JSON', () => {
    const values = [
      0n,
      -1n,
      2n ** 53n - 1n,
      2n ** 53n,
      -(2n ** 53n),
      2n ** 53n + 1n,
      -(2n ** 53n + 1n),
      2n ** 63n - 1n,
      -(2n ** 63n),
      2n ** 62n + 2n ** 10n + 1n,
    ];
    for (const v of values) {
      const bytes = event((w) =>
        w
          .tag(EVENT_TCP, WireType.LengthDelimited)
          .bytes(
            message((t) =>
              t
                .tag(TCP_CONN, WireType.LengthDelimited)
                .bytes(message((c) => c.tag(TCP_BYTES_IN, WireType.Varint).int64(v))),
            ),
          ),
      );
      const bytesIn = decodedObject(bytes).conn.bytes_in;
      expect(JSON.stringify({ bytesIn })).toBe(`{"bytesIn":${v}}`);
      if (v >= -(2n ** 53n) && v <= 2n ** 53n) expect(bytesIn).toBe(Number(v));
    }
  });

  it('keeps header map entries in JS key order, later duplicates in place, defaults for gaps', () => {
    const entry = (key: string | undefined, values: string[] | undefined) =>
      message((e) => {
        if (key !== undefined) e.tag(1, WireType.LengthDelimited).string(key);
        if (values !== undefined) {
          e.tag(2, WireType.LengthDelimited).bytes(
            message((l) => {
              for (const v of values) l.tag(1, WireType.LengthDelimited).string(v);
            }),
          );
        }
      });
    const bytes = event((w) =>
      w.tag(EVENT_HTTP, WireType.LengthDelimited).bytes(
        message((h) =>
          h.tag(HTTP_HTTP, WireType.LengthDelimited).bytes(
            message((x) =>
              x.tag(HTTP_REQUEST, WireType.LengthDelimited).bytes(
                message((r) => {
                  for (const [k, v] of [
                    ['b', ['1']],
                    ['10', ['2']],
                    ['a', ['3', '4']],
                    ['2', ['5']],
                    ['b', ['6']],
                    [undefined, ['7']],
                    ['novalue', undefined],
                    ['__proto__', ['8']],
                    ['constructor', ['9']],
                  ] as const) {
                    r.tag(REQUEST_HEADERS, WireType.LengthDelimited).bytes(
                      entry(k, v as string[] | undefined),
                    );
                  }
                }),
              ),
            ),
          ),
        ),
      ),
    );
    const headers = decodedObject(bytes).http.request.headers;
    expect(Object.keys(headers)).toEqual([
      '2',
      '10',
      'b',
      'a',
      '',
      'novalue',
      '__proto__',
      'constructor',
    ]);
    expect(Object.getOwnPropertyDescriptor(headers, '__proto__')?.value).toEqual(['8']);
    expect(headers.b).toEqual(['6']);
    expect(headers.novalue).toEqual([]);
  });

  it('decodes Struct logs: every Value kind, merges within a Value, __proto__ keys', () => {
    const value = (build: (v: BinaryWriter) => void) => message(build);
    const structEntry = (key: string, v: Uint8Array | undefined) =>
      message((e) => {
        e.tag(1, WireType.LengthDelimited).string(key);
        if (v !== undefined) e.tag(2, WireType.LengthDelimited).bytes(v);
      });
    const struct = (entries: Uint8Array[]) =>
      message((s) => {
        for (const e of entries) s.tag(1, WireType.LengthDelimited).bytes(e);
      });
    const list = (values: Uint8Array[]) =>
      message((l) => {
        for (const v of values) l.tag(1, WireType.LengthDelimited).bytes(v);
      });
    const log = struct([
      structEntry(
        'n',
        value((v) => v.tag(2, WireType.Bit64).double(-0)),
      ),
      structEntry(
        'nan',
        value((v) => v.tag(2, WireType.Bit64).double(Number.NaN)),
      ),
      structEntry(
        'none',
        value(() => {}),
      ),
      structEntry('absent', undefined),
      structEntry(
        'null',
        value((v) => v.tag(1, WireType.Varint).int32(0)),
      ),
      structEntry(
        's',
        value((v) => v.tag(3, WireType.LengthDelimited).string('x')),
      ),
      structEntry(
        't',
        value((v) => v.tag(4, WireType.Varint).bool(true)),
      ),
      structEntry(
        '__proto__',
        value((v) => v.tag(4, WireType.Varint).bool(false)),
      ),
      structEntry(
        '7',
        value((v) => v.tag(3, WireType.LengthDelimited).string('seven')),
      ),
      // Two struct_value occurrences in one Value merge; a list_value then replaces them.
      structEntry(
        'merged',
        value((v) => {
          v.tag(5, WireType.LengthDelimited).bytes(
            struct([
              structEntry(
                'a',
                value((x) => x.tag(2, WireType.Bit64).double(1)),
              ),
            ]),
          );
          v.tag(5, WireType.LengthDelimited).bytes(
            struct([
              structEntry(
                'b',
                value((x) => x.tag(2, WireType.Bit64).double(2)),
              ),
            ]),
          );
        }),
      ),
      structEntry(
        'replaced',
        value((v) => {
          v.tag(5, WireType.LengthDelimited).bytes(struct([]));
          v.tag(6, WireType.LengthDelimited).bytes(
            list([value((x) => x.tag(3, WireType.LengthDelimited).string('l'))]),
          );
          v.tag(6, WireType.LengthDelimited).bytes(list([value(() => {})]));
        }),
      ),
      structEntry(
        's',
        value((v) => v.tag(3, WireType.LengthDelimited).string('again')),
      ),
    ]);
    const bytes = event((w) =>
      w
        .tag(EVENT_HTTP, WireType.LengthDelimited)
        .bytes(
          message((h) =>
            h
              .tag(HTTP_TRAFFIC_POLICY, WireType.LengthDelimited)
              .bytes(message((p) => p.tag(1, WireType.LengthDelimited).bytes(log))),
          ),
        ),
    );
    const [logs] = decodedObject(bytes).traffic_policy.logs;
    expect(Object.keys(logs)).toEqual([
      '7',
      'n',
      'nan',
      'none',
      'absent',
      'null',
      's',
      't',
      '__proto__',
      'merged',
      'replaced',
    ]);
    expect(Object.hasOwn(logs, '__proto__')).toBe(true);
    expect(logs.merged).toEqual({ a: 1, b: 2 });
    expect(logs.replaced).toEqual(['l', null]);
    expect(logs.s).toBe('again');
    expect(Object.is(logs.n, -0)).toBe(true);
  });

  it('merges repeated occurrences of timestamps and groups, and switches the payload oneof', () => {
    const conn = (build: (c: BinaryWriter) => void) => message(build);
    const ts = (seconds: bigint | undefined, nanos: number | undefined) =>
      message((t) => {
        if (seconds !== undefined) t.tag(1, WireType.Varint).int64(seconds);
        if (nanos !== undefined) t.tag(2, WireType.Varint).int32(nanos);
      });
    const http = (build: (h: BinaryWriter) => void) => message(build);
    const bytes = event((w) => {
      w.tag(EVENT_HTTP, WireType.LengthDelimited).bytes(
        http((h) => {
          h.tag(HTTP_CONN, WireType.LengthDelimited).bytes(
            conn((c) => {
              c.tag(CONN_PORT, WireType.Varint).int32(80);
              c.tag(CONN_START, WireType.LengthDelimited).bytes(ts(1_700_000_000n, -1));
            }),
          );
          h.tag(HTTP_CONN, WireType.LengthDelimited).bytes(
            conn((c) => c.tag(CONN_START, WireType.LengthDelimited).bytes(ts(undefined, 5))),
          );
        }),
      );
      w.tag(3, WireType.LengthDelimited).bytes(ts(MAX_SECONDS + 1n, undefined));
      w.tag(3, WireType.LengthDelimited).bytes(ts(1n, undefined));
    });
    const [decoded] = decodePublishRequest(bytes);
    expectExact(bytes);
    expect(decoded.eventTimestamp).toBe('1970-01-01T00:00:01Z');
    expect(decoded.object?.conn).toMatchObject({
      server_port: 80,
      start_ts: '2023-11-14T22:13:20.000000005Z',
    });
    // http, then tcp, then http again: the last member wins and starts afresh.
    const switched = event((w) => {
      w.tag(EVENT_HTTP, WireType.LengthDelimited).bytes(
        http((h) =>
          h
            .tag(HTTP_CONN, WireType.LengthDelimited)
            .bytes(conn((c) => c.tag(CONN_PORT, WireType.Varint).int32(80))),
        ),
      );
      w.tag(EVENT_TCP, WireType.LengthDelimited).bytes(new Uint8Array());
      w.tag(EVENT_HTTP, WireType.LengthDelimited).bytes(new Uint8Array());
    });
    expectExact(switched);
    expect(decodePublishRequest(switched)[0].object?.conn).toMatchObject({ server_port: 0 });
    // An empty event: no payload, no timestamp.
    const empty = event(() => {});
    expectExact(empty);
    expect(decodePublishRequest(empty)).toEqual([
      {
        accountId: '',
        eventId: '',
        eventTimestamp: undefined,
        type: undefined,
        object: undefined,
      },
    ]);
  });

  it('decodes strings as protobuf-es does: BOM kept, invalid UTF-8 rejected', () => {
    const withAccount = (raw: number[]) =>
      event((w) => w.tag(EVENT_ACCOUNT, WireType.LengthDelimited).bytes(new Uint8Array(raw)));
    expectExact(withAccount([0xef, 0xbb, 0xbf, 0x61]));
    expect(decodePublishRequest(withAccount([0xef, 0xbb, 0xbf, 0x61]))[0].accountId).toBe(
      '\ufeffa',
    );
    for (const bad of [[0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xe2, 0x82]]) {
      const bytes = withAccount([0x61, ...bad]);
      expectExact(bytes);
      expect(() => decodePublishRequest(bytes)).toThrow(/invalid UTF-8/);
      // Long strings take another path.
      expectExact(withAccount([...new Array(100).fill(0x61), ...bad]));
    }
  });
});

describe('decodePublishRequest on malformed input', () => {
  const valid = requestBytes([
    ...generateEvents(3, { accounts: ['ac_1'], seed: 11 }),
    create(EventSchema, {
      accountId: 'ac_é',
      eventTimestamp: { seconds: 1n, nanos: 5 },
      payload: {
        case: 'httpRequestComplete',
        value: {
          trafficPolicy: { logs: [{ a: [1, 'x', null, { b: true }] }] },
          compression: { bytesSaved: -(2n ** 60n) },
          conn: { serverPort: -1 },
        },
      },
    }),
  ]);

  it('throws exactly when protobuf-es does for a request cut at every byte', () => {
    let rejected = 0;
    for (let length = 0; length < valid.length; length++) {
      if (!expectExact(valid.subarray(0, length)).ok) rejected++;
    }
    expect(rejected).toBeGreaterThan(valid.length / 2);
  });

  it('throws a clear error on malformed tags, varints, lengths and groups', () => {
    const cases: [string, number[], RegExp][] = [
      ['wire type 6', [0x0e], /wire type 6/],
      ['wire type 7', [0x0f], /wire type 7/],
      ['field number 0', [0x00, 0x00], /field number 0/],
      ['truncated varint', [0x10, 0x80], /truncated/],
      ['truncated tag', [0x80], /truncated/],
      ['11-byte varint', [0x10, ...new Array(10).fill(0x80), 0x01], /longer than 10 bytes/],
      ['length beyond buffer', [0x0a, 0x05, 0x01], /runs past the end/],
      ['length beyond nested message', [0x0a, 0x03, 0x0a, 0x05, 0x61], /runs past the end/],
      ['group end mismatch', [0x1b, 0x24], /closed by an end-group tag of field 4/],
      ['group never closed', [0x1b, 0x08, 0x01], /not closed/],
      ['lone end group', [0x1c], /end-group tag of field 3 without a start/],
      ['tag beyond 32 bits', [0xff, 0xff, 0xff, 0xff, 0x7f], /overflows 32 bits/],
      ['fixed64 cut', [0x19, 1, 2, 3], /truncated/],
      ['fixed32 cut', [0x1d, 1, 2, 3], /truncated/],
      [
        'known field, wrong wire type',
        [0x08, 0x01],
        /PublishRequest\.events \(1\) has wire type 0/,
      ],
    ];
    for (const [what, raw, message] of cases) {
      const bytes = new Uint8Array(raw);
      expect(() => decodePublishRequest(bytes), what).toThrow(message);
      expectSafe(bytes);
    }
    // A varint field whose value would be the first byte after its message.
    const cut = event((w) => {
      w.tag(EVENT_HTTP, WireType.LengthDelimited).bytes(
        message((h) => h.tag(HTTP_CONN, WireType.LengthDelimited).bytes(new Uint8Array([0x20]))),
      );
      w.tag(EVENT_ACCOUNT, WireType.LengthDelimited).string('a');
    });
    expect(() => decodePublishRequest(cut)).toThrow(/truncated value/);
    expectSafe(cut);
    // The same inside a payload.
    const inPayload = event((w) =>
      w.tag(EVENT_HTTP, WireType.LengthDelimited).bytes(new Uint8Array([0x28, 0x01])),
    );
    expect(() => decodePublishRequest(inPayload)).toThrow(
      /HttpRequestComplete\.conn \(5\) has wire type 0, expected 2/,
    );
  });

  it('skips unknown groups nested a little, and stops at protobuf-es’s recursion limit', () => {
    const nestedGroups = (depth: number) => {
      const w = new BinaryWriter();
      for (let i = 0; i < depth; i++) w.tag(20, WireType.StartGroup);
      for (let i = 0; i < depth; i++) w.tag(20, WireType.EndGroup);
      return event((e) => e.tag(EVENT_HTTP, WireType.LengthDelimited).bytes(w.finish()));
    };
    for (const depth of [1, 5, 95, 96, 97, 98, 99, 100, 150]) expectExact(nestedGroups(depth));
    expect(() => decodePublishRequest(nestedGroups(150))).toThrow(/deeper than 100/);

    const nestedStruct = (depth: number, emptyLeaf = false) => {
      let value = emptyLeaf
        ? message((v) => v.tag(5, WireType.LengthDelimited).bytes(new Uint8Array()))
        : message((v) => v.tag(3, WireType.LengthDelimited).string('leaf'));
      for (let i = 0; i < depth; i++) {
        const inner = value;
        const s = message((st) =>
          st.tag(1, WireType.LengthDelimited).bytes(
            message((e) => {
              e.tag(1, WireType.LengthDelimited).string('a');
              e.tag(2, WireType.LengthDelimited).bytes(inner);
            }),
          ),
        );
        value = message((v) => v.tag(5, WireType.LengthDelimited).bytes(s));
      }
      const log = message((st) =>
        st.tag(1, WireType.LengthDelimited).bytes(
          message((e) => {
            e.tag(1, WireType.LengthDelimited).string('root');
            e.tag(2, WireType.LengthDelimited).bytes(value);
          }),
        ),
      );
      return event((w) =>
        w
          .tag(EVENT_HTTP, WireType.LengthDelimited)
          .bytes(
            message((h) =>
              h
                .tag(HTTP_TRAFFIC_POLICY, WireType.LengthDelimited)
                .bytes(message((p) => p.tag(1, WireType.LengthDelimited).bytes(log))),
            ),
          ),
      );
    };
    for (const emptyLeaf of [false, true]) {
      let accepted = 0;
      for (let depth = 40; depth <= 52; depth++) {
        if (expectExact(nestedStruct(depth, emptyLeaf)).ok) accepted++;
      }
      expect(accepted).toBeGreaterThan(0);
      expect(accepted).toBeLessThan(13);
    }
    expect(() => decodePublishRequest(nestedStruct(1000))).toThrow(/deeper than 100/);
  });

  it('never accepts what protobuf-es rejects, nor differs from it, on random bytes', () => {
    const tally: Record<string, number> = {};
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => expectSafe(bytes, tally)),
      params(3000),
    );
    expect(tally['accepted/accepted']).toBeGreaterThan(0);
  });

  it('never accepts what protobuf-es rejects, nor differs from it, on mutated requests', () => {
    const tally: Record<string, number> = {};
    const mutation = fc.record({
      at: fc.nat(),
      how: fc.constantFrom('flip', 'set', 'insert', 'delete'),
      bytes: fc.uint8Array({ minLength: 1, maxLength: 4 }),
    });
    fc.assert(
      fc.property(
        fc.array(eventArb, { minLength: 1, maxLength: 2 }),
        fc.array(mutation, { minLength: 1, maxLength: 3 }),
        (events, mutations) => {
          let bytes = requestBytes(events);
          for (const { at, how, bytes: b } of mutations) {
            const i = bytes.length === 0 ? 0 : at % bytes.length;
            const copy = [...bytes];
            if (how === 'flip') copy[i] ^= 1 << (b[0] % 8);
            else if (how === 'set') copy[i] = b[0];
            else if (how === 'insert') copy.splice(i, 0, ...b);
            else copy.splice(i, b.length);
            bytes = new Uint8Array(copy);
          }
          expectSafe(bytes, tally);
        },
      ),
      params(1500),
    );
    expect(tally['accepted/accepted']).toBeGreaterThan(0);
    expect(tally['rejected/rejected']).toBeGreaterThan(0);
  });
});

describe('a header named __proto__', () => {
  it('is an ordinary header in the event JSON, on both decoding paths', () => {
    const events = generateEvents(1, { accounts: ['ac_proto'], tcpShare: 0, seed: 8 });
    const http = events[0].payload.value as {
      http: { request: { headers: Record<string, { values: string[] }> } };
    };
    const headers: Record<string, { values: string[] }> = {};
    Object.defineProperty(headers, '__proto__', {
      value: { $typeName: 'agent_ingress.events.v0.StringList', values: ['x'] },
      enumerable: true,
      writable: true,
      configurable: true,
    });
    http.http.request.headers = headers;
    const bytes = toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }));
    const decoded = decodePublishRequest(bytes)[0].object as any;
    expect(Object.getPrototypeOf(decoded.http.request.headers)).toBe(Object.prototype);
    expect(JSON.parse(JSON.stringify(decoded.http.request.headers))).toEqual(
      JSON.parse('{"__proto__": ["x"]}'),
    );
    const reference = trafficToJson('http_request_complete.v0')(
      fromBinary(PublishRequestSchema, bytes).events[0].payload.value as object,
    ) as any;
    expect(JSON.stringify(reference.http.request.headers)).toBe('{"__proto__":["x"]}');
  });
});
