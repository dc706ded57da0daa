import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { compatibilityPartitioner, ProduceAcks, Producer } from '@platformatic/kafka';
import { Kafka, logLevel } from 'kafkajs';
import { parseKafkaSinkConfig } from '../src/data-plane/sinks/kafka/config.ts';
import { encodeMessages as encodeKafkajs } from '../src/data-plane/sinks/kafka/encode.ts';
import { encodeMessages as encodePlatformatic } from '../src/data-plane/sinks/kafka/encode-platformatic.ts';
import { createKafkaSink as kafkajsSink } from '../src/data-plane/sinks/kafka/sink.ts';
import { createKafkaSink as platformaticSink } from '../src/data-plane/sinks/kafka/sink-platformatic.ts';
import { createLogger } from '../src/shared/logger.ts';
import { startKafka } from '../test/helpers/kafka.ts';
import type { RawSetup } from './kafka-raw.ts';
import { recordBatches } from './lib/records.ts';
import { median } from './lib/stats.ts';

// One-off comparison of the two Kafka clients (issue 27): in one run, four arms send the same
// batches to four topics of one librdkafka mock cluster, one batch at a time, the arms' order
// rotating every round: the sink on kafkajs (with its fixes, this thread), raw kafkajs
// (unmodified, a worker thread, as bench:kafka's baseline was), the sink on @platformatic/kafka
// and raw @platformatic/kafka producer.send (this thread; messages precomputed with the sink's
// encoder). Prints per-arm medians of messages/s and the per-round ratios' spread as JSON.

const BATCH = Number(process.env.BENCH_BATCH ?? 500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 40);
const PARTITIONS = 64;
const COMPRESSION = process.env.BENCH_KAFKA_COMPRESSION === 'gzip' ? 'gzip' : 'none';
const WARMUP = 2;
const ARMS = ['kafkajs-sink', 'kafkajs-raw', 'platformatic-sink', 'platformatic-raw'] as const;
type Arm = (typeof ARMS)[number];

const mock = await startKafka({ topics: ARMS.map((arm) => `bench-${arm}:${PARTITIONS}`) });
const settings = (topic: string) =>
  parseKafkaSinkConfig({ brokers: mock.brokers, topic, compression: COMPRESSION });
const logger = createLogger('silent');
const sinks = {
  'kafkajs-sink': kafkajsSink({ config: settings('bench-kafkajs-sink'), logger }),
  'platformatic-sink': platformaticSink({ config: settings('bench-platformatic-sink'), logger }),
};
const config = settings('bench-platformatic-raw');
const batches = recordBatches(BATCH, WARMUP + ROUNDS);
const rawMessages = batches.map((batch) => encodePlatformatic(batch, 'bench-platformatic-raw'));
const producer = new Producer({
  clientId: config.clientId,
  bootstrapBrokers: config.brokers,
  connectTimeout: config.connectionTimeoutMs,
  requestTimeout: config.requestTimeoutMs,
  timeout: config.requestTimeoutMs,
  retries: 2,
  maxInflights: config.maxInFlightRequests,
  acks: ProduceAcks.ALL,
  compression: COMPRESSION,
  partitioner: compatibilityPartitioner,
});
const setup: RawSetup = {
  brokers: config.brokers,
  clientId: config.clientId,
  topic: 'bench-kafkajs-raw',
  connectionTimeoutMs: config.connectionTimeoutMs,
  requestTimeoutMs: config.requestTimeoutMs,
  allowAutoTopicCreation: false,
  maxInFlightRequests: config.maxInFlightRequests,
  gzip: COMPRESSION === 'gzip',
  messages: batches.map((batch) => encodeKafkajs(batch)),
};
const raw = new Worker(new URL('./kafka-raw.ts', import.meta.url), { workerData: setup });
const [ready] = await once(raw, 'message');
if (ready !== 'ready') throw new Error(`raw kafkajs: ${ready}`);

const timed = async (send: () => Promise<unknown>) => {
  const t0 = performance.now();
  await send();
  return performance.now() - t0;
};
const sendArm = async (arm: Arm, i: number): Promise<number> => {
  if (arm === 'kafkajs-raw') {
    raw.postMessage({ batch: i });
    const [ms] = await once(raw, 'message');
    return ms as number;
  }
  if (arm === 'platformatic-raw') return timed(() => producer.send({ messages: rawMessages[i] }));
  return timed(() => sinks[arm].write(batches[i]));
};

for (let i = 0; i < WARMUP; i++) for (const arm of ARMS) await sendArm(arm, i);
const rates: Record<Arm, number[]> = Object.fromEntries(ARMS.map((arm) => [arm, []])) as never;
for (let r = 0; r < ROUNDS; r++) {
  for (let k = 0; k < ARMS.length; k++) {
    const arm = ARMS[(r + k) % ARMS.length];
    rates[arm].push(BATCH / ((await sendArm(arm, WARMUP + r)) / 1000));
  }
}

const admin = new Kafka({ brokers: mock.brokers, logLevel: logLevel.NOTHING }).admin();
await admin.connect();
const stored: Record<string, number> = {};
for (const arm of ARMS) {
  const offsets = await admin.fetchTopicOffsets(`bench-${arm}`);
  if (offsets.some((o) => o.low !== '0')) throw new Error(`bench-${arm}: evicted`);
  stored[arm] = offsets.reduce((n, o) => n + Number(o.high), 0);
}
await admin.disconnect();
raw.postMessage('close');
await once(raw, 'exit');
await Promise.all([sinks['kafkajs-sink'].close(), sinks['platformatic-sink'].close()]);
await producer.close();
await mock.close();

const ratio = (a: Arm, b: Arm) => {
  const per = rates[a].map((rate, i) => rate / rates[b][i]).sort((x, y) => x - y);
  return { min: per[0], median: median(per), max: per.at(-1) };
};
const round = (n: number) => Math.round(n);
process.stdout.write(
  `${JSON.stringify({
    compression: COMPRESSION,
    batch: BATCH,
    rounds: ROUNDS,
    stored,
    medians: Object.fromEntries(ARMS.map((arm) => [arm, round(median(rates[arm]))])),
    'platformatic-raw / kafkajs-raw': ratio('platformatic-raw', 'kafkajs-raw'),
    'platformatic-sink / kafkajs-sink': ratio('platformatic-sink', 'kafkajs-sink'),
    'platformatic-sink / platformatic-raw': ratio('platformatic-sink', 'platformatic-raw'),
    'kafkajs-sink / kafkajs-raw': ratio('kafkajs-sink', 'kafkajs-raw'),
    'platformatic-sink / kafkajs-raw': ratio('platformatic-sink', 'kafkajs-raw'),
  })}\n`,
);
