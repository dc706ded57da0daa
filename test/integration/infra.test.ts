import { type ClickHouseClient, ClickHouseLogLevel, createClient } from '@clickhouse/client';
import {
  compatibilityPartitioner,
  findErrorBy,
  ProduceAcks,
  Producer,
  stringSerializers,
} from '@platformatic/kafka';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClickHouseServer, startClickHouse } from '../helpers/clickhouse.ts';
import { type KafkaMock, readTopic, startKafka } from '../helpers/kafka.ts';

// Proves the test infrastructure itself: real servers, real clients, stop/start for fault tests.

describe('kafka mock cluster', () => {
  let cluster: KafkaMock;
  beforeAll(async () => {
    cluster = await startKafka({ brokers: 3, topics: ['events'] });
  });
  afterAll(() => cluster?.close());

  const producerFor = (brokers: string[], retries = 5) =>
    new Producer({
      clientId: 'infra-test',
      bootstrapBrokers: brokers,
      retries,
      retryDelay: 100,
      connectTimeout: 1000,
      acks: ProduceAcks.ALL,
      partitioner: compatibilityPartitioner,
      serializers: stringSerializers,
    });

  it('retains 1000 keyed messages produced with acks=-1 and gives them back', async () => {
    expect(cluster.brokers).toHaveLength(3);
    const producer = producerFor(cluster.brokers);
    const messages = Array.from({ length: 1000 }, (_, i) => ({
      topic: 'events',
      key: `k${i % 50}`,
      value: `${i}`,
    }));
    const { offsets } = await producer.send({ messages });
    await producer.close();
    expect(new Set(offsets?.map((a) => a.partition))).toEqual(new Set([0, 1, 2]));

    const got = await readTopic(cluster.brokers, 'events', 1000, 20_000);
    expect(got).toHaveLength(1000);
    expect(new Set(got.map((m) => m.value)).size).toBe(1000);
    // Same key, same partition: each key's values come back in production order.
    const k7 = got.filter((m) => m.key === 'k7').map((m) => Number(m.value));
    expect(k7).toEqual([...k7].sort((a, b) => a - b));
  });

  it('creates topics on request with the asked partition count', async () => {
    await cluster.createTopic('audit', 5);
    const producer = producerFor(cluster.brokers);
    const metadata = await producer.metadata({ topics: ['audit'] });
    await producer.close();
    expect(metadata.topics.get('audit')?.partitionsCount).toBe(5);
  });

  it('refuses produce while a broker is down and accepts it again once up', async () => {
    const single = await startKafka({ topics: ['faults:1'] });
    try {
      const producer = producerFor(single.brokers, 2);
      const send = (value: string) =>
        producer.send({ messages: [{ topic: 'faults', key: 'k', value }] });
      await send('before');

      await single.brokerDown(1);
      const refused = await send('while-down').catch((error: Error) => error);
      expect(findErrorBy(refused as Error, 'code', 'PLT_KFK_NETWORK')?.message).toMatch(
        /^Connection (closed|to 127\.0\.0\.1:\d+ failed)/,
      );

      await single.brokerUp(1);
      await send('after');
      await producer.close();

      const got = await readTopic(single.brokers, 'faults', 2, 15_000);
      expect(got.map((m) => m.value)).toEqual(['before', 'after']);
    } finally {
      await single.close();
    }
  });
});

describe('clickhouse server', () => {
  let server: ClickHouseServer;
  let client: ClickHouseClient;
  beforeAll(async () => {
    server = await startClickHouse();
    // Errors below are expected; the client would also log each one.
    client = createClient({ url: server.url, log: { level: ClickHouseLogLevel.OFF } });
  });
  afterAll(async () => {
    await client?.close();
    await server?.close();
  });

  const count = async (c: ClickHouseClient) => {
    const rs = await c.query({ query: 'SELECT count() AS n FROM rows', format: 'JSONEachRow' });
    const [row] = await rs.json<{ n: string }>();
    return Number(row.n);
  };

  it('stores JSONEachRow inserts in a MergeTree table', async () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(server.version).toMatch(/^\d+\.\d+/);
    await client.command({
      query:
        'CREATE TABLE rows (id UInt32, name String, at DateTime) ENGINE = MergeTree ORDER BY id',
    });
    const values = Array.from({ length: 100 }, (_, i) => ({
      id: i,
      name: `row-${i}`,
      at: '2026-01-01 00:00:00',
    }));
    await client.insert({ table: 'rows', values, format: 'JSONEachRow' });
    expect(await count(client)).toBe(100);
    expect((await server.query('SELECT sum(id) FROM rows')).trim()).toBe('4950');
    await expect(server.query('SELECT nope FROM rows')).rejects.toThrow(/HTTP 4\d\d|HTTP 5\d\d/);
  });

  it('authenticates the tester user and rejects a wrong password', async () => {
    const log = { level: ClickHouseLogLevel.OFF };
    const ok = createClient({ url: server.url, username: 'tester', password: 'secret', log });
    const bad = createClient({ url: server.url, username: 'tester', password: 'wrong', log });
    try {
      expect(await count(ok)).toBe(100);
      await expect(count(bad)).rejects.toThrow(/password/i);
    } finally {
      await ok.close();
      await bad.close();
    }
  });

  it('refuses connections when stopped and keeps its data across a restart', async () => {
    await server.stop();
    await expect(
      client.insert({ table: 'rows', values: [{ id: 1000, name: 'x' }], format: 'JSONEachRow' }),
    ).rejects.toMatchObject({ code: 'ECONNREFUSED' });

    await server.start();
    expect(await count(client)).toBe(100);
  });
});
