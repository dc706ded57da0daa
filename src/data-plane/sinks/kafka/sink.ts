import {
  AuthenticationError,
  compatibilityPartitioner,
  NetworkError,
  ProduceAcks,
  Producer,
  type ProducerOptions,
  type SASLMechanismValue,
  TimeoutError,
} from '@platformatic/kafka';
import type { Logger } from '../../../shared/logger.ts';
import { withSinkContract } from '../contract.ts';
import { type Sink, SinkError } from '../types.ts';
import { BatchMemory, sharedBytes } from './batch-memory.ts';
import type { KafkaSaslMechanism, KafkaSinkConfig } from './config.ts';
import { encodeMessages } from './encode.ts';

/** What the Kafka sink needs: its validated settings and the service logger. */
export interface KafkaSinkDeps {
  config: KafkaSinkConfig;
  logger: Logger;
}

// Protocol errors no retry can fix: the destination parks and shows the error.
const PERMANENT_ERRORS = new Set([
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_RECORD',
  'TOPIC_AUTHORIZATION_FAILED',
  'CLUSTER_AUTHORIZATION_FAILED',
  'TRANSACTIONAL_ID_AUTHORIZATION_FAILED',
  'SASL_AUTHENTICATION_FAILED',
  'ILLEGAL_SASL_STATE',
  'UNSUPPORTED_SASL_MECHANISM',
  'INVALID_TOPIC_EXCEPTION',
  'INVALID_REQUIRED_ACKS',
  'UNSUPPORTED_VERSION',
  'UNSUPPORTED_COMPRESSION_TYPE',
  'POLICY_VIOLATION',
]);

interface KafkaErrorLike {
  apiId?: string;
  canRetry?: boolean;
  errors?: unknown[];
  cause?: unknown;
  message?: string;
}

// The client nests: MultipleErrors (retries, brokers) → errors[] → ProtocolError or NetworkError
// → cause (the socket's error). Depth first, the outermost first.
function flatten(err: unknown, out: KafkaErrorLike[] = []): KafkaErrorLike[] {
  if (!err || typeof err !== 'object' || out.includes(err) || out.length >= 32) return out;
  const e = err as KafkaErrorLike;
  out.push(e);
  for (const inner of e.errors ?? []) flatten(inner, out);
  flatten(e.cause, out);
  return out;
}

/**
 * Maps a client error to a SinkError: authentication, authorization, too-large and invalid-topic
 * errors are permanent, as is an unknown topic when the broker will not create it; network and
 * timeout errors are retriable (the cluster is not there yet); otherwise what the client says of
 * its innermost error decides.
 */
export function kafkaSinkError(err: unknown, allowAutoTopicCreation: boolean): SinkError {
  if (err instanceof SinkError) return err;
  const errors = flatten(err);
  const innermost = errors.at(-1);
  // The broker's error name leads: its descriptions do not always say what went wrong.
  const message = `kafka: ${innermost?.apiId ? `${innermost.apiId}: ` : ''}${innermost?.message ?? String(err)}`;
  const permanent = errors.some(
    (e) =>
      e instanceof AuthenticationError ||
      PERMANENT_ERRORS.has(e.apiId ?? '') ||
      (e.apiId === 'UNKNOWN_TOPIC_OR_PARTITION' && !allowAutoTopicCreation),
  );
  if (permanent) return new SinkError(message, false, { cause: err });
  const transient = errors.some((e) => e instanceof NetworkError || e instanceof TimeoutError);
  const retriable = transient || innermost?.canRetry !== false;
  return new SinkError(message, retriable, { cause: err });
}

const SASL_MECHANISMS = {
  plain: 'PLAIN',
  'scram-sha-256': 'SCRAM-SHA-256',
  'scram-sha-512': 'SCRAM-SHA-512',
} as const satisfies Record<KafkaSaslMechanism, SASLMechanismValue>;

// A few quick retries ride out a leader election; longer outages belong to the spool.
const RETRIES = 2;
const retryDelay = (_client: unknown, _operation: string, attempt: number) =>
  Math.min(100 * 2 ** (attempt - 1), 1_000);

/** The producer settings of a destination (bench:kafka gives its raw baseline the same). */
export function producerOptions(
  config: KafkaSinkConfig,
): ProducerOptions<Buffer, Buffer, Buffer, Buffer> {
  const { tls, sasl } = config;
  return {
    clientId: config.clientId,
    bootstrapBrokers: config.brokers,
    tls: tls ? { ...tls } : undefined,
    sasl: sasl
      ? {
          mechanism: SASL_MECHANISMS[sasl.mechanism],
          username: sasl.username,
          password: sasl.password,
        }
      : undefined,
    connectTimeout: config.connectionTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    // The broker's own wait for the replicas' acknowledgement (acks=all).
    timeout: config.requestTimeoutMs,
    retries: RETRIES,
    retryDelay,
    maxInflights: config.maxInFlightRequests,
    acks: ProduceAcks.ALL,
    idempotent: false,
    compression: config.compression,
    autocreateTopics: config.allowAutoTopicCreation,
    // Java's client's partitioner, which kafkajs used too: a key keeps the partition it had.
    partitioner: compatibilityPartitioner,
  };
}

/** Builds the Kafka sink: connects on first write, reconnects after a failure, acks from all replicas. */
export function createKafkaSink(deps: KafkaSinkDeps): Sink {
  const { config } = deps;
  const log = deps.logger.child({ sink: 'kafka', topic: config.topic });
  const options = producerOptions(config);
  let producer: Producer | undefined;
  const memory = new BatchMemory();

  function current(): Producer {
    if (producer) return producer;
    const p = new Producer({ ...options });
    // Broker hiccups go to debug; the destination reports state changes.
    p.on('client:broker:failed', (event?: { broker?: { host: string; port: number } }) =>
      log.debug({ broker: event?.broker }, 'kafka broker connection failed'),
    );
    producer = p;
    return p;
  }

  // A fresh producer next time: stale broker connections and metadata go with the old one.
  function reset(): void {
    const p = producer;
    producer = undefined;
    p?.close().catch(() => {});
  }

  return withSinkContract('kafka', {
    async write(batch) {
      const bytes = memory.take(sharedBytes(batch.blocks));
      try {
        await current().send({ messages: encodeMessages(batch, config.topic, bytes) });
        // Acknowledged: the client is done with the copies (not so after a failure).
        memory.give(bytes);
      } catch (err) {
        const mapped = kafkaSinkError(err, config.allowAutoTopicCreation);
        if (mapped.retriable) reset();
        throw mapped;
      }
    },
    async close() {
      const p = producer;
      producer = undefined;
      await p?.close();
    },
  });
}
