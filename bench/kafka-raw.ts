import { parentPort, workerData } from 'node:worker_threads';
import { CompressionTypes, Kafka, logLevel, type Message, Partitioners } from 'kafkajs';
import { patchRequestQueue } from '../src/data-plane/sinks/kafka/request-queue-fix.ts';

// bench:kafka's baseline, in a worker thread of its own: kafkajs exactly as published. The sink
// in the main thread runs with its kafkajs fixes (src/data-plane/sinks/kafka/*-fix.ts), which change
// kafkajs's module cache process-wide, so the raw producer needs a module registry they have not
// touched. It does get the idle-timer fix (request-queue-fix.ts): without it each connection
// runs a 1 ms timer loop that would take CPU from the sink between sends. On {batch: i} it sends messages[i] and answers with the send's milliseconds, timed
// here so the thread hop is not counted.

export interface RawSetup {
  brokers: string[];
  clientId: string;
  topic: string;
  connectionTimeoutMs: number;
  requestTimeoutMs: number;
  allowAutoTopicCreation: boolean;
  maxInFlightRequests: number | undefined;
  gzip: boolean;
  messages: Message[][];
}

patchRequestQueue();
const setup = workerData as RawSetup;
// Values cross to this thread as Uint8Arrays; kafkajs wants the Buffers the sink gives it.
for (const batch of setup.messages) {
  for (const message of batch) {
    const value = message.value as Uint8Array | string | null;
    if (value instanceof Uint8Array && !Buffer.isBuffer(value)) {
      message.value = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    }
  }
}
// The sink's client and producer settings (src/data-plane/sinks/kafka/sink.ts), minus its logger.
const retry = { retries: 2, initialRetryTime: 100, maxRetryTime: 1_000 };
const kafka = new Kafka({
  clientId: setup.clientId,
  brokers: setup.brokers,
  connectionTimeout: setup.connectionTimeoutMs,
  requestTimeout: setup.requestTimeoutMs,
  retry,
  logLevel: logLevel.NOTHING,
});
const producer = kafka.producer({
  allowAutoTopicCreation: setup.allowAutoTopicCreation,
  maxInFlightRequests: setup.maxInFlightRequests,
  idempotent: false,
  createPartitioner: Partitioners.DefaultPartitioner,
  retry,
});
await producer.connect();
const port = parentPort!;
port.on('message', async (command: { batch: number } | 'close') => {
  if (command === 'close') {
    await producer.disconnect();
    port.close();
    return;
  }
  const t0 = performance.now();
  await producer.send({
    topic: setup.topic,
    acks: -1,
    timeout: setup.requestTimeoutMs,
    compression: setup.gzip ? CompressionTypes.GZIP : CompressionTypes.None,
    messages: setup.messages[command.batch],
  });
  port.postMessage(performance.now() - t0);
});
port.postMessage('ready');
