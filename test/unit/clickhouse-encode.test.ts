import { create, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ColumnSpec } from '../../src/catalogue/types.ts';
import { routeRequest } from '../../src/data-plane/pipeline/route-events.ts';
import { compileRouting } from '../../src/data-plane/pipeline/routing.ts';
import {
  byTable,
  encodeRowBinary,
  type TableFor,
  type TableTarget,
} from '../../src/data-plane/sinks/clickhouse/encode.ts';
import { ByteWriter, valueWriter } from '../../src/data-plane/sinks/clickhouse/row-binary.ts';
import {
  columnType,
  type ServerProfile,
  serverProfile,
} from '../../src/data-plane/sinks/clickhouse/schema.ts';
import { tableForEventType } from '../../src/data-plane/sinks/clickhouse/tables.ts';
import { type EventRecord, RecordBlock } from '../../src/data-plane/sinks/record-block.ts';
import type { Batch } from '../../src/data-plane/sinks/types.ts';
import { SinkError } from '../../src/data-plane/sinks/types.ts';
import { PublishRequestSchema } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { recordsOf } from '../helpers/blocks.ts';
import { generateEvents } from '../helpers/events.ts';

// ---------------------------------------------------------------------------------------------
// The reference: encodeRows as it was before the generated encoder (JSON.parse of each envelope,
// then a generic walk over the columns), kept verbatim: the JSONEachRow rows the sink inserted.
// The RowBinary encoder must give exactly those rows, each value written by its column type's
// writer (row-binary.ts; checked byte by byte in clickhouse-row-binary.test.ts and against a
// real server in clickhouse-rowbinary.test.ts).

const RFC3339 = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.(\d+))?Z$/;

function two(n: number): string {
  return String(n).padStart(2, '0');
}

function refTimestamp(value: unknown, profile: ServerProfile): string | undefined {
  if (typeof value === 'string') {
    const m = RFC3339.exec(value);
    if (m) {
      if (!profile.modern) return `${m[1]} ${m[2]}`;
      return `${m[1]} ${m[2]}.${(m[3] ?? '').padEnd(3, '0').slice(0, 3)}`;
    }
  }
  const ms =
    typeof value === 'number' ? value : typeof value === 'string' ? Date.parse(value) : NaN;
  if (!Number.isFinite(ms)) return undefined;
  const d = new Date(ms);
  const date = `${d.getUTCFullYear()}-${two(d.getUTCMonth() + 1)}-${two(d.getUTCDate())}`;
  const time = `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}`;
  return profile.modern
    ? `${date} ${time}.${String(d.getUTCMilliseconds()).padStart(3, '0')}`
    : `${date} ${time}`;
}

/** JSON.rawJSON and JSON.isRawJSON (ES2025; not in the TypeScript lib in use). */
const rawJSON = JSON as unknown as {
  rawJSON(text: string): { rawJSON: string };
  isRawJSON(v: unknown): v is { rawJSON: string };
};

/**
 * JSON.parse keeping an integer a double would change as the raw JSON of its digits (JSON nested
 * deeper than the reviver's recursion can go is parsed plainly).
 */
function refParse(json: string): unknown {
  try {
    return JSON.parse(json, (_key, value, context?: { source?: string }) =>
      typeof value === 'number' &&
      /^-?(0|[1-9]\d*)$/.test(context?.source ?? '') &&
      String(value) !== context?.source &&
      !Number.isSafeInteger(value)
        ? rawJSON.rawJSON(context!.source!)
        : value,
    );
  } catch (error) {
    if (error instanceof RangeError) return JSON.parse(json);
    throw error;
  }
}

function refInt64(value: unknown): number | string | undefined {
  if (typeof value === 'number') return Math.trunc(value);
  if (rawJSON.isRawJSON(value)) return value.rawJSON;
  if (typeof value === 'string' && /^-?\d+$/.test(value)) {
    const n = Number(value);
    return Number.isSafeInteger(n) ? n : value;
  }
  return undefined;
}

function refColumnValue(column: ColumnSpec, value: unknown, profile: ServerProfile): unknown {
  if (value === undefined || value === null) return undefined;
  switch (column.kind) {
    case 'string':
      return typeof value === 'string' ? value : JSON.stringify(value);
    case 'int64':
      return refInt64(value);
    case 'int32':
      // An int32 column holds no integer beyond 2^53: such a value is read as a double.
      if (rawJSON.isRawJSON(value)) return Number(value.rawJSON);
      return typeof value === 'number' ? value : refInt64(value);
    case 'bool':
      return value === true || value === 'true' ? 1 : 0;
    case 'timestamp':
      return refTimestamp(value, profile);
    case 'string_list_map':
      return profile.modern ? value : JSON.stringify(value);
    case 'json':
      return JSON.stringify(value);
    case 'string_list':
      return Array.isArray(value)
        ? value.map((v) => (rawJSON.isRawJSON(v) ? v.rawJSON : String(v)))
        : undefined;
  }
}

function refPick(doc: unknown, path: readonly string[]): unknown {
  let v = doc;
  for (const key of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[key];
  }
  return v;
}

function refEncodeRows(
  batch: Batch,
  tableFor: TableFor,
  profile: ServerProfile,
): Map<string, { target: TableTarget; rows: Record<string, unknown>[] }> {
  const out = new Map<string, { target: TableTarget; rows: Record<string, unknown>[] }>();
  for (const record of batch.records()) {
    const target = tableFor(record.eventType);
    if (!target) {
      throw new SinkError(`clickhouse: no table for event type ${record.eventType}`, false);
    }
    let group = out.get(target.table);
    if (!group) {
      group = { target, rows: [] };
      out.set(target.table, group);
    }
    const doc = refParse(record.json);
    const row: Record<string, unknown> = {};
    for (const column of target.columns) {
      const value = refColumnValue(column, refPick(doc, column.path), profile);
      if (value !== undefined) row[column.name] = value;
    }
    group.rows.push(row);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

const LEGACY = serverProfile('18.16.1');
const MODERN = serverProfile('24.8.4.13');
const PROFILES = [LEGACY, MODERN];

const HTTP = 'http_request_complete.v0';
const TCP = 'tcp_connection_closed.v0';

function batchOf(records: EventRecord[]): Batch {
  return RecordBlock.of(records);
}

function record(eventType: string, json: string): EventRecord {
  return { eventId: 'ev_x', eventType, accountId: 'ac_x', partitionKey: 'k', json };
}

/** The sink's RowBinary rows of a batch, per table, into tables of the profile's DDL. */
function encodeRows(batch: Batch, tableFor: TableFor, profile: ServerProfile) {
  const out = new Map<string, { target: TableTarget; bytes: Buffer }>();
  for (const [table, { target, jsons }] of byTable(batch, tableFor)) {
    const types = target.columns.map((c) => columnType(c, profile));
    const bytes = encodeRowBinary({ columns: target.columns, types, jsons }, profile);
    out.set(table, { target, bytes: Buffer.from(bytes) });
  }
  return out;
}

/** The reference rows, each value written by its column type's writer. */
function refRowBinary(
  rows: Record<string, unknown>[],
  target: TableTarget,
  profile: ServerProfile,
) {
  const writers = target.columns.map((c) => valueWriter(columnType(c, profile)));
  const w = new ByteWriter();
  for (const row of rows) {
    for (const [i, column] of target.columns.entries()) writers[i](w, row[column.name]);
  }
  return Buffer.from(w.result());
}

/** The RowBinary encoder gives exactly the reference's rows, on both profiles. */
function expectSameRows(
  records: EventRecord[],
  tableFor: TableFor = tableForEventType,
  profiles: ServerProfile[] = PROFILES,
): void {
  const batch = batchOf(records);
  for (const profile of profiles) {
    const want = refEncodeRows(batch, tableFor, profile);
    const got = encodeRows(batch, tableFor, profile);
    expect([...got.keys()]).toEqual([...want.keys()]);
    for (const [table, group] of want) {
      const { target, bytes } = got.get(table)!;
      expect(target).toEqual(group.target);
      const ref = refRowBinary(group.rows, group.target, profile);
      if (!bytes.equals(ref)) expect(bytes.toString('hex')).toBe(ref.toString('hex'));
    }
  }
}

/** Envelope records exactly as the route-events worker makes them, full or projected. */
function workerRecords(count: number, seed: number, fields: { http?: string[]; tcp?: string[] }) {
  const account = 'ac_test';
  const routing = compileRouting({
    version: 1,
    subscriptions: [
      {
        id: 'sub_1',
        accountId: account,
        sources: [
          { type: HTTP, filter: '', fields: fields.http ?? [] },
          { type: TCP, filter: '', fields: fields.tcp ?? [] },
        ],
        destinationIds: ['ed_1'],
      },
    ],
  });
  const events = generateEvents(count, { accounts: [account], seed });
  const bytes = toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }));
  const result = routeRequest(routing, bytes, Date.UTC(2026, 10, 22));
  if (result.kind !== 'routed') throw new Error(JSON.stringify(result));
  return result.deliveries.flatMap(recordsOf);
}

const PROJECTIONS: { http?: string[]; tcp?: string[] }[] = [
  { http: ['conn', 'http.response.status_code'], tcp: ['conn.bytes_in', 'conn.client_ip'] },
  { http: ['conn.client_ip', 'http.request.url.path', 'http.response.body_length'] },
  { http: ['http.request'], tcp: ['ip_policy'] },
  { http: ['backend', 'tls', 'traffic_policy'], tcp: ['conn.end_ts', 'traffic_policy'] },
];

function auditRecord(eventType: string, envelope: Record<string, unknown>): EventRecord {
  return record(eventType, JSON.stringify({ event_type: eventType, ...envelope }));
}

const AUDIT_RECORDS = [
  auditRecord('api_key_created.v0', {
    event_id: 'ev_a1',
    event_timestamp: '2026-03-04T05:06:07.123Z',
    account_id: 'ac_1',
    principal: { id: 'ak_1', uri: 'https://api.example.com/api_keys/ak_1' },
    object: { id: 'ak_2', description: 'ci "deploy" key', metadata: '{}', created_at: 'x' },
  }),
  auditRecord('event_subscription_updated.v0', {
    event_id: 'ev_a2',
    event_timestamp: '2026-03-04T05:06:07Z',
    account_id: 'ac_1',
    principal: null,
    object: { id: 'esb_1', sources: [{ type: HTTP, fields: ['conn'] }], destination_ids: [] },
  }),
  auditRecord('event_destination_test.v0', {
    event_id: 'ev_a3',
    event_timestamp: '2026-03-04T05:06:07.5Z',
    account_id: 'ac_1',
    principal: null,
    object: { destination_id: 'ed_1', message: 'test event' },
  }),
];

// One full http envelope as an object, to vary in the edge cases below.
function httpDoc(): Record<string, any> {
  return JSON.parse(workerRecords(20, 11, {}).find((r) => r.eventType === HTTP)!.json);
}

function httpJson(edit: (doc: Record<string, any>) => void): EventRecord {
  const doc = httpDoc();
  edit(doc);
  return record(HTTP, JSON.stringify(doc));
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('clickhouse row encoding', () => {
  it('gives the reference rows for full worker envelopes of both traffic kinds', () => {
    const records = workerRecords(600, 3, {});
    expect(new Set(records.map((r) => r.eventType))).toEqual(new Set([HTTP, TCP]));
    expectSameRows(records);
  });

  it('gives the reference rows for projected envelopes (missing fields stay out of the row)', () => {
    for (const [i, fields] of PROJECTIONS.entries()) {
      expectSameRows(workerRecords(200, 20 + i, fields));
    }
  });

  it('gives the reference rows when layouts of many projections interleave in one batch', () => {
    const sets = [{}, ...PROJECTIONS].map((fields, i) => workerRecords(60, 40 + i, fields));
    const mixed: EventRecord[] = [];
    for (let i = 0; i < 60; i++) for (const set of sets) if (set[i]) mixed.push(set[i]);
    expectSameRows(mixed);
  });

  it('gives the reference rows when envelopes do not share a layout', () => {
    // Each envelope has text of its own outside the columns: more layouts than are kept.
    const records = workerRecords(1500, 6, {}).map((r, i) =>
      record(r.eventType, r.json.replace('"principal":null', `"principal":{"n${i % 700}":${i}}`)),
    );
    expectSameRows(records);
  });

  it('gives the reference rows for audit and destination test events', () => {
    expectSameRows([...AUDIT_RECORDS, ...workerRecords(10, 5, {}), ...AUDIT_RECORDS]);
  });

  it('reads plain envelopes without JSON.parse', () => {
    const records = workerRecords(200, 8, {});
    for (const profile of PROFILES) encodeRows(batchOf(records), tableForEventType, profile);
    const parse = vi.spyOn(JSON, 'parse');
    for (const profile of PROFILES) encodeRows(batchOf(records), tableForEventType, profile);
    expect(parse).not.toHaveBeenCalled();
  });

  it('keeps int64 values beyond 2^53 exact, on the fast path and the slow path', () => {
    const raw = rawJSON.rawJSON;
    const big = (userAgent: string) =>
      httpJson((d) => {
        d.object.http.request.user_agent = userAgent;
        d.object.http.request.body_length = raw('9007199254740993');
        d.object.http.response.body_length = raw('9223372036854775807');
        d.object.compression.bytes_saved = raw('-9223372036854775808');
      });
    // A plain envelope takes the fast path; a quote in a string (an escape) the slow one.
    const le = (n: bigint) => {
      const b = Buffer.alloc(8);
      b.writeBigInt64LE(n);
      return b.toString('hex');
    };
    for (const record of [big('plain'), big('with "quotes"')]) {
      expect(record.json).toContain('"body_length":9007199254740993,');
      for (const profile of PROFILES) {
        const { bytes } = encodeRows(batchOf([record]), tableForEventType, profile).get(
          'http_request_complete_v0',
        )!;
        const hex = bytes.toString('hex');
        for (const n of [9007199254740993n, 9223372036854775807n, -9223372036854775808n]) {
          expect(hex).toContain(le(n));
        }
        expectSameRows([record], tableForEventType, [profile]);
      }
    }
  });

  it('gives the reference rows for unusual text and values', () => {
    const cases: EventRecord[] = [
      // Escapes, non-ASCII, surrogate pairs and lone surrogates, U+2028.
      httpJson((d) => {
        d.object.http.request.user_agent = 'quote " backslash \\ tab \t nl \n ctl \u0001';
        d.object.http.request.headers = { 'X-Q': ['a"b', 'c\\d'], É: ['ü', '中文'] };
      }),
      httpJson((d) => {
        d.object.conn.server_name = 'emoji 😀 and \u2028 and \u007f';
        d.object.http.response.headers = { Smile: ['😀'] };
      }),
      httpJson((d) => {
        d.object.conn.server_name = 'lone \ud800 surrogate';
        d.object.http.request.headers = { Lone: ['\udc00'] };
      }),
      httpJson((d) => {
        d.object.conn.server_name = 'é à 中文 ✓';
      }),
      // Integer-like, repeated-looking and special keys inside a map written out whole.
      httpJson((d) => {
        d.object.http.request.headers = { b: ['1'], 10: ['x'], 2: ['y'], a: [] };
      }),
      httpJson((d) => {
        d.object.http.request.headers = { __proto__: ['p'], constructor: ['c'], '': [''] };
      }),
      httpJson((d) => {
        d.object.http.request.headers = {};
        d.object.http.response.headers = { A: [], B: ['1', '2', '3'] };
      }),
      // Numbers: large, negative, fractional, exponents, as strings.
      httpJson((d) => {
        d.object.http.request.body_length = '9007199254740993';
        d.object.http.response.body_length = '-12';
        d.object.compression.bytes_saved = 12.75;
        d.object.conn.server_port = 1.5;
      }),
      httpJson((d) => {
        d.object.http.request.body_length = -0.5;
        d.object.http.response.body_length = 1e21;
        d.object.compression.bytes_saved = '007';
        d.object.conn.server_port = '443';
      }),
      // Integers a double cannot hold (written as their digits), and 2^53, which it can.
      httpJson((d) => {
        d.object.http.request.body_length = rawJSON.rawJSON('9007199254740992');
        d.object.http.response.body_length = rawJSON.rawJSON('-9007199254740993');
        d.object.compression.bytes_saved = rawJSON.rawJSON('100000000000000000000000');
        d.object.conn.server_port = rawJSON.rawJSON('9007199254740993');
        d.object.conn.server_name = rawJSON.rawJSON('9007199254740993');
        d.object.traffic_policy.logs = [{ n: rawJSON.rawJSON('9007199254740993'), m: 2 ** 60 }];
        d.object.http.request.headers = { A: [rawJSON.rawJSON('12345678901234567')] };
      }),
      httpJson((d) => {
        d.object.http.request.body_length = '12a';
        d.object.http.response.body_length = true;
        d.object.compression.bytes_saved = '-0';
        d.object.conn.server_port = '99999999999999999999';
        d.object.http.response.status_code = -1e-7;
      }),
      // Every kind given a value of another type, or null.
      httpJson((d) => {
        d.event_id = 12;
        d.account_id = { id: 'ac' };
        d.object.conn.client_ip = ['10.0.0.1'];
        d.object.conn.server_ip = true;
        d.object.conn.server_name = null;
        d.object.backend.connection_reused = 'true';
        d.object.http.request.method = 1.25;
      }),
      httpJson((d) => {
        d.object.backend.connection_reused = 'yes';
        d.object.http.request.headers = 'not a map';
        d.object.http.response.headers = [['a'], 1, null, { x: 2 }];
        d.object.traffic_policy.logs = { action: 'log', n: [1, 2.5, -3e-9, true, null] };
      }),
      httpJson((d) => {
        d.object.backend.connection_reused = 1;
        d.object.http.request.headers = 17;
        d.object.http.response.headers = null;
        d.object.traffic_policy.logs = 'text';
      }),
      httpJson((d) => {
        d.object.backend.connection_reused = { on: true };
        d.object.traffic_policy.logs = [{ action: 'deny', when: '2026-01-01T00:00:00Z' }];
        d.object.http.request.headers = { A: [{ nested: [1, { deeper: 'x' }] }] };
      }),
      // Timestamps: no fraction, long fraction, offsets (Date.parse), numbers, garbage.
      httpJson((d) => {
        d.event_timestamp = '2026-03-04T05:06:07Z';
        d.object.conn.start_ts = '2026-03-04T05:06:07.123456789Z';
      }),
      httpJson((d) => {
        d.event_timestamp = '2026-03-04T05:06:07+02:00';
        d.object.conn.start_ts = 1_700_000_000_123;
      }),
      httpJson((d) => {
        d.event_timestamp = 'yesterday';
        d.object.conn.start_ts = { seconds: 1 };
      }),
      httpJson((d) => {
        d.event_timestamp = '2026-03-04 05:06:07';
        d.object.conn.start_ts = -1;
      }),
      // Missing and odd groups: absent, null, an array, a string, empty.
      httpJson((d) => {
        delete d.object.conn;
        d.object.http = null;
        d.object.tls = [];
        d.object.oauth = 'none';
        d.object.backend = {};
      }),
      httpJson((d) => {
        d.object = null;
      }),
      httpJson((d) => {
        d.object = [1, 2];
      }),
      httpJson((d) => {
        delete d.object;
        delete d.event_id;
      }),
      httpJson((d) => {
        d.object.http.request.url = { length: 3, constructor: 'c', host: 'h' };
      }),
      // Extra keys on the way, keys out of order.
      httpJson((d) => {
        d.extra = { conn: { client_ip: 'not this one' } };
        d.object.conn = { start_ts: d.object.conn.start_ts, zz: 1, client_ip: '10.9.9.9' };
      }),
      // Not an object at the top.
      record(HTTP, 'null'),
      record(HTTP, '[{"event_id":"ev"}]'),
      record(HTTP, '"text"'),
      record(HTTP, '42'),
      // Whitespace around everything.
      record(HTTP, JSON.stringify(httpDoc(), null, 2)),
      record(HTTP, ` ${JSON.stringify(httpDoc())}\n`),
    ];
    const full = httpDoc();
    const text = JSON.stringify(full);
    const conn = JSON.stringify(full.object.conn);
    cases.push(
      // Repeated keys: JSON.parse keeps the last value (in the first one's place).
      record(HTTP, text.replace('"event_id":', '"event_id":"first","event_id":')),
      record(
        HTTP,
        text.replace('"conn":', `"conn":{"client_ip":"1.1.1.1","server_port":1},"conn":`),
      ),
      record(HTTP, text.replace('"conn":', `"conn":${conn},"conn":{"server_port":2},"x":`)),
      record(HTTP, text.replace('"headers":{', '"headers":{"A":["1"],"B":["2"],"A":["3"],')),
      record(HTTP, text.replace('"headers":{', '"headers":{"__proto__":["x"],"toString":[],')),
      // An integer-like key after others: JSON.parse moves it first.
      record(HTTP, text.replace('"headers":{', '"headers":{"b":["1"],"10":["x"],')),
      // Raw lone surrogates (JSON.stringify would escape them) and raw surrogate pairs.
      record(
        HTTP,
        text
          .replace('"event_id":"', '"event_id":"\ud800')
          .replace('"Accept":["', '"Accept":["\udfff'),
      ),
      record(HTTP, text.replace('"event_id":"', '"event_id":"\ud83d\ude00')),
      record(
        HTTP,
        text.replace('"object":{', '"__proto__":{"object":1},"object":{"__proto__":[],'),
      ),
      record(HTTP, text.replace('"principal":null', '"principal":null,"principal":{"a":1,"a":2}')),
      // Numbers not in their shortest form, inside a map written out whole and elsewhere.
      record(HTTP, text.replace('"headers":{', '"headers":{"N":[1.0,1E2,-0,0.10],')),
      record(HTTP, text.replace(/"body_length":(\d+)/, '"body_length":$1.000')),
      record(HTTP, text.replace('"server_port":', '"server_port":1e400,"x":')),
      record(HTTP, text.replace('"principal":null', '"principal":[1.50,2e-3,{"n":-0}]')),
      // Unicode escapes that JSON.stringify would not write.
      record(HTTP, text.replace('"event_id":"', '"event_id":"\\u0041\\/')),
    );
    // Nested deeper than the scanner follows.
    const deep = `${'['.repeat(100)}1${']'.repeat(100)}`;
    cases.push(record(HTTP, text.replace('"logs":[]', `"logs":${deep}`)));
    cases.push(record(HTTP, text.replace('"principal":null', `"principal":${deep}`)));
    const deeper = `${'{"a":['.repeat(20_000)}${']}'.repeat(20_000)}`;
    cases.push(record(HTTP, text.replace('"principal":null', `"principal":${deeper}`)));
    cases.push(
      record(HTTP, text.replace('"principal":null', `"principal":[9007199254740993,${deeper}]`)),
    );
    for (const one of cases) expectSameRows([one]);
    expectSameRows(cases);
  });

  it('gives the reference rows for arbitrary values at every column path', () => {
    const base = httpDoc();
    const paths = tableForEventType(HTTP)!.columns.map((c) => c.path);
    const value = fc.oneof(
      fc.jsonValue(),
      fc.string({ unit: 'grapheme' }),
      fc.string({ unit: 'binary' }),
      fc.constantFrom('2026-03-04T05:06:07.1Z', '123', '-9223372036854775808', 'true', ''),
      fc.double(),
      fc.integer(),
      fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map((n) => rawJSON.rawJSON(String(n))),
      fc.dictionary(fc.string(), fc.array(fc.string())),
    );
    const edit = fc.array(
      fc.record({
        path: fc.constantFrom(...paths),
        depth: fc.nat(),
        value: fc.option(value, { nil: undefined }),
      }),
      { maxLength: 6 },
    );
    fc.assert(
      fc.property(
        edit,
        fc.constantFrom(undefined, 1, '\t'),
        fc.boolean(),
        (edits, space, twice) => {
          const doc = structuredClone(base);
          for (const { path, depth, value } of edits) {
            // Replace the value at the path, or at one of the objects on the way (undefined: delete).
            const cut = path.slice(0, path.length - (depth % path.length));
            let parent: any = doc;
            for (const key of cut.slice(0, -1)) {
              const at = parent[key];
              if (at === null || typeof at !== 'object' || rawJSON.isRawJSON(at)) parent[key] = {};
              parent = parent[key];
            }
            if (value === undefined) delete parent[cut[cut.length - 1]];
            else parent[cut[cut.length - 1]] = value;
          }
          const json = JSON.stringify(doc, null, space);
          const records = [record(HTTP, json), ...workerRecords(3, 9, {})];
          expectSameRows(twice ? [...records, ...records] : records);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('gives the reference rows on column sets the scanner does not serve', () => {
    const col = (name: string, path: string[], kind: ColumnSpec['kind']): ColumnSpec => ({
      name,
      path,
      kind,
    });
    const odd: TableTarget = {
      table: 'odd',
      columns: [
        col('event_id', ['event_id'], 'string'),
        col('with-dash', ['object', 'conn', 'client_ip'], 'string'),
        col('len', ['object', 'http', 'request', 'url', 'length'], 'int32'),
        col('ctor', ['object', 'constructor'], 'string'),
        col('whole', [], 'json'),
        col('list', ['object', 'http', 'request', 'headers', 'Accept'], 'string_list'),
      ],
    };
    const lists: TableTarget = {
      table: 'lists',
      columns: [
        col('event_id', ['event_id'], 'string'),
        col('accept', ['object', 'http', 'request', 'headers', 'Accept'], 'string_list'),
        col('ua', ['object', 'http', 'request', 'user_agent'], 'string_list'),
        col('same', ['object', 'conn', 'server_port'], 'int32'),
        col('same_again', ['object', 'conn', 'server_port'], 'int64'),
      ],
    };
    const records = [
      ...workerRecords(30, 2, {}),
      httpJson((d) => {
        d.object.http.request.headers.Accept = ['a', 1, null, { x: 1 }, [2, 3]];
        d.object.http.request.url = ['u'];
      }),
      httpJson((d) => {
        d.object.http.request.headers = { Accept: 'text/html' };
      }),
    ];
    for (const target of [odd, lists]) expectSameRows(records, () => target);
    // A lookup that makes new (equal) column arrays on every call.
    const fresh: TableFor = (type) => {
      const target = tableForEventType(type);
      return target && { table: target.table, columns: target.columns.map((c) => ({ ...c })) };
    };
    expectSameRows(records, fresh);
  });

  it('throws what the reference throws on bad JSON; an unknown event type before anything', () => {
    const good = workerRecords(4, 1, {});
    const bad = [
      '',
      '{',
      '{"event_id":"ev"',
      '{"event_id":"ev",}',
      '{"event_id":"ev"} x',
      `${good[0].json.slice(0, -1)},}`,
      good[0].json.replace('"event_id":"', '"event_id":"\u0001'),
      good[0].json.replace('"event_id":"', '"event_id":"\\x'),
      good[0].json.replace('"principal":null', '"principal":nul'),
      good[0].json.replace('"principal":null', '"principal":01'),
      good[0].json.replace('"principal":null', '"principal":[1,]'),
      good[0].json.replace('"principal":null', "'principal':null"),
      good[0].json.replace(/\}$/, ']'),
      good[0].json.replace('"headers":{', '"headers":{"a":["x"],,'),
      good[0].json.replace('"logs":[]', '"logs":[-]'),
      good[0].json.replace('"logs":[]', '"logs":[1.e3]'),
      // After the same layout was read whole: trailing text.
      `${good[0].json}}`,
      `${good[0].json}x`,
      `${good[0].json}{}`,
    ];
    for (const profile of PROFILES) {
      for (const json of bad) {
        const batch = batchOf([...good, record(HTTP, json)]);
        let want: unknown;
        try {
          refEncodeRows(batch, tableForEventType, profile);
        } catch (err) {
          want = err;
        }
        expect(want, json).toBeInstanceOf(SyntaxError);
        for (const encode of [encodeRows]) {
          expect(() => encode(batch, tableForEventType, profile)).toThrow((want as Error).message);
          expect(() => encode(batch, tableForEventType, profile)).toThrow(SyntaxError);
        }
      }
      // The table of every record is looked up before any is encoded.
      const unknown = batchOf([...good, record(HTTP, '{'), record('nope.v0', 'not json')]);
      for (const encode of [encodeRows]) {
        let got: unknown;
        try {
          encode(unknown, tableForEventType, profile);
        } catch (err) {
          got = err;
        }
        expect(got).toBeInstanceOf(SinkError);
        expect(got).toMatchObject({
          message: 'clickhouse: no table for event type nope.v0',
          retriable: false,
        });
      }
    }
  });
});
