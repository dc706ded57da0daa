import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create, toBinary } from '@bufbuild/protobuf';
import { type ClickHouseClient, createClient } from '@clickhouse/client';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ColumnSpec } from '../../src/catalogue/types.ts';
import { createDestination } from '../../src/data-plane/pipeline/destination.ts';
import { routeRequest } from '../../src/data-plane/pipeline/route-events.ts';
import { compileRouting } from '../../src/data-plane/pipeline/routing.ts';
import { openSpool } from '../../src/data-plane/pipeline/spool.ts';
import { parseClickHouseSinkConfig } from '../../src/data-plane/sinks/clickhouse/config.ts';
import type { TableFor } from '../../src/data-plane/sinks/clickhouse/encode.ts';
import { serverProfile } from '../../src/data-plane/sinks/clickhouse/schema.ts';
import { createClickHouseSink } from '../../src/data-plane/sinks/clickhouse/sink.ts';
import { tableForEventType } from '../../src/data-plane/sinks/clickhouse/tables.ts';
import { type EventRecord, RecordBlock } from '../../src/data-plane/sinks/record-block.ts';
import type { Batch } from '../../src/data-plane/sinks/types.ts';
import { PublishRequestSchema } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { recordsOf } from '../helpers/blocks.ts';
import { type ClickHouseServer, startClickHouse } from '../helpers/clickhouse.ts';
import { jsonEachRowRows } from '../helpers/clickhouse-json-rows.ts';
import { generateEvents } from '../helpers/events.ts';

// The same events through the sink's RowBinary insert and through the JSONEachRow insert it made
// before (the reference rows, @clickhouse/client's own insert), into twin tables of a real
// ClickHouse (18.16, the tests' server); every column read back must be the same.

const logger = pino({ level: 'silent' });
const HTTP = 'http_request_complete.v0';
const TCP = 'tcp_connection_closed.v0';
const AUDIT = 'api_key_created.v0';
const LISTS = 'string_lists.v0';

const col = (name: string, path: string[], kind: ColumnSpec['kind']): ColumnSpec => ({
  name,
  path,
  kind,
});

// No catalogue table has an Array(String) column today: one of its own covers the type.
const LISTS_TABLE = {
  table: 'string_lists_v0',
  columns: [
    col('event_id', ['event_id'], 'string'),
    col('event_timestamp', ['event_timestamp'], 'timestamp'),
    col('account_id', ['account_id'], 'string'),
    col('names', ['object', 'names'], 'string_list'),
    col('flag', ['object', 'flag'], 'bool'),
    col('count', ['object', 'count'], 'int32'),
  ],
};

const tableFor: TableFor = (type) => (type === LISTS ? LISTS_TABLE : tableForEventType(type));

function record(eventType: string, json: string): EventRecord {
  const { event_id: eventId, account_id: accountId } = JSON.parse(json);
  return { eventId, eventType, accountId, partitionKey: 'k', json };
}

/** Envelopes exactly as the route-events worker makes them, full or projected. */
function workerRecords(count: number, seed: number, httpFields: string[] = []): EventRecord[] {
  const routing = compileRouting({
    version: 1,
    subscriptions: [
      {
        id: 'sub_1',
        accountId: 'ac_rb',
        sources: [
          { type: HTTP, filter: '', fields: httpFields },
          { type: TCP, filter: '', fields: [] },
        ],
        destinationIds: ['ed_1'],
      },
    ],
  });
  const events = generateEvents(count, { accounts: ['ac_rb'], seed });
  const bytes = toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }));
  const result = routeRequest(routing, bytes, Date.UTC(2026, 10, 22));
  if (result.kind !== 'routed') throw new Error(JSON.stringify(result));
  return result.deliveries.flatMap(recordsOf);
}

const raw = (digits: string) =>
  (JSON as unknown as { rawJSON(t: string): unknown }).rawJSON(digits);

/** A full worker http envelope, edited: each edge case its own event id. */
function httpCase(id: string, edit: (doc: Record<string, any>) => void): EventRecord {
  const doc = JSON.parse(workerRecords(10, 5).find((r) => r.eventType === HTTP)!.json);
  doc.event_id = id;
  edit(doc);
  return record(HTTP, JSON.stringify(doc));
}

function edgeCases(): EventRecord[] {
  return [
    httpCase('ev_empty', (d) => {
      d.object.conn.server_name = '';
      d.object.http.request.user_agent = '';
      d.object.http.request.headers = {};
      d.object.http.response.headers = { 'X-Empty': [], 'X-Blank': [''] };
    }),
    httpCase('ev_unicode', (d) => {
      d.object.conn.server_name = 'é à 中文 ✓ 😀';
      d.object.http.request.url.path = '/naïve/ünïcödé/\u2028';
      d.object.http.request.headers = { É: ['ü', '中文'], Smile: ['😀', 'a'] };
    }),
    // Escapes: such an envelope takes the reference path.
    httpCase('ev_escapes', (d) => {
      d.object.http.request.user_agent = 'quote " backslash \\ tab \t nl \n ctl \u0001';
      d.object.http.request.headers = { 'X-Q': ['a"b', 'c\\d'] };
    }),
    httpCase('ev_absent', (d) => {
      delete d.object.conn;
      d.object.tls = null;
      d.object.http.response = {};
      d.principal = null;
    }),
    httpCase('ev_bigints', (d) => {
      d.object.http.request.body_length = raw('9223372036854775807');
      d.object.http.response.body_length = raw('-9223372036854775808');
      d.object.compression.bytes_saved = raw('9007199254740993');
      d.object.conn.server_port = 65535;
    }),
    httpCase('ev_strings_for_ints', (d) => {
      d.object.http.request.body_length = '9007199254740995';
      d.object.http.response.body_length = '-12';
      d.object.backend.connection_reused = true;
    }),
    httpCase('ev_subms', (d) => {
      d.event_timestamp = '2026-03-04T05:06:07.123456789Z';
      d.object.conn.start_ts = '2026-03-04T05:06:07Z';
      d.object.conn.end_ts = '2026-03-04T05:06:07.5Z';
    }),
    httpCase('ev_offset_time', (d) => {
      d.event_timestamp = '2026-03-04T05:06:07.999+02:00';
    }),
    record(
      AUDIT,
      JSON.stringify({
        event_id: 'ev_audit',
        event_type: AUDIT,
        event_timestamp: '2026-03-04T05:06:07.001Z',
        account_id: 'ac_rb',
        principal: { id: 'ak_1', uri: '/api_keys/ak_1' },
        object: { id: 'ak_2', description: 'ci "deploy" key ✓', metadata: '', n: raw('-1') },
      }),
    ),
    ...[
      { names: ['a', '', 'é', '😀'], flag: true, count: -7 },
      { names: [], flag: false, count: 2147483647 },
      { names: ['x'], count: raw('9007199254740993') },
      {},
    ].map((object, i) =>
      record(
        LISTS,
        JSON.stringify({
          event_id: `ev_list_${i}`,
          event_type: LISTS,
          event_timestamp: '2026-03-04T05:06:07Z',
          account_id: 'ac_rb',
          object,
        }),
      ),
    ),
  ];
}

function toBatch(records: EventRecord[]): Batch {
  return RecordBlock.of(records);
}

async function rows(ch: ClickHouseServer, sql: string): Promise<Record<string, unknown>[]> {
  const text = await ch.query(`${sql} FORMAT JSONEachRow`);
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l));
}

const TABLES = ['http_request_complete_v0', 'tcp_connection_closed_v0', 'audit_events_v0'];

describe('RowBinary inserts against the JSONEachRow path', () => {
  let ch: ClickHouseServer;
  let client: ClickHouseClient;
  beforeAll(async () => {
    ch = await startClickHouse();
    client = createClient({ url: ch.url });
  });
  afterAll(async () => {
    await client?.close();
    await ch?.close();
  });

  // The JSON path: the reference rows inserted by the client into twins of the sink's tables.
  async function insertJson(database: string, from: string, batch: Batch): Promise<void> {
    await ch.query(`CREATE DATABASE IF NOT EXISTS ${database}`);
    const profile = serverProfile(ch.version);
    for (const [table, { rows }] of jsonEachRowRows(batch, tableFor, profile)) {
      const ddl = (await ch.query(`SHOW CREATE TABLE ${from}.${table} FORMAT TabSeparatedRaw`))
        .trim()
        .replace(`${from}.${table}`, `${database}.${table}`);
      await ch.query(ddl.replace('CREATE TABLE', 'CREATE TABLE IF NOT EXISTS'));
      await client.insert({ table: `${database}.${table}`, values: rows, format: 'JSONEachRow' });
    }
  }

  async function expectSameTables(a: string, b: string, expected: number): Promise<void> {
    let total = 0;
    for (const table of [...TABLES, LISTS_TABLE.table]) {
      const sql = (db: string) =>
        `SELECT * FROM ${db}.${table} ORDER BY event_id LIMIT 1 BY event_id`;
      const viaRowBinary = await rows(ch, sql(a));
      const viaJson = await rows(ch, sql(b));
      expect(viaRowBinary.length, table).toBeGreaterThan(0);
      expect(viaRowBinary, table).toEqual(viaJson);
      total += viaRowBinary.length;
    }
    expect(total).toBe(expected);
  }

  it('stores every column of every type exactly as the JSONEachRow insert did', async () => {
    const records = [
      ...workerRecords(300, 1),
      ...workerRecords(60, 2, ['conn', 'http.response.status_code']),
      ...edgeCases(),
    ];
    const batch = toBatch(records);
    const sink = createClickHouseSink({
      config: parseClickHouseSinkConfig({ url: ch.url, database: 'rb' }),
      tableFor,
      logger,
    });
    await sink.write(batch);
    await sink.close();
    await insertJson('js', 'rb', batch);
    await expectSameTables('rb', 'js', records.length);

    // And the values are the events' own (not merely equal on both sides).
    const [edge] = await rows(
      ch,
      "SELECT * FROM rb.http_request_complete_v0 WHERE event_id = 'ev_unicode'",
    );
    expect(edge.conn_server_name).toBe('é à 中文 ✓ 😀');
    expect(JSON.parse(edge.http_request_headers as string)).toEqual({
      É: ['ü', '中文'],
      Smile: ['😀', 'a'],
    });
    const [big] = await rows(
      ch,
      "SELECT http_request_body_length AS a, http_response_body_length AS b, compression_bytes_saved AS c FROM rb.http_request_complete_v0 WHERE event_id = 'ev_bigints'",
    );
    expect(big).toEqual({
      a: '9223372036854775807',
      b: '-9223372036854775808',
      c: '9007199254740993',
    });
    const [time] = await rows(
      ch,
      "SELECT toString(event_timestamp) AS t, conn_start_ts AS s FROM rb.http_request_complete_v0 WHERE event_id = 'ev_subms'",
    );
    // DateTime on 18.16 keeps seconds (DateTime64(3) on newer servers keeps milliseconds).
    expect(time).toEqual({ t: '2026-03-04 05:06:07', s: '2026-03-04 05:06:07' });
    expect(
      await rows(ch, 'SELECT names, flag, count FROM rb.string_lists_v0 ORDER BY event_id'),
    ).toEqual([
      { names: ['a', '', 'é', '😀'], flag: 1, count: -7 },
      { names: [], flag: 0, count: 2147483647 },
      { names: ['x'], flag: 0, count: 0 }, // 2^53 modulo 2^32, as 18.16 wraps the JSON number
      { names: [], flag: 0, count: 0 },
    ]);
  });

  it('replays what it spooled while the server was away into the same rows', async () => {
    const records = [...workerRecords(120, 3), ...edgeCases()];
    const sink = createClickHouseSink({
      config: parseClickHouseSinkConfig({ url: ch.url, database: 'rb_replay' }),
      tableFor,
      logger,
    });
    const dir = await mkdtemp(join(tmpdir(), 'ch-rb-replay-'));
    const spool = await openSpool({ dir, maxBytes: 64 << 20 });
    const destination = createDestination({
      id: 'ed_rb',
      sink,
      spool,
      batcher: { maxEvents: 50, maxBytes: 1 << 20, lingerMs: 5 },
      logger,
      retry: { baseMs: 20, maxMs: 200 },
      parkRetryMs: 200,
    });
    try {
      await ch.stop();
      const size = Math.ceil(records.length / 4);
      const receipts = await Promise.all(
        [0, 1, 2, 3].map((i) =>
          destination.deliver(RecordBlock.of(records.slice(i * size, (i + 1) * size))),
        ),
      );
      expect(receipts.map((r) => r.written)).toEqual([false, false, false, false]);
      await ch.start();
      const deadline = Date.now() + 60_000;
      while (destination.health().backlog.events > 0) {
        if (Date.now() > deadline) throw new Error('the spool did not drain');
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      await destination.close();
      await rm(dir, { recursive: true, force: true });
    }
    await insertJson('js_replay', 'rb_replay', toBatch(records));
    // At least once: a retried batch may land twice (read once per event id).
    await expectSameTables('rb_replay', 'js_replay', records.length);
  });

  it('sends the same rows gzip-compressed when compression.request is set', async () => {
    const records = [...workerRecords(50, 4), ...edgeCases()];
    const sink = createClickHouseSink({
      config: parseClickHouseSinkConfig({
        url: ch.url,
        database: 'rb_gzip',
        compression: { request: true },
      }),
      tableFor,
      logger,
    });
    await sink.write(toBatch(records));
    await sink.close();
    await insertJson('js_gzip', 'rb_gzip', toBatch(records));
    await expectSameTables('rb_gzip', 'js_gzip', records.length);
  });

  it('holds a time outside DateTime to its ends, where 18.16 read the JSON text as day 0', async () => {
    const records = [
      httpCase('ev_1969', (d) => {
        d.event_timestamp = '1969-12-31T23:59:59Z';
      }),
      httpCase('ev_2200', (d) => {
        d.event_timestamp = '2200-01-01T00:00:00Z';
      }),
    ];
    const sink = createClickHouseSink({
      config: parseClickHouseSinkConfig({ url: ch.url, database: 'rb_range' }),
      tableFor,
      logger,
    });
    await sink.write(toBatch(records));
    await sink.close();
    expect(
      await rows(
        ch,
        'SELECT event_id, toUnixTimestamp(event_timestamp) AS t FROM rb_range.http_request_complete_v0 ORDER BY event_id',
      ),
    ).toEqual([
      { event_id: 'ev_1969', t: 0 },
      { event_id: 'ev_2200', t: 4294967295 },
    ]);
  });
});
