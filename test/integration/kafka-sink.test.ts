import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  KafkaJSConnectionError,
  KafkaJSNumberOfRetriesExceeded,
  KafkaJSProtocolError,
} from 'kafkajs';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseKafkaSinkConfig } from '../../src/data-plane/sinks/kafka/config.ts';
import { encodeMessages } from '../../src/data-plane/sinks/kafka/encode.ts';
import { createKafkaSink, kafkaSinkError } from '../../src/data-plane/sinks/kafka/sink.ts';
import { type EventRecord, RecordBlock } from '../../src/data-plane/sinks/record-block.ts';
import { SinkConfigError } from '../../src/data-plane/sinks/settings.ts';
import type { Batch } from '../../src/data-plane/sinks/types.ts';
import { type KafkaMock, readTopic, startKafka } from '../helpers/kafka.ts';

// kafkajs's per-connection request queue (no public export; its prototype is what every
// connection uses, so a spy on it counts the real calls).
const RequestQueue = createRequire(import.meta.url)('kafkajs/src/network/requestQueue/index.js');

const logger = pino({ level: 'silent' });

function rec(i: number): EventRecord {
  const host = `host-${i % 4}.example.com`;
  return {
    eventId: `ev_${i}`,
    eventType: 'http_request_complete.v0',
    accountId: 'ac_1',
    partitionKey: host,
    json: JSON.stringify({ event_id: `ev_${i}`, object: { conn: { server_name: host } } }),
  };
}

function toBatch(records: EventRecord[]): Batch {
  return RecordBlock.of(records);
}

const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

describe('kafka sink config and encoding', () => {
  it('fills defaults and validates', () => {
    const c = parseKafkaSinkConfig({ brokers: ['127.0.0.1:9092'], topic: 'events' });
    expect(c).toMatchObject({
      clientId: 'agent-ingress',
      compression: 'none',
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
    });
    const tls = parseKafkaSinkConfig({
      brokers: ['k:9093'],
      topic: 't',
      tls: { ca: PEM, reject_unauthorized: false },
      sasl: { mechanism: 'scram-sha-512', username: 'u', password: 'p' },
    });
    expect(tls.tls).toEqual({
      ca: PEM,
      cert: undefined,
      key: undefined,
      rejectUnauthorized: false,
    });
    expect(tls.sasl?.mechanism).toBe('scram-sha-512');
    const bad = [
      { brokers: [], topic: 't' },
      { brokers: ['nohost'], topic: 't' },
      { brokers: ['k:1'], topic: 'a b' },
      { brokers: ['k:1'], topic: 't', compression: 'snappy' as 'gzip' },
      { brokers: ['k:1'], topic: 't', max_in_flight_requests: 0 },
      { brokers: ['k:1'], topic: 't', max_in_flight_requests: 6 },
      { brokers: ['k:1'], topic: 't', request_timeout_ms: 99 },
      { brokers: ['k:1'], topic: 't', connection_timeout_ms: 60_001 },
      { brokers: ['k:1'], topic: 't', tls: { ca: 'not pem' } },
      { brokers: ['k:1'], topic: 't', tls: { cert: PEM } },
      {
        brokers: ['k:1'],
        topic: 't',
        sasl: { mechanism: 'gssapi' as 'plain', username: 'u', password: 'p' },
      },
    ];
    for (const settings of bad) {
      expect(() => parseKafkaSinkConfig(settings)).toThrow(SinkConfigError);
    }
  });

  it('keys messages by partition key and carries event type and id in headers', () => {
    const [m] = encodeMessages(toBatch([rec(5)]));
    expect({ ...m, value: (m.value as Buffer).toString() }).toEqual({
      key: 'host-1.example.com',
      value: rec(5).json,
      headers: { event_type: 'http_request_complete.v0', event_id: 'ev_5' },
    });
    expect(Buffer.isBuffer(m.value)).toBe(true);
  });

  it('classifies kafkajs errors', () => {
    const protocol = (type: string, retriable: boolean) =>
      new KafkaJSProtocolError({ message: type, type, code: 0, retriable } as never);
    const wrapped = (e: Error) =>
      new KafkaJSNumberOfRetriesExceeded(e, { retryCount: 2, retryTime: 100 });
    const conn = new KafkaJSConnectionError('Connection error: connect ECONNREFUSED');
    expect(kafkaSinkError(wrapped(conn), false).retriable).toBe(true);
    expect(
      kafkaSinkError(wrapped(protocol('NOT_LEADER_FOR_PARTITION', true)), false).retriable,
    ).toBe(true);
    expect(kafkaSinkError(protocol('TOPIC_AUTHORIZATION_FAILED', false), false).retriable).toBe(
      false,
    );
    expect(kafkaSinkError(protocol('MESSAGE_TOO_LARGE', false), false).retriable).toBe(false);
    const unknownTopic = wrapped(protocol('UNKNOWN_TOPIC_OR_PARTITION', true));
    expect(kafkaSinkError(unknownTopic, false).retriable).toBe(false);
    expect(kafkaSinkError(unknownTopic, true).retriable).toBe(true);
  });
});

describe('kafka sink against the mock cluster', () => {
  let kafka: KafkaMock;
  let dir: string;
  beforeAll(async () => {
    kafka = await startKafka({ brokers: 1, topics: ['events:3', 'idle:1'] });
    dir = await mkdtemp(join(tmpdir(), 'kafka-spool-'));
  });
  afterAll(async () => {
    await kafka?.close();
    await rm(dir, { recursive: true, force: true });
  });

  // First in this file: Node emits TimeoutNegativeWarning once per process.
  it('leaves an idle producer quiet: no negative timeout, no 1 ms polling loop', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    const checks = vi.spyOn(RequestQueue.prototype, 'checkPendingRequests');
    try {
      const config = parseKafkaSinkConfig({ brokers: kafka.brokers, topic: 'idle' });
      const sink = createKafkaSink({ config, logger });
      await sink.write(toBatch([rec(0), rec(1)]));
      // Idle, connected: the request queues have nothing pending and nothing to check.
      await new Promise((resolve) => setTimeout(resolve, 50));
      checks.mockClear();
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(checks.mock.calls.length).toBeLessThan(5);
      await sink.close();
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => w.startsWith('TimeoutNegativeWarning'))).toEqual([]);
    } finally {
      checks.mockRestore();
      process.off('warning', onWarning);
    }
  });

  it('produces messages with key and value, one host per partition', async () => {
    const config = parseKafkaSinkConfig({
      brokers: kafka.brokers,
      topic: 'events',
      compression: 'gzip',
    });
    const sink = createKafkaSink({ config, logger });
    const records = Array.from({ length: 40 }, (_, i) => rec(i));
    await sink.write(toBatch(records.slice(0, 20)));
    await sink.write(toBatch(records.slice(20)));
    await sink.close();
    const got = await readTopic(kafka.brokers, 'events', 40, 20_000);
    expect(got).toHaveLength(40);
    const byId = new Map(got.map((m) => [JSON.parse(m.value).event_id as string, m]));
    for (const r of records) {
      expect(byId.get(r.eventId)).toEqual({ key: r.partitionKey, value: r.json });
    }
  });

  // No integration case for unknown topics: librdkafka's mock creates any topic it is asked
  // about, whatever the client's allowAutoTopicCreation says; the classification test covers it.
});
