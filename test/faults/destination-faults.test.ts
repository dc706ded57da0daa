import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Code } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClickHouseServer, startClickHouse } from '../helpers/clickhouse.ts';
import { type KafkaMock, readTopic, startKafka } from '../helpers/kafka.ts';
import { type ServiceProcess, startServiceProcess } from '../helpers/service-process.ts';
import {
  type CountingProxy,
  clickhouseIds,
  countingProxy,
  eventPool,
  health,
  missing,
  publisher,
  readFileDestination,
  route,
  startLoad,
  waitDrained,
  waitRouted,
} from './support.ts';

// One destination failing must not hold up the others, a retriable failure must end with
// everything delivered once the target is back, and a permanent one must park the destination
// (error visible, no tight retry loop) until its settings are fixed. Each test runs its own
// service process with its own DATA_DIR. Events are small tcp records with a field selection:
// the mock Kafka keeps only 5 MiB per partition.

const SOURCES = [
  { type: 'tcp_connection_closed.v0', fields: ['conn.client_ip', 'conn.server_port'] },
];

describe('destination faults', () => {
  const dirs: string[] = [];
  const services: ServiceProcess[] = [];
  let kafka: KafkaMock;
  let clickhouse: ClickHouseServer;
  let proxy: CountingProxy;

  async function service(env: Record<string, string> = {}): Promise<ServiceProcess> {
    const dataDir = mkdtempSync(join(tmpdir(), 'agin-fault-dest-'));
    dirs.push(dataDir);
    const started = await startServiceProcess({
      dataDir,
      env: { BATCH_LINGER_MS: '20', ...env },
    });
    services.push(started);
    return started;
  }
  const eventIdsOf = (messages: { value: string }[]) =>
    messages.map((message) => JSON.parse(message.value).event_id as string);

  beforeAll(async () => {
    [kafka, clickhouse] = await Promise.all([
      startKafka({ topics: ['down-from-start:2', 'broker-restart:2'] }),
      startClickHouse(),
    ]);
    proxy = await countingProxy(clickhouse.url);
  });
  afterAll(async () => {
    await Promise.all(services.filter((s) => s.running()).map((s) => s.stop('SIGKILL')));
    await Promise.all([kafka?.close(), clickhouse?.close(), proxy?.close()]);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('keeps a file destination delivering while Kafka is down from the start, then delivers the Kafka backlog', async () => {
    await kafka.brokerDown(-1);
    try {
      const svc = await service();
      const accountId = svc.accountId!;
      const [fileId, kafkaId] = await route(
        svc.api,
        [
          { file: { path: 'beside-kafka' } },
          { kafka: { brokers: kafka.brokers, topic: 'down-from-start' } },
        ],
        SOURCES,
      );
      const acked = await waitRouted(svc.url, svc.api, accountId, [fileId, kafkaId]);
      const publish = publisher(svc.url);
      for (let i = 0; i < 10; i++)
        acked.push(...(await publish(eventPool(accountId, 100, i))).eventIds);

      const file = readFileDestination(
        join(svc.options.dataDir, 'events', accountId, 'beside-kafka'),
      );
      expect(missing(acked, file.ids)).toBe('');
      expect((await health(svc.api, fileId)).status).toBe('ok');
      const down = await health(svc.api, kafkaId);
      expect(down.status).toBe('retrying');
      expect(down.last_error).toEqual(expect.any(String));
      expect(down.backlog.events).toBeGreaterThanOrEqual(acked.length);

      await kafka.brokerUp(-1);
      await waitDrained(svc.api, kafkaId, 60_000);
      const messages = await readTopic(kafka.brokers, 'down-from-start', acked.length, 20_000);
      expect(missing(acked, eventIdsOf(messages))).toBe('');
      expect((await svc.stop()).code).toBe(0);
    } finally {
      await kafka.brokerUp(-1);
    }
  }, 120_000);

  it('delivers every acknowledged event across a Kafka broker restart mid-stream', async () => {
    const svc = await service();
    const accountId = svc.accountId!;
    const [kafkaId] = await route(
      svc.api,
      [{ kafka: { brokers: kafka.brokers, topic: 'broker-restart' } }],
      SOURCES,
    );
    const acked = await waitRouted(svc.url, svc.api, accountId, [kafkaId]);
    const publish = publisher(svc.url);
    let sawRetrying = false;
    for (let i = 0; i < 30; i++) {
      if (i === 8) await kafka.brokerDown(-1);
      if (i === 14) sawRetrying = (await health(svc.api, kafkaId)).status === 'retrying';
      if (i === 16) await kafka.brokerUp(-1);
      acked.push(...(await publish(eventPool(accountId, 50, i))).eventIds);
    }
    expect(sawRetrying, 'the destination noticed the broker was down').toBe(true);
    await waitDrained(svc.api, kafkaId, 60_000);
    const messages = await readTopic(kafka.brokers, 'broker-restart', acked.length, 20_000);
    expect(missing(acked, eventIdsOf(messages))).toBe('');
    expect((await svc.stop()).code).toBe(0);
  }, 120_000);

  it('parks a ClickHouse destination with a wrong password without spinning, and drains it once the password is fixed', async () => {
    const svc = await service();
    const accountId = svc.accountId!;
    const target = (password: string) => ({
      clickhouse: { url: proxy.url, user: 'tester', password, table_prefix: 'parked_' },
    });
    const [fileId, clickhouseId] = await route(
      svc.api,
      [{ file: { path: 'beside-parked' } }, target('wrong')],
      SOURCES,
    );
    const acked = await waitRouted(svc.url, svc.api, accountId, [fileId, clickhouseId]);

    const parked = await health(svc.api, clickhouseId);
    expect(parked.status).toBe('parked');
    expect(parked.last_error).toMatch(/password/i);
    expect(parked.last_error_at).toEqual(expect.any(String));

    // Events keep coming for a few seconds: they go to the spool, not to the server.
    const before = proxy.requests();
    const publish = publisher(svc.url);
    for (let i = 0; i < 15; i++) {
      acked.push(...(await publish(eventPool(accountId, 50, i))).eventIds);
      await sleep(200);
    }
    const attempts = proxy.requests() - before;
    expect(attempts, 'requests to ClickHouse while parked').toBeLessThanOrEqual(1);
    const parkedLines = svc.logs().filter((line) => line.msg === 'destination parked');
    expect(parkedLines.length).toBeLessThanOrEqual(2);
    expect((await health(svc.api, clickhouseId)).backlog.events).toBeGreaterThanOrEqual(
      acked.length,
    );
    // The other destination of the same subscription delivered all along.
    const fileDir = join(svc.options.dataDir, 'events', accountId, 'beside-parked');
    expect(missing(acked, readFileDestination(fileDir).ids)).toBe('');

    // Fix the password while events keep flowing: the backlog drains, nothing is lost.
    const load = startLoad({ url: svc.url, accountId, clients: 2, perRequest: 50, pauseMs: 20 });
    await load.waitAcked(500, 20_000);
    const patched = await svc.api('PATCH', `/event_destinations/${clickhouseId}`, {
      target: target('secret'),
    });
    expect(patched.status).toBe(200);
    await sleep(1_000);
    await load.stop();
    expect(load.failures).toEqual([]);
    acked.push(...load.acked());
    await waitDrained(svc.api, clickhouseId, 60_000);
    const recovered = await health(svc.api, clickhouseId);
    expect(recovered.last_success_at).toEqual(expect.any(String));
    expect(missing(acked, await clickhouseIds(clickhouse, 'parked_tcp_connection_closed_v0'))).toBe(
      '',
    );
    expect((await svc.stop()).code).toBe(0);
    expect(missing(acked, readFileDestination(fileDir).ids)).toBe('');
  }, 120_000);

  it('loses nothing when a destination is re-targeted while events flow', async () => {
    const svc = await service();
    const accountId = svc.accountId!;
    const [fileId] = await route(svc.api, [{ file: { path: 'switch-a' } }], SOURCES);
    const acked = await waitRouted(svc.url, svc.api, accountId, [fileId]);
    const load = startLoad({ url: svc.url, accountId, clients: 3, perRequest: 50 });
    await load.waitAcked(500, 20_000);
    for (let i = 0; i < 10; i++) {
      const path = i % 2 === 0 ? 'switch-b' : 'switch-a';
      const patched = await svc.api('PATCH', `/event_destinations/${fileId}`, {
        target: { file: { path } },
      });
      expect(patched.status).toBe(200);
      await sleep(150);
    }
    await load.stop();
    acked.push(...load.acked());
    expect((await svc.stop()).code).toBe(0);
    const events = join(svc.options.dataDir, 'events', accountId);
    const delivered = [
      ...readFileDestination(join(events, 'switch-a')).ids,
      ...readFileDestination(join(events, 'switch-b')).ids,
    ];
    // Requests may fail while the destination is rebuilt (the edge retries them); none may be
    // acknowledged without its events in one of the two directories.
    expect(missing(acked, delivered)).toBe('');
  }, 120_000);

  it('refuses, rather than acknowledges, the events of a destination whose spool cannot be opened', async () => {
    const first = await service();
    const accountId = first.accountId!;
    const [fileId] = await route(first.api, [{ file: { path: 'unopenable' } }], SOURCES);
    const acked = await waitRouted(first.url, first.api, accountId, [fileId]);
    expect((await first.stop()).code).toBe(0);

    // Between runs the destination's spool directory becomes unusable (here: a file in its place).
    const spoolDir = join(first.options.dataDir, 'spool', fileId);
    rmSync(spoolDir, { recursive: true, force: true });
    writeFileSync(spoolDir, 'not a directory');
    const second = await first.restart();
    services.push(second);
    const publish = publisher(second.url);
    await expect(publish(eventPool(accountId, 10, 1))).rejects.toMatchObject({
      code: Code.Unavailable,
    });
    const broken = await health(second.api, fileId);
    expect(broken.status).toBe('parked');
    expect(broken.last_error).toMatch(/cannot open/);

    // Repaired: the next configuration change opens it, and it delivers again.
    rmSync(spoolDir, { force: true });
    const touched = await second.api('PATCH', `/event_destinations/${fileId}`, {
      description: 'spool repaired',
    });
    expect(touched.status).toBe(200);
    await waitRouted(second.url, second.api, accountId, [fileId]).then((ids) => acked.push(...ids));
    acked.push(...(await publish(eventPool(accountId, 10, 2))).eventIds);
    expect((await health(second.api, fileId)).status).toBe('ok');
    expect((await second.stop()).code).toBe(0);
    const dir = join(second.options.dataDir, 'events', accountId, 'unopenable');
    expect(missing(acked, readFileDestination(dir).ids)).toBe('');
  }, 60_000);
});
