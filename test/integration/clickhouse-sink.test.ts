import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ColumnSpec } from '../../src/catalogue/types.ts';
import { createDestination } from '../../src/data-plane/pipeline/destination.ts';
import { openSpool } from '../../src/data-plane/pipeline/spool.ts';
import { parseClickHouseSinkConfig } from '../../src/data-plane/sinks/clickhouse/config.ts';
import type { TableFor } from '../../src/data-plane/sinks/clickhouse/encode.ts';
import { encodeRowBinary } from '../../src/data-plane/sinks/clickhouse/encode.ts';
import {
  columnType,
  createTableSql,
  serverProfile,
} from '../../src/data-plane/sinks/clickhouse/schema.ts';
import {
  clickHouseSinkError,
  createClickHouseSink,
} from '../../src/data-plane/sinks/clickhouse/sink.ts';
import { type EventRecord, RecordBlock } from '../../src/data-plane/sinks/record-block.ts';
import type { Batch } from '../../src/data-plane/sinks/types.ts';
import { type ClickHouseServer, startClickHouse } from '../helpers/clickhouse.ts';

const logger = pino({ level: 'silent' });

const col = (name: string, path: string[], kind: ColumnSpec['kind']): ColumnSpec => ({
  name,
  path,
  kind,
});

const ENVELOPE: ColumnSpec[] = [
  col('event_id', ['event_id'], 'string'),
  col('event_type', ['event_type'], 'string'),
  col('event_timestamp', ['event_timestamp'], 'timestamp'),
  col('account_id', ['account_id'], 'string'),
];

const HTTP_COLUMNS: ColumnSpec[] = [
  ...ENVELOPE,
  col('conn_server_name', ['object', 'conn', 'server_name'], 'string'),
  col('conn_server_port', ['object', 'conn', 'server_port'], 'int32'),
  col('backend_connection_reused', ['object', 'backend', 'connection_reused'], 'bool'),
  col('http_response_body_length', ['object', 'http', 'response', 'body_length'], 'int64'),
  col('http_request_headers', ['object', 'http', 'request', 'headers'], 'string_list_map'),
  col('ip_policy_decision', ['object', 'ip_policy', 'decision'], 'string'),
  col('traffic_policy_logs', ['object', 'traffic_policy', 'logs'], 'json'),
];

const AUDIT_COLUMNS: ColumnSpec[] = [
  ...ENVELOPE,
  col('object_id', ['object', 'id'], 'string'),
  col('object_destinations_id', ['object', 'destinations', 'id'], 'string_list'),
];

const tableFor: TableFor = (type) => {
  if (type === 'http_request_complete.v0')
    return { table: 'http_request_complete_v0', columns: HTTP_COLUMNS };
  if (type === 'api_key_created.v0') return { table: 'api_key_created_v0', columns: AUDIT_COLUMNS };
  return undefined;
};

function httpRecord(i: number): EventRecord {
  const doc = {
    event_id: `ev_${i}`,
    event_type: 'http_request_complete.v0',
    event_timestamp: `2026-03-04T05:06:07.${String(i % 1000).padStart(3, '0')}456Z`,
    account_id: 'ac_1',
    principal: null,
    object: {
      conn: { server_name: `host-${i % 3}.example.com`, server_port: 443 },
      backend: { connection_reused: i % 2 === 0 },
      http: {
        request: { headers: { Accept: ['text/html', 'application/json'] } },
        response: { body_length: i === 1 ? '9007199254740993' : String(i * 100) },
      },
      ip_policy: { decision: 'allow' },
      traffic_policy: { logs: [{ action: 'log', n: i }] },
    },
  };
  return {
    eventId: doc.event_id,
    eventType: doc.event_type,
    accountId: doc.account_id,
    partitionKey: doc.object.conn.server_name,
    json: JSON.stringify(doc),
  };
}

function auditRecord(i: number): EventRecord {
  const doc = {
    event_id: `ev_a${i}`,
    event_type: 'api_key_created.v0',
    event_timestamp: '2026-03-04T05:06:07Z',
    account_id: 'ac_1',
    principal: { id: 'ak_1', uri: '/api_keys/ak_1' },
    object: { id: `ak_${i}`, destinations: { id: ['ed_1', 'ed_2'] } },
  };
  return {
    eventId: doc.event_id,
    eventType: doc.event_type,
    accountId: doc.account_id,
    partitionKey: 'audit',
    json: JSON.stringify(doc),
  };
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

async function until(check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('clickhouse DDL for a modern server', () => {
  it('uses LowCardinality, DateTime64 and Map, and sorts audit tables by object', () => {
    const profile = serverProfile('24.8.4.13');
    expect(profile.modern).toBe(true);
    const ddl = createTableSql({ database: 'ev', table: 'http', columns: HTTP_COLUMNS, profile });
    expect(ddl).toContain("`event_timestamp` DateTime64(3, 'UTC')");
    expect(ddl).toContain('`event_type` LowCardinality(String)');
    expect(ddl).toContain('`ip_policy_decision` LowCardinality(String)');
    expect(ddl).toContain('`conn_server_name` String');
    expect(ddl).toContain('`http_request_headers` Map(String, Array(String))');
    expect(ddl).toContain('`traffic_policy_logs` String');
    expect(ddl).toContain('PARTITION BY toYYYYMMDD(event_timestamp)');
    expect(ddl).toContain('ORDER BY (`account_id`, `event_timestamp`)');
    const audit = createTableSql({ database: 'ev', table: 'a', columns: AUDIT_COLUMNS, profile });
    expect(audit).toContain('ORDER BY (`account_id`, `object_id`, `event_timestamp`)');
  });

  it('encodes timestamps with milliseconds and maps as Map rows for a modern server', () => {
    const profile = serverProfile('23.3.1');
    const types = HTTP_COLUMNS.map((c) => columnType(c, profile));
    const bytes = Buffer.from(
      encodeRowBinary({ columns: HTTP_COLUMNS, types, jsons: [httpRecord(7).json] }, profile),
    );
    const str = (s: string) => Buffer.concat([Buffer.from([s.length]), Buffer.from(s)]);
    const i64 = (n: bigint) => {
      const b = Buffer.alloc(8);
      b.writeBigInt64LE(n);
      return b;
    };
    const i32 = (n: number) => {
      const b = Buffer.alloc(4);
      b.writeInt32LE(n);
      return b;
    };
    const want = Buffer.concat([
      str('ev_7'),
      str('http_request_complete.v0'),
      i64(BigInt(Date.UTC(2026, 2, 4, 5, 6, 7, 7))), // DateTime64(3): the fraction cut to ms
      str('ac_1'),
      str('host-1.example.com'),
      i32(443),
      Buffer.from([0]), // connection_reused: false
      i64(700n),
      Buffer.from([1]), // one header, two values
      str('Accept'),
      Buffer.from([2]),
      str('text/html'),
      str('application/json'),
      str('allow'),
      str('[{"action":"log","n":7}]'),
    ]);
    expect(bytes.toString('hex')).toBe(want.toString('hex'));
  });

  it('classifies server and network errors', () => {
    const e = (m: string, extra: object = {}) => Object.assign(new Error(m), extra);
    expect(
      clickHouseSinkError(e('connect ECONNREFUSED 127.0.0.1:1', { code: 'ECONNREFUSED' }))
        .retriable,
    ).toBe(true);
    expect(clickHouseSinkError(e('Timeout error.')).retriable).toBe(true);
    expect(
      clickHouseSinkError(
        e('Code: 516. DB::Exception: x: Authentication failed. (AUTHENTICATION_FAILED)'),
      ).retriable,
    ).toBe(false);
    expect(
      clickHouseSinkError(e('Code: 241. DB::Exception: Memory limit (MEMORY_LIMIT_EXCEEDED)'))
        .retriable,
    ).toBe(true);
    expect(
      clickHouseSinkError(
        e('Code: 53, e.displayText() = DB::Exception: Type mismatch, e.what() = DB::Exception'),
      ).retriable,
    ).toBe(false);
  });
});

describe('clickhouse sink against a real server', () => {
  let ch: ClickHouseServer;
  beforeAll(async () => {
    ch = await startClickHouse();
  });
  afterAll(async () => {
    await ch?.close();
  });

  it('creates database and tables for the server version and lands rows with the right types', async () => {
    expect(ch.version.startsWith('18.')).toBe(true);
    const config = parseClickHouseSinkConfig({
      url: ch.url,
      database: 'events',
      table_prefix: 't_',
    });
    const sink = createClickHouseSink({ config, tableFor, logger });
    await sink.write(toBatch([httpRecord(1), httpRecord(2), auditRecord(1)]));
    await sink.close();

    const types = await rows(
      ch,
      "SELECT table, name, type FROM system.columns WHERE database = 'events' ORDER BY table, name",
    );
    const typeOf = (t: string, n: string) => types.find((r) => r.table === t && r.name === n)?.type;
    const http = 't_http_request_complete_v0';
    expect(typeOf(http, 'event_timestamp')).toBe("DateTime('UTC')");
    expect(typeOf(http, 'event_type')).toBe('String');
    expect(typeOf(http, 'http_response_body_length')).toBe('Int64');
    expect(typeOf(http, 'conn_server_port')).toBe('Int32');
    expect(typeOf(http, 'backend_connection_reused')).toBe('UInt8');
    expect(typeOf(http, 'http_request_headers')).toBe('String');
    expect(typeOf('t_api_key_created_v0', 'object_destinations_id')).toBe('Array(String)');

    const got = await rows(ch, `SELECT * FROM events.${http} ORDER BY event_id`);
    expect(got).toHaveLength(2);
    expect(got[0]).toMatchObject({
      event_id: 'ev_1',
      event_timestamp: '2026-03-04 05:06:07',
      http_response_body_length: '9007199254740993',
      backend_connection_reused: 0,
      conn_server_port: 443,
      ip_policy_decision: 'allow',
    });
    expect(JSON.parse(got[0].http_request_headers as string)).toEqual({
      Accept: ['text/html', 'application/json'],
    });
    expect(JSON.parse(got[1].traffic_policy_logs as string)).toEqual([{ action: 'log', n: 2 }]);
    const audit = await rows(
      ch,
      'SELECT object_id, object_destinations_id FROM events.t_api_key_created_v0',
    );
    expect(audit).toEqual([{ object_id: 'ak_1', object_destinations_id: ['ed_1', 'ed_2'] }]);
  });

  it('adds columns the catalogue gained to an existing table', async () => {
    await ch.query('CREATE DATABASE IF NOT EXISTS grow');
    await ch.query(
      "CREATE TABLE grow.api_key_created_v0 (event_id String, account_id String, event_timestamp DateTime('UTC')) ENGINE = MergeTree() PARTITION BY toYYYYMMDD(event_timestamp) ORDER BY (account_id, event_timestamp)",
    );
    const config = parseClickHouseSinkConfig({ url: ch.url, database: 'grow' });
    const sink = createClickHouseSink({ config, tableFor, logger });
    await sink.write(toBatch([auditRecord(5)]));
    await sink.close();
    expect(await rows(ch, 'SELECT event_id, object_id FROM grow.api_key_created_v0')).toEqual([
      { event_id: 'ev_a5', object_id: 'ak_5' },
    ]);
  });

  it('parks on bad credentials instead of retrying fast, keeping the events spooled', async () => {
    const config = parseClickHouseSinkConfig({ url: ch.url, user: 'tester', password: 'wrong' });
    const sink = createClickHouseSink({ config, tableFor, logger });
    const direct = await sink.write(toBatch([httpRecord(1)])).catch((e) => e);
    expect(direct).toMatchObject({ name: 'SinkError', retriable: false });
    expect(direct.message).toMatch(/code 193.*Wrong password/);

    const dir = await mkdtemp(join(tmpdir(), 'ch-park-'));
    const spool = await openSpool({ dir, maxBytes: 1 << 20 });
    const dest = createDestination({
      id: 'ed_ch_bad',
      sink,
      spool,
      batcher: { maxEvents: 10, maxBytes: 1 << 20, lingerMs: 5 },
      logger,
      retry: { baseMs: 10, maxMs: 100 },
      parkRetryMs: 60_000,
    });
    await dest.deliver(RecordBlock.of([httpRecord(1), httpRecord(2)]));
    await until(() => dest.health().status === 'parked');
    const h = dest.health();
    expect(h.last_error).toMatch(/Wrong password/);
    expect(h.backlog.events).toBe(2);
    await dest.close();
    await rm(dir, { recursive: true, force: true });
  });
});
