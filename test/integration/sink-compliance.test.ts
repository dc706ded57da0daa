import { mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDestination } from '../../src/data-plane/pipeline/destination.ts';
import { instrumentSink, instrumentSpool } from '../../src/data-plane/pipeline/instrument.ts';
import { openSpool } from '../../src/data-plane/pipeline/spool.ts';
import { testEventRecord } from '../../src/data-plane/pipeline/test-delivery.ts';
import { SINKS } from '../../src/data-plane/sinks/index.ts';
import { batchOf, type EventRecord, RecordBlock } from '../../src/data-plane/sinks/record-block.ts';
import type { Settings } from '../../src/data-plane/sinks/settings.ts';
import { type Sink, SinkError } from '../../src/data-plane/sinks/types.ts';
import { createMetrics } from '../../src/shared/metrics.ts';
import { type ClickHouseServer, startClickHouse } from '../helpers/clickhouse.ts';
import { type KafkaMock, readTopic, startKafka } from '../helpers/kafka.ts';

// One contract, every sink: what a sink must do is written here once, and each kind only says
// how to reach its target, how to take it away and bring it back, how to make a write fail for
// good, and how to read back what it stored. A new sink is one more entry in TARGETS.

const logger = pino({ level: 'silent' });

/** What the suite needs of one kind of target. */
interface Target {
  kind: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Settings of a fresh place (topic, database, directory) named `name`. */
  settings(name: string): Settings;
  /** Settings whose every write fails with a permanent error. */
  broken(name: string): Promise<Settings>;
  /** Makes writes fail with a retriable error until up(). */
  down(name: string): Promise<void>;
  up(name: string): Promise<void>;
  /** The event ids stored at `name`, at least `expected` of them when they are there. */
  stored(name: string, expected: number): Promise<string[]>;
  /** Whether the target keeps arrival order (one partition, one file sequence). */
  ordered: boolean;
}

const accountDir = { path: '' };

function fileTarget(): Target {
  return {
    kind: 'file',
    ordered: true,
    async start() {
      accountDir.path = await mkdtemp(join(tmpdir(), 'sink-compliance-'));
    },
    stop: () => rm(accountDir.path, { recursive: true, force: true }),
    // One file per write (rotation by size), so every write opens a file in the directory.
    settings: (name) => ({ path: name, max_file_bytes: 1 }),
    async broken(name) {
      await writeFile(join(accountDir.path, name), 'a file where a directory should be');
      return { path: `${name}/events` };
    },
    // A directory gone (an unmounted disk): opening the next file fails with ENOENT, retriable.
    down: (name) => rename(join(accountDir.path, name), join(accountDir.path, `${name}.away`)),
    up: (name) => rename(join(accountDir.path, `${name}.away`), join(accountDir.path, name)),
    async stored(name) {
      const dir = join(accountDir.path, name);
      await mkdir(dir, { recursive: true });
      const ids: string[] = [];
      for (const file of (await readdir(dir)).sort()) {
        const text = await readFile(join(dir, file), 'utf8');
        for (const line of text.split('\n').filter(Boolean)) ids.push(JSON.parse(line).event_id);
      }
      return ids;
    },
  };
}

function kafkaTarget(): Target {
  let kafka: KafkaMock;
  return {
    kind: 'kafka',
    ordered: true,
    async start() {
      kafka = await startKafka({ brokers: 1 });
    },
    stop: () => kafka?.close(),
    settings: (name) => ({
      brokers: kafka.brokers,
      topic: name,
      request_timeout_ms: 2000,
      connection_timeout_ms: 500,
    }),
    // The broker answers the next Produce with TOPIC_AUTHORIZATION_FAILED (an ACL says no).
    async broken(name) {
      await kafka.failNextProduce(29);
      return { brokers: kafka.brokers, topic: name };
    },
    down: () => kafka.brokerDown(1),
    up: () => kafka.brokerUp(1),
    async stored(name, expected) {
      const messages = await readTopic(kafka.brokers, name, expected, 20_000);
      return messages.map((message) => JSON.parse(message.value).event_id);
    },
  };
}

function clickhouseTarget(): Target {
  let ch: ClickHouseServer;
  return {
    kind: 'clickhouse',
    ordered: false,
    async start() {
      ch = await startClickHouse();
    },
    stop: () => ch?.close(),
    settings: (name) => ({ url: ch.url, database: name, request_timeout_ms: 5000 }),
    broken: async (name) => ({ url: ch.url, database: name, user: 'tester', password: 'wrong' }),
    down: () => ch.stop(),
    up: () => ch.start(),
    async stored(name) {
      const text = await ch
        .query(`SELECT event_id FROM ${name}.audit_events_v0 FORMAT TabSeparated`)
        .catch(() => '');
      return text.split('\n').filter(Boolean);
    },
  };
}

const TARGETS = [fileTarget(), kafkaTarget(), clickhouseTarget()];

function records(n: number): EventRecord[] {
  return Array.from({ length: n }, () => testEventRecord('ed_compliance', 'ac_compliance'));
}

/** The records as the batcher hands them on: several workers' blocks, here of two records each. */
function asBatch(list: EventRecord[]) {
  const blocks: RecordBlock[] = [];
  for (let i = 0; i < list.length; i += 2) blocks.push(RecordBlock.of(list.slice(i, i + 2)));
  return batchOf(blocks);
}

async function until(check: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The ids in the order they were first stored (a retried batch may store some twice). */
function firstSeen(ids: string[]): string[] {
  return [...new Set(ids)];
}

it('covers every kind of sink the service has', () => {
  expect(TARGETS.map((target) => target.kind).sort()).toEqual(
    SINKS.map((sink) => sink.kind).sort(),
  );
});

describe.each(TARGETS)('the $kind sink keeps the sink contract', (target) => {
  const sink = SINKS.find((s) => s.kind === target.kind);
  const make = async (settings: Settings): Promise<Sink> =>
    sink!.create(sink!.parse(settings, { accountDir: accountDir.path }), { logger });

  beforeAll(() => target.start());
  afterAll(() => target.stop());

  it('has stored a batch when write() resolves', async () => {
    const out = await make(target.settings('stored'));
    const sent = records(5);
    await out.write(asBatch(sent.slice(0, 2)));
    await out.write(asBatch(sent.slice(2)));
    await out.close();
    const ids = await target.stored('stored', 5);
    expect(target.ordered ? ids : ids.sort()).toEqual(
      target.ordered ? sent.map((r) => r.eventId) : sent.map((r) => r.eventId).sort(),
    );
  });

  it('refuses a write after close() with a permanent error and writes nothing', async () => {
    const out = await make(target.settings('closed'));
    const [first, late, marker] = [records(1), records(1), records(1)];
    await out.write(asBatch(first));
    await out.close();
    await out.close();
    const refused = await out.write(asBatch(late)).catch((error) => error);
    expect(refused).toBeInstanceOf(SinkError);
    expect(refused).toMatchObject({ retriable: false, message: `${target.kind} sink is closed` });
    // Another sink writes a marker after it: what the closed sink wrote would come before.
    const after = await make(target.settings('closed'));
    await after.write(asBatch(marker));
    await after.close();
    const ids = await target.stored('closed', 2);
    expect(target.ordered ? ids : ids.sort()).toEqual(
      target.ordered
        ? [first[0].eventId, marker[0].eventId]
        : [first[0].eventId, marker[0].eventId].sort(),
    );
  });

  it('fails with a retriable error while its target is away, and writes again once it is back', async () => {
    const out = await make(target.settings('away'));
    await out.write(asBatch(records(1)));
    await target.down('away');
    try {
      const failed = await out.write(asBatch(records(1))).catch((error) => error);
      expect(failed).toBeInstanceOf(SinkError);
      expect(failed.retriable).toBe(true);
    } finally {
      await target.up('away');
    }
    let written = false;
    for (let attempt = 0; attempt < 40 && !written; attempt++) {
      written = await out.write(asBatch(records(1))).then(
        () => true,
        async () => {
          await new Promise((resolve) => setTimeout(resolve, 250));
          return false;
        },
      );
    }
    expect(written).toBe(true);
    await out.close();
  });

  it('fails with a permanent error when no retry can help', async () => {
    const out = await make(await target.broken('broken'));
    const failed = await out.write(asBatch(records(1))).catch((error) => error);
    await out.close();
    expect(failed).toBeInstanceOf(SinkError);
    expect(failed.retriable).toBe(false);
  });

  it('behind a destination: spools while the target is away, replays everything, and counts it', async () => {
    const metrics = createMetrics();
    const spoolDir = await mkdtemp(join(tmpdir(), `compliance-spool-${target.kind}-`));
    const spool = await openSpool({ dir: spoolDir, maxBytes: 16 << 20 });
    const counts = { delivered: 0, spooled: 0, errors: 0 };
    const destination = createDestination({
      id: 'ed_compliance',
      sink: instrumentSink(await make(target.settings('replay')), target.kind, metrics, counts),
      spool: instrumentSpool(spool, target.kind, metrics, counts),
      batcher: { maxEvents: 10, maxBytes: 1 << 20, lingerMs: 5 },
      logger,
      retry: { baseMs: 50, maxMs: 500 },
      parkRetryMs: 10_000,
    });
    const sent: EventRecord[] = [];
    const send = async () => {
      const list = records(10);
      sent.push(...list);
      return destination.deliver(RecordBlock.of(list));
    };
    try {
      expect(await send()).toEqual({ written: true, reason: null });
      await target.down('replay');
      const spooled = await send();
      expect(spooled.written).toBe(false);
      expect(spooled.reason).toMatch(new RegExp(`^${target.kind}`));
      expect(destination.health().status).toBe('retrying');
      expect(destination.health().backlog.events).toBe(10);
      expect((await send()).written).toBe(false);
    } finally {
      await target.up('replay');
    }
    await until(() => destination.health().status === 'ok');
    await send();
    await destination.close();
    await rm(spoolDir, { recursive: true, force: true });

    const ids = firstSeen(await target.stored('replay', sent.length));
    const expected = sent.map((r) => r.eventId);
    expect(target.ordered ? ids : ids.sort()).toEqual(target.ordered ? expected : expected.sort());
    const value = async (name: string, labels: Record<string, string>) => {
      const metric = await metrics.registry.getSingleMetric(name)?.get();
      const found = metric?.values.find((v) =>
        Object.entries(labels).every(([k, l]) => v.labels[k] === l),
      );
      return found?.value ?? 0;
    };
    const sinkLabel = { sink: target.kind };
    expect(await value('agent_ingress_sink_records_delivered_total', sinkLabel)).toBe(sent.length);
    expect(await value('agent_ingress_spool_records_appended_total', sinkLabel)).toBe(20);
    expect(
      await value('agent_ingress_sink_write_errors_total', { ...sinkLabel, retriable: 'true' }),
    ).toBeGreaterThan(0);
    expect(
      await value('agent_ingress_sink_write_errors_total', { ...sinkLabel, retriable: 'false' }),
    ).toBe(0);
    // The destination's own counts (its account's GET /pipeline/stats) agree with the metrics.
    expect(counts).toEqual({
      delivered: sent.length,
      spooled: 20,
      errors: await value('agent_ingress_sink_write_errors_total', {
        ...sinkLabel,
        retriable: 'true',
      }),
    });
  });
});
