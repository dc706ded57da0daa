import { Producer } from '@platformatic/kafka';
import { parseKafkaSinkConfig } from '../src/data-plane/sinks/kafka/config.ts';
import { encodeMessages } from '../src/data-plane/sinks/kafka/encode.ts';
import { createKafkaSink, producerOptions } from '../src/data-plane/sinks/kafka/sink.ts';
import { batchOf, RecordBlock } from '../src/data-plane/sinks/record-block.ts';
import type { Batch } from '../src/data-plane/sinks/types.ts';
import { createLogger } from '../src/shared/logger.ts';
import { readTopic, startKafka } from '../test/helpers/kafka.ts';
import { recordBatches } from './lib/records.ts';
import { printRateComparison, report } from './lib/report.ts';
import { spreadOf } from './lib/spread.ts';
import { median, ratioOf } from './lib/stats.ts';

// Messages/s of the project's Kafka sink (createKafkaSink: worker-made envelope records → keyed
// messages with headers → producer.send, acks=-1) against a raw @platformatic/kafka
// producer.send of the identical messages with the sink's producer settings, on librdkafka's
// mock cluster. The raw messages are made by the sink's own encoder just before each send,
// outside the timed section, less the partition it computes: the client's partitioner places
// them, as for any user. The baseline is the faster of the two clients measured for issue 27
// (docs/decisions.md#kafka-client): 2–3× raw kafkajs. Sink and raw sends alternate batch by
// batch in this thread, each timed alone; figures are medians of per-batch messages/s and of
// CPU µs per message. The run reads both topics back (kcat) and checks they hold the same
// messages in the same partitions, none evicted by the mock's 5 MiB per partition.

const BATCH = Number(process.env.BENCH_BATCH ?? 500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 40);
const PARTITIONS = 64;
const COMPRESSION = process.env.BENCH_KAFKA_COMPRESSION === 'gzip' ? 'gzip' : 'none';
const WARMUP = 2;

// In the service a batch's blocks are views of the workers' shared-memory slabs, which the sink
// copies (RecordBlock.detached): the bench's batches are laid out the same way.
function inSharedMemory(batch: Batch): Batch {
  const shared = (bytes: Uint8Array) => {
    const copy = Buffer.from(new SharedArrayBuffer(bytes.byteLength));
    copy.set(bytes);
    return copy;
  };
  return batchOf(
    batch.blocks.map((block) => {
      const parts = block.parts();
      return new RecordBlock({ ...parts, text: shared(parts.text), meta: shared(parts.meta) });
    }),
  );
}

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
  const raw = new Producer(producerOptions(config));
  const batches = recordBatches(BATCH, WARMUP + ROUNDS).map(inSharedMemory);
  // What a user of the client hands it: topic, key, value, headers; its partitioner places them.
  // Made just before each send (untimed), fresh in memory as the sink's are, and as much garbage.
  const rawMessages = (i: number) => {
    const messages = encodeMessages(batches[i], 'bench-raw');
    for (const message of messages) message.partition = undefined;
    return messages;
  };
  try {
    // Wall time sets the rate; the process's CPU time per message (this thread, GC and libuv's
    // threads: gzip) is a second view, less at the mercy of other processes' load.
    const sinkRates: number[] = [];
    const rawRates: number[] = [];
    const sinkCpu: number[] = [];
    const rawCpu: number[] = [];
    const timed = async (send: () => Promise<unknown>, rates: number[], cpu: number[]) => {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      await send();
      rates.push(BATCH / ((performance.now() - t0) / 1000));
      const { user, system } = process.cpuUsage(c0);
      cpu.push((user + system) / BATCH);
    };
    const sendRaw = (i: number) => {
      const messages = rawMessages(i);
      return timed(() => raw.send({ messages }), rawRates, rawCpu);
    };
    const sendSink = (i: number) => timed(() => sink.write(batches[i]), sinkRates, sinkCpu);
    for (let i = 0; i < WARMUP; i++) {
      await sendSink(i);
      await sendRaw(i);
    }
    for (const series of [sinkRates, rawRates, sinkCpu, rawCpu]) series.length = 0;

    // Alternating which goes first, so drift hits both.
    for (let r = 0; r < ROUNDS; r++) {
      const i = WARMUP + r;
      if (r % 2 === 0) {
        await sendSink(i);
        await sendRaw(i);
      } else {
        await sendRaw(i);
        await sendSink(i);
      }
    }

    // Both topics must hold every message (readTopic throws if the mock evicted any), the same
    // ones in the same partitions: key, value and headers byte for byte.
    const expected = BATCH * (WARMUP + ROUNDS);
    const stored: string[][] = [];
    for (const topic of ['bench-sink', 'bench-raw']) {
      const messages = await readTopic(mock.brokers, topic, expected, 30_000);
      stored.push(messages.map((m) => JSON.stringify([m.partition, m.key, m.value, m.headers])));
    }
    if (stored[0].length !== expected || stored[1].length !== expected) {
      throw new Error(
        `expected ${expected} messages per topic, found ${stored[0].length} / ${stored[1].length}`,
      );
    }
    if (stored[0].sort().join('\n') !== stored[1].sort().join('\n')) {
      throw new Error('the sink and the raw client stored different messages or partitions');
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
      { label: 'raw @platformatic/kafka producer.send', rates: rawRates },
    );
    process.stdout.write(
      `CPU per message, median of batches: sink ${median(sinkCpu).toFixed(2)} µs, raw ` +
        `${median(rawCpu).toFixed(2)} µs (raw/sink ${(median(rawCpu) / median(sinkCpu)).toFixed(3)})\n` +
        `messages stored: ${expected} / ${expected} (sink / raw), identical, in the same partitions; ` +
        'evicted partitions: none\n' +
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
    await raw.close().catch(() => {});
    await sink.close().catch(() => {});
    await mock.close();
  }
}

await main();
