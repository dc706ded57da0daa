import { CompressionTypes, Kafka, logLevel, Partitioners } from 'kafkajs';
import { createLogger } from '../src/logger.ts';
import { encodeMessages } from '../src/sinks/kafka/encode.ts';
import { parseKafkaSinkConfig } from '../src/sinks/kafka/index.ts';
import { createKafkaSink } from '../src/sinks/kafka/sink.ts';
import { startKafka } from '../test/helpers/kafka.ts';
import { recordBatches } from './lib/records.ts';
import { printRateComparison, report } from './lib/report.ts';
import { alternateRounds } from './lib/rounds.ts';
import { spreadOf } from './lib/spread.ts';
import { ratioOf } from './lib/stats.ts';

// Messages/s of the project's Kafka sink (createKafkaSink: worker-made envelope records → keyed
// messages with headers → producer.send, acks=-1) against a raw kafkajs producer.send of the
// identical messages (precomputed with the sink's own encoder outside the timed section) with the
// same producer settings, compression and batch size, on librdkafka's mock cluster. Sink and raw
// sends alternate batch by batch; figures are medians of per-batch messages/s. Nothing is read
// back; the mock keeps 5 MiB per partition, so the run checks nothing was evicted.

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
  // The sink's client and producer settings (src/sinks/kafka/sink.ts), minus its logger.
  const retry = { retries: 2, initialRetryTime: 100, maxRetryTime: 1_000 };
  const kafka = new Kafka({
    clientId: config.clientId,
    brokers: config.brokers,
    connectionTimeout: config.connectionTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    retry,
    logLevel: logLevel.NOTHING,
  });
  const producer = kafka.producer({
    allowAutoTopicCreation: config.allowAutoTopicCreation,
    maxInFlightRequests: config.maxInFlightRequests,
    idempotent: false,
    createPartitioner: Partitioners.DefaultPartitioner,
    retry,
  });
  const admin = kafka.admin();
  try {
    await producer.connect();
    const batches = recordBatches(BATCH, WARMUP + ROUNDS);
    const messages = batches.map((batch) => encodeMessages(batch));
    const compression =
      config.compression === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None;
    const sendRaw = (i: number) =>
      producer.send({
        topic: 'bench-raw',
        acks: -1,
        timeout: config.requestTimeoutMs,
        compression,
        messages: messages[i],
      });
    for (let i = 0; i < WARMUP; i++) {
      await sink.write(batches[i]);
      await sendRaw(i);
    }

    const { projectRates: sinkRates, baselineRates: rawRates } = await alternateRounds({
      rounds: ROUNDS,
      start: WARMUP,
      batchSize: BATCH,
      project: (i) => sink.write(batches[i]),
      baseline: sendRaw,
    });

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
        'Goal: ratio >= 0.8.\n\n',
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
    await producer.disconnect().catch(() => {});
    await sink.close().catch(() => {});
    await mock.close();
  }
}

await main();
