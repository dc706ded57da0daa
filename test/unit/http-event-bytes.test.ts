import { fromBinary } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { httpEventBytes } from '../../src/agent-plane/edge/http-event-bytes.ts';
import {
  type CompletedRequest,
  publishRequestOf,
} from '../../src/agent-plane/edge/traffic-event.ts';
import { noDecisions } from '../../src/agent-plane/policy/exchange.ts';
import { PublishRequestSchema } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';

// The edge writes each request's event field by field; protobuf-es's reflective create() and
// toBinary() of the same event are the reference: the bytes must be the same, whatever the
// event holds (zero values, repeated fields, TLS, a policy's decisions and logs).

const plain: CompletedRequest = {
  accountId: 'acct_1',
  conn: {
    clientIp: '203.0.113.7',
    serverIp: '127.0.0.1',
    serverName: 'app.example.com',
    serverPort: 80,
    startMs: 1_790_000_000_123,
  },
  request: {
    method: 'GET',
    host: 'app.example.com',
    target: '/a/b?x=1&y=%20z',
    headers: { host: 'app.example.com', 'user-agent': 'curl/8', 'x-many': ['One', 'Two'] },
    bodyLength: 0,
  },
  response: {
    statusCode: 200,
    headers: { 'content-type': 'text/plain', 'content-length': 1024, 'set-cookie': ['a', 'B'] },
    bodyLength: 1024,
  },
  connectionReused: true,
  ipDecision: 'invalid',
  endMs: 1_790_000_001_000,
};

const decided = noDecisions();
Object.assign(decided, {
  basicAuth: { decision: 'allow', username: 'ann' },
  oauth: { decision: 'allow', appClientId: 'app', userId: 'u1', userName: 'Ann' },
  ipPolicy: 'allow',
  compression: { algorithm: 'gzip', bytesSaved: 512 },
  logs: [{ action: 'log', n: 1, nested: { list: [1, 'two', null, true] } }],
});

const cases: Record<string, CompletedRequest> = {
  'plain HTTP, repeated fields': plain,
  'zero values left out': {
    ...plain,
    conn: { ...plain.conn, clientIp: '', serverPort: 0, startMs: 0 },
    request: { ...plain.request, method: '', target: '/', headers: {}, bodyLength: 0 },
    response: { statusCode: 0, headers: {}, bodyLength: 0 },
    connectionReused: false,
    endMs: 1000,
  },
  'HTTPS with a client certificate, a POST with a body': {
    ...plain,
    tls: {
      version: 'TLSv1.3',
      cipherSuite: 'TLS_AES_256_GCM_SHA384',
      clientCert: { serialNumber: '0A1B', subjectCn: 'agent é' },
    },
    request: { ...plain.request, method: 'POST', bodyLength: 70_000 },
  },
  'HTTPS without a client certificate': {
    ...plain,
    tls: { version: 'TLSv1.2', cipherSuite: 'ECDHE-RSA-AES128-GCM-SHA256' },
  },
  "a policy's decisions and logs": { ...plain, decisions: decided, ipDecision: 'block' },
  'a policy that decided nothing': { ...plain, decisions: noDecisions() },
};

describe('the edge event, written field by field', () => {
  for (const [name, done] of Object.entries(cases)) {
    it(`is protobuf-es's encoding: ${name}`, () => {
      const reference = publishRequestOf(done);
      const eventId = fromBinary(PublishRequestSchema, reference).events[0].eventId;
      expect(Buffer.from(httpEventBytes(done, eventId)).toString('hex')).toBe(
        Buffer.from(reference).toString('hex'),
      );
    });
  }
});
