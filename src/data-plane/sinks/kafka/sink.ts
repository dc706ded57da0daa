import {
  CompressionTypes,
  Kafka,
  type KafkaConfig,
  logLevel,
  Partitioners,
  type Producer,
  type SASLOptions,
} from 'kafkajs';
import type { Logger } from '../../../shared/logger.ts';
import { withSinkContract } from '../contract.ts';
import { type Sink, SinkError } from '../types.ts';
import type { KafkaSinkConfig } from './config.ts';
import { encodeMessages } from './encode.ts';
import { patchRecordEncoding } from './record-encoding-fix.ts';
import { patchRequestQueue } from './request-queue-fix.ts';

patchRequestQueue();
patchRecordEncoding();

/** What the Kafka sink needs: its validated settings and the service logger. */
export interface KafkaSinkDeps {
  config: KafkaSinkConfig;
  logger: Logger;
}

// Protocol errors no retry can fix: the destination parks and shows the error.
const PERMANENT_TYPES = new Set([
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

// kafkajs marks these non-retriable, yet for a sink they mean "the cluster is not there yet".
const TRANSIENT_NAMES = new Set([
  'KafkaJSConnectionError',
  'KafkaJSConnectionClosedError',
  'KafkaJSRequestTimeoutError',
  'KafkaJSNoBrokerAvailableError',
  'KafkaJSBrokerNotFound',
  'KafkaJSTimeout',
  'KafkaJSLockTimeout',
  'KafkaJSMetadataNotLoaded',
  'KafkaJSTopicMetadataNotLoaded',
  'KafkaJSStaleTopicMetadataAssignment',
]);

interface KafkaErrorLike {
  name?: string;
  type?: string;
  retriable?: boolean;
  cause?: unknown;
  originalError?: unknown;
}

// kafkajs wraps: NumberOfRetriesExceeded → cause → protocol or connection error.
function chain(err: unknown): KafkaErrorLike[] {
  const out: KafkaErrorLike[] = [];
  let e = err as KafkaErrorLike | undefined;
  while (e && typeof e === 'object' && !out.includes(e) && out.length < 10) {
    out.push(e);
    e = (e.cause ?? e.originalError) as KafkaErrorLike | undefined;
  }
  return out;
}

/**
 * Maps a kafkajs error to a SinkError: auth, authorization, too-large and invalid-topic errors
 * are permanent, as is an unknown topic when the broker will not create it; network, leader
 * and timeout errors are retriable; otherwise the innermost error's own `retriable` decides.
 */
export function kafkaSinkError(err: unknown, allowAutoTopicCreation: boolean): SinkError {
  if (err instanceof SinkError) return err;
  const errors = chain(err);
  const message = `kafka: ${
    errors
      .map((e) => (e as Error).message)
      .filter(Boolean)
      .at(-1) ?? String(err)
  }`;
  const permanent = errors.some(
    (e) =>
      PERMANENT_TYPES.has(e.type ?? '') ||
      e.name === 'KafkaJSSASLAuthenticationError' ||
      (e.type === 'UNKNOWN_TOPIC_OR_PARTITION' && !allowAutoTopicCreation),
  );
  if (permanent) return new SinkError(message, false, { cause: err });
  const transient = errors.some((e) => TRANSIENT_NAMES.has(e.name ?? ''));
  const innermost = errors.at(-1);
  const retriable = transient || innermost?.retriable !== false;
  return new SinkError(message, retriable, { cause: err });
}

// kafkajs logs every broker hiccup; they go to debug, the destination reports state changes.
function logCreator(logger: Logger): KafkaConfig['logCreator'] {
  return () =>
    ({ label, log }) => {
      const { message, ...rest } = log;
      logger.debug({ kafkajs: label, ...rest }, message);
    };
}

function kafkaConfig(config: KafkaSinkConfig, logger: Logger): KafkaConfig {
  const { tls, sasl } = config;
  return {
    clientId: config.clientId,
    brokers: config.brokers,
    ssl: tls ? { ...tls } : undefined,
    sasl: sasl ? ({ ...sasl } as SASLOptions) : undefined,
    connectionTimeout: config.connectionTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    // A few quick retries ride out a leader election; longer outages belong to the spool.
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1_000 },
    logLevel: logLevel.WARN,
    logCreator: logCreator(logger),
  };
}

/** Builds the Kafka sink: connects on first write, reconnects after a failure, acks from all replicas. */
export function createKafkaSink(deps: KafkaSinkDeps): Sink {
  const { config } = deps;
  const log = deps.logger.child({ sink: 'kafka', topic: config.topic });
  const kafka = new Kafka(kafkaConfig(config, log));
  const compression = config.compression === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None;
  let producer: Producer | undefined;
  let connecting: Promise<Producer> | undefined;

  function connect(): Promise<Producer> {
    if (connecting) return connecting;
    connecting = (async () => {
      const p = kafka.producer({
        allowAutoTopicCreation: config.allowAutoTopicCreation,
        maxInFlightRequests: config.maxInFlightRequests,
        idempotent: false,
        createPartitioner: Partitioners.DefaultPartitioner,
        retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1_000 },
      });
      p.on(p.events.DISCONNECT, () => {
        if (producer === p) reset();
      });
      try {
        await p.connect();
      } catch (err) {
        await p.disconnect().catch(() => {});
        throw err;
      }
      producer = p;
      return p;
    })();
    const attempt = connecting;
    attempt.catch(() => {
      if (connecting === attempt) connecting = undefined;
    });
    return attempt;
  }

  function reset(): void {
    const p = producer;
    producer = undefined;
    connecting = undefined;
    if (p) p.disconnect().catch(() => {});
  }

  return withSinkContract('kafka', {
    async write(batch) {
      try {
        const p = await connect();
        await p.send({
          topic: config.topic,
          acks: -1,
          timeout: config.requestTimeoutMs,
          compression,
          messages: encodeMessages(batch),
        });
      } catch (err) {
        const mapped = kafkaSinkError(err, config.allowAutoTopicCreation);
        // A fresh producer next time: stale broker connections and metadata go with the old one.
        if (mapped.retriable) reset();
        throw mapped;
      }
    },
    async close() {
      const pending = connecting;
      connecting = undefined;
      const p = producer ?? (await pending?.catch(() => undefined));
      producer = undefined;
      await p?.disconnect();
    },
  });
}
