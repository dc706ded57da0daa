import { createHook } from 'node:async_hooks';
import type { AddressInfo } from 'node:net';
import { createServer, type TLSSocket } from 'node:tls';
import {
  AuthenticationError,
  MultipleErrors,
  NetworkError,
  ProtocolError,
  TimeoutError,
} from '@platformatic/kafka';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseKafkaSinkConfig } from '../../src/data-plane/sinks/kafka/config.ts';
import { encodeMessages } from '../../src/data-plane/sinks/kafka/encode.ts';
import { createKafkaSink, kafkaSinkError } from '../../src/data-plane/sinks/kafka/sink.ts';
import { type EventRecord, RecordBlock } from '../../src/data-plane/sinks/record-block.ts';
import { SinkConfigError } from '../../src/data-plane/sinks/settings.ts';
import { type Batch, SinkError } from '../../src/data-plane/sinks/types.ts';
import { type KafkaMock, readTopic, startKafka } from '../helpers/kafka.ts';
import { CA_EXTENSIONS, OpensslPki } from '../helpers/openssl-pki.ts';

const logger = pino({ level: 'silent' });

function rec(i: number, hosts = 4): EventRecord {
  const host = `host-${i % hosts}.example.com`;
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

  it('keys messages by partition key and carries event type and id in headers, as views', () => {
    const batch = toBatch([rec(5)]);
    const [m] = encodeMessages(batch, 'events');
    const text = (b: unknown) => (b as Buffer).toString();
    expect({
      topic: m.topic,
      key: text(m.key),
      value: text(m.value),
      headers: [...(m.headers as Map<Buffer, Buffer>)].map(([k, v]) => [text(k), text(v)]),
    }).toEqual({
      topic: 'events',
      key: 'host-1.example.com',
      value: rec(5).json,
      headers: [
        ['event_type', 'http_request_complete.v0'],
        ['event_id', 'ev_5'],
      ],
    });
    const block = batch.blocks[0];
    expect((m.value as Buffer).buffer).toBe(block.text.buffer);
    expect((m.key as Buffer).buffer).toBe(block.meta.buffer);
  });

  it('classifies client errors as the sink contract says', () => {
    const protocol = (id: string) => new ProtocolError(id);
    const retried = (e: Error) => new MultipleErrors('produce failed 3 times.', [e, e, e]);
    const refused = new NetworkError('Connection to 127.0.0.1:9 failed.', {
      cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' }),
    });
    const classify = (e: Error, autoCreate = false) => kafkaSinkError(e, autoCreate).retriable;
    expect(classify(retried(refused))).toBe(true);
    expect(classify(new TimeoutError('Request timed out.'))).toBe(true);
    expect(classify(retried(protocol('NOT_LEADER_OR_FOLLOWER')))).toBe(true);
    expect(classify(protocol('REQUEST_TIMED_OUT'))).toBe(true);
    expect(classify(protocol('TOPIC_AUTHORIZATION_FAILED'))).toBe(false);
    expect(classify(protocol('MESSAGE_TOO_LARGE'))).toBe(false);
    expect(classify(protocol('SASL_AUTHENTICATION_FAILED'))).toBe(false);
    expect(classify(new AuthenticationError('SASL authentication failed.'))).toBe(false);
    // How the client reports a refused login: a connection failure caused by it.
    const login = (cause: Error) =>
      new MultipleErrors('Cannot connect to any broker.', [
        new NetworkError('Connection to 127.0.0.1:9092 failed.', { cause }),
      ]);
    expect(classify(login(protocol('SASL_AUTHENTICATION_FAILED')))).toBe(false);
    expect(classify(login(new AuthenticationError('SASL/PLAIN failed.')))).toBe(false);
    expect(kafkaSinkError(login(protocol('SASL_AUTHENTICATION_FAILED')), false).message).toMatch(
      /^kafka: SASL_AUTHENTICATION_FAILED: /,
    );
    const unknownTopic = retried(protocol('UNKNOWN_TOPIC_OR_PARTITION'));
    expect(classify(unknownTopic)).toBe(false);
    expect(classify(unknownTopic, true)).toBe(true);
    expect(kafkaSinkError(retried(refused), false).message).toBe(
      'kafka: connect ECONNREFUSED 127.0.0.1:9',
    );
  });
});

/** Timers created while `run` runs: a setTimeout polling loop shows as hundreds of them. */
async function timersCreatedDuring(run: () => Promise<void>): Promise<number> {
  let timers = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === 'Timeout') timers++;
    },
  }).enable();
  try {
    await run();
  } finally {
    hook.disable();
  }
  return timers;
}

const idOf = (m: { value: string }) => JSON.parse(m.value).event_id as string;

describe('kafka sink against the mock cluster', () => {
  let kafka: KafkaMock;
  beforeAll(async () => {
    kafka = await startKafka({
      brokers: 1,
      topics: ['events:3', 'idle:1', 'partitions:8', 'ordered:3', 'leader:1', 'too-large:1'],
    });
  });
  afterAll(() => kafka?.close());

  it('leaves an idle producer quiet: no timer loop between writes', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    try {
      const config = parseKafkaSinkConfig({ brokers: kafka.brokers, topic: 'idle' });
      const sink = createKafkaSink({ config, logger });
      await sink.write(toBatch([rec(0), rec(1)]));
      await new Promise((resolve) => setTimeout(resolve, 50));
      const timers = await timersCreatedDuring(
        () => new Promise((resolve) => setTimeout(resolve, 500)),
      );
      // The wait's own timer, and a few of the test runner's; kafkajs's bug made ~500.
      expect(timers).toBeLessThan(10);
      await sink.close();
      expect(warnings).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('produces gzip batches another client reads back: key, value and headers', async () => {
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
    const byId = new Map(got.map((m) => [idOf(m), m]));
    for (const r of records) {
      expect(byId.get(r.eventId)).toMatchObject({
        key: r.partitionKey,
        value: r.json,
        headers: { event_type: r.eventType, event_id: r.eventId },
      });
    }
  });

  it('puts each key in the partition Java clients and kafkajs chose for it', async () => {
    // Murmur2 partitions of 8, as kafkajs 2.2.4's DefaultPartitioner computed them: a topic
    // written before the switch of client keeps each host in the same partition after it.
    const expected: Record<string, number> = {
      'host-0': 6,
      'host-1': 5,
      'api.example.com': 6,
      'www.example.org': 3,
      a: 4,
      'ключ.example': 7,
    };
    const config = parseKafkaSinkConfig({ brokers: kafka.brokers, topic: 'partitions' });
    const sink = createKafkaSink({ config, logger });
    const keys = Object.keys(expected);
    await sink.write(toBatch(keys.map((key, i) => ({ ...rec(i), partitionKey: key }))));
    await sink.close();
    const got = await readTopic(kafka.brokers, 'partitions', keys.length);
    expect(Object.fromEntries(got.map((m) => [m.key, m.partition]))).toEqual(expected);
  });

  it("keeps each key's records in the order they were written, across writes", async () => {
    const config = parseKafkaSinkConfig({ brokers: kafka.brokers, topic: 'ordered' });
    const sink = createKafkaSink({ config, logger });
    const records = Array.from({ length: 100 }, (_, i) => rec(i, 5));
    for (let i = 0; i < records.length; i += 20)
      await sink.write(toBatch(records.slice(i, i + 20)));
    await sink.close();
    const got = await readTopic(kafka.brokers, 'ordered', records.length);
    const idsByKey = (list: { key: string | null; id: string }[]) => {
      const out: Record<string, string[]> = {};
      for (const { key, id } of list) out[key ?? ''] = [...(out[key ?? ''] ?? []), id];
      return out;
    };
    const stored = [...got].sort((a, b) => a.partition - b.partition || a.offset - b.offset);
    expect(idsByKey(stored.map((m) => ({ key: m.key, id: idOf(m) })))).toEqual(
      idsByKey(records.map((r) => ({ key: r.partitionKey, id: r.eventId }))),
    );
  });

  it('rides out a NOT_LEADER_OR_FOLLOWER answer with its own retry, storing the batch once', async () => {
    const config = parseKafkaSinkConfig({ brokers: kafka.brokers, topic: 'leader' });
    const sink = createKafkaSink({ config, logger });
    await sink.write(toBatch([rec(0)]));
    await kafka.failNextProduce(6);
    await sink.write(toBatch([rec(1)]));
    await sink.close();
    const got = await readTopic(kafka.brokers, 'leader', 2);
    expect(got.map(idOf)).toEqual(['ev_0', 'ev_1']);
  });

  it('fails for good when the broker says MESSAGE_TOO_LARGE', async () => {
    const config = parseKafkaSinkConfig({ brokers: kafka.brokers, topic: 'too-large' });
    const sink = createKafkaSink({ config, logger });
    await kafka.failNextProduce(10);
    const failed = await sink.write(toBatch([rec(0)])).catch((error) => error);
    await sink.close();
    expect(failed).toBeInstanceOf(SinkError);
    expect(failed).toMatchObject({ retriable: false });
    expect(failed.message).toMatch(/^kafka: MESSAGE_TOO_LARGE: /);
  });

  // No integration case for unknown topics: librdkafka's mock creates any topic it is asked
  // about, whatever the client's autocreateTopics says; the classification test covers it.
});

describe('kafka sink over TLS', () => {
  const pki = new OpensslPki();
  const ca = pki.selfSigned('ca', { subject: '/CN=Kafka test CA', extensions: CA_EXTENSIONS });
  const leaf = (name: string) =>
    pki.issue(name, ca, {
      subject: `/CN=${name}`,
      extensions: ['subjectAltName=IP:127.0.0.1', 'extendedKeyUsage=serverAuth,clientAuth'],
    });
  const broker = leaf('broker');
  const client = leaf('agent-ingress');
  // A TLS listener, not a broker: it records who completed a handshake and hangs up, so the
  // write fails after the TLS settings have done their part.
  const peers: string[] = [];
  const handshakeErrors: string[] = [];
  const server = createServer(
    { ...broker, ca: ca.cert, requestCert: true },
    (socket: TLSSocket) => {
      const peer = socket.getPeerCertificate();
      peers.push(socket.authorized ? `authorized ${peer.subject?.CN}` : 'unauthorized');
      socket.destroy();
    },
  );
  server.on('tlsClientError', (error) => handshakeErrors.push(error.message));
  let address = '';
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    pki.close();
  });

  const write = async (tls: Record<string, unknown> | boolean) => {
    const config = parseKafkaSinkConfig({
      brokers: [address],
      topic: 't',
      tls,
      connection_timeout_ms: 2_000,
      request_timeout_ms: 2_000,
    });
    const sink = createKafkaSink({ config, logger });
    const failed = await sink.write(toBatch([rec(0)])).catch((error) => error);
    await sink.close();
    return failed;
  };

  it("trusts the destination's CA and presents its client certificate", async () => {
    const failed = await write({ ca: ca.cert, cert: client.cert, key: client.key });
    expect(peers).toContain('authorized agent-ingress');
    expect(failed).toMatchObject({ retriable: true });
  });

  it('refuses a broker its CAs do not vouch for, before sending a byte', async () => {
    peers.length = 0;
    const failed = await write(true);
    expect(peers).toEqual([]);
    expect(handshakeErrors.length).toBeGreaterThan(0);
    expect(failed).toBeInstanceOf(SinkError);
    expect(failed.message).toMatch(/certificate/i);
  });
});
