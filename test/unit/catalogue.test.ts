import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  AUDIT_EVENT_TYPES,
  auditColumns,
  clickhouseColumns,
  EVENT_TYPES,
  type FieldKind,
  filterableFields,
  groupNames,
  isKnownEventType,
  isTrafficType,
  TRAFFIC_EVENT_TYPES,
  trafficFields,
} from '../../src/catalogue/index.ts';
import { timestampToJson, trafficToJson } from '../../src/data-plane/wire-json/to-json.ts';
import {
  HttpRequestCompleteSchema,
  TcpConnectionClosedSchema,
} from '../../src/gen/agent_ingress/events/v0/traffic_pb.ts';

// The independent oracle: SPEC.md's two traffic field tables, copied by hand (name, type as SPEC
// spells it, Filterable). The catalogue derives the same list from the proto descriptors.
const SPEC_HTTP = `
backend.connection_reused bool
basic_auth.decision string
basic_auth.username string
circuit_breaker.decision string
compression.algorithm string
compression.bytes_saved int64
conn.client_ip string F
conn.server_ip string F
conn.server_name string F
conn.server_port int32 F
conn.start_ts timestamp
http.request.body_length int64
http.request.headers Map<string,List<string>>
http.request.method string
http.request.url.host string
http.request.url.path string
http.request.url.query string
http.request.url.raw string
http.request.url.scheme string
http.request.user_agent string
http.response.body_length int64
http.response.headers Map<string,List<string>>
http.response.status_code int32
ip_policy.decision string
oauth.app_client_id string
oauth.decision string
oauth.user.id string
oauth.user.name string
tls.cipher_suite string
tls.client_cert.serial_number string
tls.client_cert.subject.cn string
tls.version string
traffic_policy.logs List<Map<string,any>>
webhook_verification.decision string`;

const SPEC_TCP = `
conn.bytes_in int64
conn.bytes_out int64
conn.client_ip string F
conn.end_ts timestamp
conn.server_ip string F
conn.server_name string F
conn.server_port int32 F
conn.start_ts timestamp
ip_policy.decision string
traffic_policy.logs List<Map<string,any>>`;

const specKinds: Record<string, FieldKind> = {
  bool: 'bool',
  string: 'string',
  int64: 'int64',
  int32: 'int32',
  timestamp: 'timestamp',
  'Map<string,List<string>>': 'string_list_map',
  'List<Map<string,any>>': 'json',
};

function specTable(table: string) {
  return table
    .trim()
    .split('\n')
    .map((line) => {
      const [name, type, flag] = line.split(' ');
      return { name, kind: specKinds[type], filterable: flag === 'F' };
    });
}

const SPEC = {
  'http_request_complete.v0': specTable(SPEC_HTTP),
  'tcp_connection_closed.v0': specTable(SPEC_TCP),
} as const;

describe('event types', () => {
  it('lists the two traffic kinds and every audit kind of SPEC plus agent_ingress and endpoint', () => {
    expect(TRAFFIC_EVENT_TYPES).toEqual(['http_request_complete.v0', 'tcp_connection_closed.v0']);
    // 17 audit resources: SPEC's 15, agent_ingress and endpoint (docs/traffic-policy.md).
    expect(AUDIT_EVENT_TYPES).toHaveLength(17 * 3 + 2);
    for (const t of [
      'api_key_created.v0',
      'ssh_user_certificate_deleted.v0',
      'tunnel_credential_updated.v0',
      'agent_session_start.v0',
      'agent_session_stop.v0',
      'agent_ingress_created.v0',
      'agent_ingress_updated.v0',
      'agent_ingress_deleted.v0',
      'endpoint_created.v0',
      'endpoint_deleted.v0',
    ]) {
      expect(isKnownEventType(t)).toBe(true);
      expect(isTrafficType(t)).toBe(false);
    }
    expect(EVENT_TYPES).toHaveLength(55);
    expect(new Set(EVENT_TYPES).size).toBe(EVENT_TYPES.length);
  });

  it('tells traffic kinds from unknown names', () => {
    expect(isTrafficType('http_request_complete.v0')).toBe(true);
    expect(isKnownEventType('tcp_connection_closed.v0')).toBe(true);
    expect(isKnownEventType('http_request_complete')).toBe(false);
    expect(isKnownEventType('toString')).toBe(false);
    expect(isTrafficType('constructor')).toBe(false);
  });
});

describe.each(TRAFFIC_EVENT_TYPES)('catalogue of %s', (type) => {
  it('has exactly SPEC’s fields, with SPEC’s kinds and Filterable marks', () => {
    const derived = trafficFields(type).map(({ name, kind, filterable }) => ({
      name,
      kind,
      filterable,
    }));
    expect(derived).toEqual(SPEC[type]);
    for (const f of trafficFields(type)) expect(f.path).toEqual(f.name.split('.'));
  });

  it('marks exactly the four conn fields filterable', () => {
    expect(filterableFields(type).map((f) => f.name)).toEqual([
      'conn.client_ip',
      'conn.server_ip',
      'conn.server_name',
      'conn.server_port',
    ]);
  });

  it('derives one ClickHouse column per field after the envelope', () => {
    const cols = clickhouseColumns(type);
    expect(cols.slice(0, 4)).toEqual([
      { name: 'event_id', path: ['event_id'], kind: 'string' },
      { name: 'event_type', path: ['event_type'], kind: 'string' },
      { name: 'event_timestamp', path: ['event_timestamp'], kind: 'timestamp' },
      { name: 'account_id', path: ['account_id'], kind: 'string' },
    ]);
    expect(cols).toHaveLength(4 + SPEC[type].length);
    expect(cols).toContainEqual({
      name: 'conn_server_port',
      path: ['object', 'conn', 'server_port'],
      kind: 'int32',
    });
  });
});

describe('groups and columns', () => {
  it('names every group as a dotted path', () => {
    expect(groupNames('tcp_connection_closed.v0')).toEqual(['conn', 'ip_policy', 'traffic_policy']);
    expect(groupNames('http_request_complete.v0')).toEqual(
      expect.arrayContaining([
        'http',
        'http.request',
        'http.request.url',
        'tls.client_cert.subject',
      ]),
    );
  });

  it('has one audit table keeping the object as JSON', () => {
    expect(auditColumns().map((c) => [c.name, c.path.join('.'), c.kind])).toEqual([
      ['event_id', 'event_id', 'string'],
      ['event_type', 'event_type', 'string'],
      ['event_timestamp', 'event_timestamp', 'timestamp'],
      ['account_id', 'account_id', 'string'],
      ['principal_id', 'principal.id', 'string'],
      ['object_id', 'object.id', 'string'],
      ['object', 'object', 'json'],
    ]);
  });
});

describe('to-json', () => {
  it('converts a fully populated http_request_complete after a binary round trip', () => {
    const message = create(HttpRequestCompleteSchema, {
      backend: { connectionReused: true },
      basicAuth: { decision: 'allow', username: 'alice' },
      circuitBreaker: { decision: 'allow_while_open' },
      compression: { algorithm: 'gzip', bytesSaved: 9_007_199_254_740_000n },
      conn: {
        clientIp: '203.0.113.7',
        serverIp: '192.0.2.10',
        serverName: 'api.example.com',
        serverPort: 443,
        startTs: { seconds: 1_700_000_000n, nanos: 123_000_000 },
      },
      http: {
        request: {
          bodyLength: 12n,
          headers: { Accept: { values: ['*/*'] }, 'X-Multi': { values: ['a', 'b'] } },
          method: 'post',
          url: {
            host: 'api.example.com',
            path: '/v1/items',
            query: 'q=1',
            raw: 'https://api.example.com/v1/items?q=1',
            scheme: 'https',
          },
          userAgent: 'curl/8.5',
        },
        response: {
          bodyLength: 3456n,
          headers: { 'Content-Type': { values: ['application/json'] } },
          statusCode: 201,
        },
      },
      ipPolicy: { decision: 'invalid' },
      oauth: { appClientId: 'app_1', decision: 'block', user: { id: 'u1', name: 'Alice' } },
      tls: {
        cipherSuite: 'TLS_AES_128_GCM_SHA256',
        clientCert: { serialNumber: '0a:1b', subject: { cn: 'client.example.com' } },
        version: 'TLS 1.3',
      },
      trafficPolicy: { logs: [{ action: 'log', nested: { n: 1, ok: true, list: ['x'] } }] },
      webhookVerification: { decision: 'allow' },
    });
    const decoded = fromBinary(
      HttpRequestCompleteSchema,
      toBinary(HttpRequestCompleteSchema, message),
    );
    const json = trafficToJson('http_request_complete.v0')(decoded);

    expect(json).toEqual({
      backend: { connection_reused: true },
      basic_auth: { decision: 'allow', username: 'alice' },
      circuit_breaker: { decision: 'allow_while_open' },
      compression: { algorithm: 'gzip', bytes_saved: 9_007_199_254_740_000 },
      conn: {
        client_ip: '203.0.113.7',
        server_ip: '192.0.2.10',
        server_name: 'api.example.com',
        server_port: 443,
        start_ts: '2023-11-14T22:13:20.123Z',
      },
      http: {
        request: {
          body_length: 12,
          headers: { Accept: ['*/*'], 'X-Multi': ['a', 'b'] },
          method: 'post',
          url: {
            host: 'api.example.com',
            path: '/v1/items',
            query: 'q=1',
            raw: 'https://api.example.com/v1/items?q=1',
            scheme: 'https',
          },
          user_agent: 'curl/8.5',
        },
        response: {
          body_length: 3456,
          headers: { 'Content-Type': ['application/json'] },
          status_code: 201,
        },
      },
      ip_policy: { decision: 'invalid' },
      oauth: { app_client_id: 'app_1', decision: 'block', user: { id: 'u1', name: 'Alice' } },
      tls: {
        cipher_suite: 'TLS_AES_128_GCM_SHA256',
        client_cert: { serial_number: '0a:1b', subject: { cn: 'client.example.com' } },
        version: 'TLS 1.3',
      },
      traffic_policy: { logs: [{ action: 'log', nested: { n: 1, ok: true, list: ['x'] } }] },
      webhook_verification: { decision: 'allow' },
    });
    // Plain JSON: survives stringify/parse unchanged (no bigint, no Date, no class instances).
    expect(JSON.parse(JSON.stringify(json))).toEqual(json);
  });

  it('emits every field of an empty event, timestamps as null', () => {
    const json = trafficToJson('tcp_connection_closed.v0')(create(TcpConnectionClosedSchema));
    expect(json).toEqual({
      conn: {
        bytes_in: 0,
        bytes_out: 0,
        client_ip: '',
        end_ts: null,
        server_ip: '',
        server_name: '',
        server_port: 0,
        start_ts: null,
      },
      ip_policy: { decision: '' },
      traffic_policy: { logs: [] },
    });
    const again = trafficToJson('tcp_connection_closed.v0')(undefined);
    expect(again).toEqual(json);
    expect((again.traffic_policy as { logs: unknown[] }).logs).not.toBe(
      (json.traffic_policy as { logs: unknown[] }).logs,
    );
  });

  it('has a leaf for every catalogue field, at the field’s path', () => {
    for (const type of TRAFFIC_EVENT_TYPES) {
      const json = trafficToJson(type)(undefined);
      for (const f of trafficFields(type)) {
        const value = f.path.reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], json);
        expect(value, f.name).not.toBeUndefined();
      }
    }
  });

  it('formats timestamps as RFC 3339 with the precision they carry', () => {
    expect(timestampToJson({ seconds: 0n, nanos: 0 })).toBe('1970-01-01T00:00:00Z');
    expect(timestampToJson({ seconds: 1_700_000_000n, nanos: 5_000_000 })).toBe(
      '2023-11-14T22:13:20.005Z',
    );
    expect(timestampToJson({ seconds: 1_700_000_000n, nanos: 123_456_000 })).toBe(
      '2023-11-14T22:13:20.123456Z',
    );
    expect(timestampToJson({ seconds: -1n, nanos: 1 })).toBe('1969-12-31T23:59:59.000000001Z');
    expect(timestampToJson({ seconds: 951_782_400n, nanos: 0 })).toBe('2000-02-29T00:00:00Z');
    expect(timestampToJson({ seconds: 253_402_300_800n, nanos: 0 })).toBeNull();
    expect(timestampToJson({ seconds: 0n, nanos: -1 })).toBeNull();
  });

  it('agrees with Date#toISOString on every second of RFC 3339 years, in any order', () => {
    fc.assert(
      fc.property(fc.integer({ min: -62135596800, max: 253402300799 }), (seconds) => {
        const iso = new Date(seconds * 1000).toISOString().replace('.000Z', 'Z');
        const formatted = timestampToJson({ seconds: BigInt(seconds), nanos: 0 });
        // Years 0001-9999 print as four digits in both (toISOString only widens beyond 9999).
        expect(formatted).toBe(iso);
      }),
      { numRuns: 2000 },
    );
  });
});
