import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { Kafka, logLevel } from 'kafkajs';
import { parseKafkaSinkConfig } from '../src/data-plane/sinks/kafka/config.ts';
import { encodeMessages } from '../src/data-plane/sinks/kafka/encode.ts';
import { createKafkaSink } from '../src/data-plane/sinks/kafka/sink.ts';
import { createLogger } from '../src/shared/logger.ts';
import { startKafka } from '../test/helpers/kafka.ts';
import type { RawSetup } from './kafka-raw.ts';
import { recordBatches } from './lib/records.ts';
import { printRateComparison, report } from './lib/report.ts';
import { spreadOf } from './lib/spread.ts';
import { ratioOf } from './lib/stats.ts';

// Messages/s of the project's Kafka sink (createKafkaSink: worker-made envelope records → keyed
// messages with headers → producer.send, acks=-1) against a raw kafkajs producer.send of the
// identical messages (precomputed with the sink's own encoder outside the timed section) with the
// same producer settings, compression and batch size, on librdkafka's mock cluster. The raw
// producer runs unmodified kafkajs in a worker thread (bench/kafka-raw.ts): the sink's kafkajs
// fixes change the module cache of the process they load in. Sink and raw sends alternate batch
// by batch (one runs while the other waits), each timed where it runs; figures are medians of
// per-batch messages/s. Nothing is read back; the mock keeps 5 MiB per partition, so the run
// checks nothing was evicted.

const BATCH = Number(process.env.BENCH_BATCH ?? 500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 40);
const PARTITIONS = 64;
const COMPRESSION = process.env.BENCH_KAFKA_COMPRESSION === 'gzip' ? 'gzip' : 'none';
const WARMUP = 2;

async function main(): Promise<void> {
  const mock = await startKafka({
    topics: [`bench-sink:${PARTITIONS}`, `bench-raw:${PARTITIONS}`],
  });
  const config = parseKafkaSinkConfig({
    brokers: mock.brokers,
    topic: 'bench-sink',
    compression: COMPRESSION,
  });
  const sink = createKafkaSink({ config, logger: createLogger('silent') });
  const kafka = new Kafka({ brokers: config.brokers, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  const batches = recordBatches(BATCH, WARMUP + ROUNDS);
  const setup: RawSetup = {
    brokers: config.brokers,
    clientId: config.clientId,
    topic: 'bench-raw',
    connectionTimeoutMs: config.connectionTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    allowAutoTopicCreation: config.allowAutoTopicCreation,
    maxInFlightRequests: config.maxInFlightRequests,
    gzip: config.compression === 'gzip',
    messages: batches.map((batch) => encodeMessages(batch)),
  };
  const raw = new Worker(new URL('./kafka-raw.ts', import.meta.url), { workerData: setup });
  try {
    const [ready] = await once(raw, 'message');
    if (ready !== 'ready') throw new Error(`raw producer: ${ready}`);
    const sendRaw = async (i: number): Promise<number> => {
      raw.postMessage({ batch: i });
      const [ms] = await once(raw, 'message');
      return ms as number;
    };
    const sendSink = async (i: number): Promise<number> => {
      const t0 = performance.now();
      await sink.write(batches[i]);
      return performance.now() - t0;
    };
    for (let i = 0; i < WARMUP; i++) {
      await sendSink(i);
      await sendRaw(i);
    }

    // Alternating which goes first, so drift hits both.
    const sinkRates: number[] = [];
    const rawRates: number[] = [];
    const rate = (ms: number) => BATCH / (ms / 1000);
    for (let r = 0; r < ROUNDS; r++) {
      const i = WARMUP + r;
      if (r % 2 === 0) {
        sinkRates.push(rate(await sendSink(i)));
        rawRates.push(rate(await sendRaw(i)));
      } else {
        rawRates.push(rate(await sendRaw(i)));
        sinkRates.push(rate(await sendSink(i)));
      }
    }

    // Both topics must hold every message, none evicted by the mock's 5 MiB per partition.
    await admin.connect();
    const stored: number[] = [];
    const evicted: string[] = [];
    for (const topic of ['bench-sink', 'bench-raw']) {
      const offsets = await admin.fetchTopicOffsets(topic);
      stored.push(offsets.reduce((n, o) => n + Number(o.high), 0));
      for (const o of offsets) if (o.low !== '0') evicted.push(`${topic}/${o.partition}`);
    }
    const expected = BATCH * (WARMUP + ROUNDS);
    if (stored[0] !== expected || stored[1] !== expected) {
      throw new Error(`expected ${expected} messages per topic, found ${stored.join(' / ')}`);
    }

    const avgBytes = batches.reduce((n, b) => n + b.bytes, 0) / batches.length;
    const k = (n: number) => Math.round(n);
    process.stdout.write(
      `librdkafka mock cluster; ${ROUNDS} batches of ${BATCH} messages each way (${(avgBytes / 2 ** 20).toFixed(2)} MiB of values per batch), ` +
        `acks=-1, compression ${COMPRESSION}, ${PARTITIONS} partitions, alternating\n\n`,
    );
    const { value, baseline } = printRateComparison(
      'messages/s',
      { label: 'project sink (createKafkaSink)', rates: sinkRates },
      { label: 'raw kafkajs producer.send', rates: rawRates },
    );
    process.stdout.write(
      `messages stored: ${stored.join(' / ')} (sink / raw); evicted partitions: ${evicted.length ? evicted.join(', ') : 'none'}\n` +
        'Goal: ratio >= 1.0.\n\n',
    );
    report(
      {
        bench: 'kafka',
        value: k(value),
        unit: 'messages/s',
        baseline: k(baseline),
        ratio: ratioOf(value, baseline),
        spread: spreadOf(sinkRates.map((rate, i) => rate / rawRates[i])),
      },
      [],
    );
  } finally {
    await admin.disconnect().catch(() => {});
    raw.postMessage('close');
    await once(raw, 'exit').catch(() => {});
    await sink.close().catch(() => {});
    await mock.close();
  }
}

await main();
