/** SASL mechanisms kafkajs implements without plugins. */
export type KafkaSaslMechanism = 'plain' | 'scram-sha-256' | 'scram-sha-512';

/** A Kafka destination's settings as configured (names as in the destination resource). */
export interface KafkaSinkSettings {
  brokers: string[];
  topic: string;
  client_id?: string;
  /** kafkajs ships gzip only; snappy/lz4/zstd would need codec packages. */
  compression?: 'none' | 'gzip';
  sasl?: { mechanism: KafkaSaslMechanism; username: string; password: string };
  /** true: TLS with the system CAs; an object: PEM CA/cert/key and verification switch. */
  tls?: boolean | { ca?: string; cert?: string; key?: string; reject_unauthorized?: boolean };
  max_in_flight_requests?: number;
  /** Whether a missing topic is created by the broker (then unknown-topic errors are retried). */
  allow_auto_topic_creation?: boolean;
  request_timeout_ms?: number;
  connection_timeout_ms?: number;
}

/** TLS options handed to kafkajs (node tls.connect options). */
export interface KafkaTlsConfig {
  ca?: string;
  cert?: string;
  key?: string;
  rejectUnauthorized: boolean;
}

/** Validated settings with defaults filled in. */
export interface KafkaSinkConfig {
  brokers: string[];
  topic: string;
  clientId: string;
  compression: 'none' | 'gzip';
  sasl?: { mechanism: KafkaSaslMechanism; username: string; password: string };
  tls?: KafkaTlsConfig;
  maxInFlightRequests: number;
  allowAutoTopicCreation: boolean;
  requestTimeoutMs: number;
  connectionTimeoutMs: number;
}

/** A Kafka destination whose settings cannot be used; the message names the setting. */
export class KafkaSinkConfigError extends Error {
  constructor(message: string) {
    super(`kafka destination: ${message}`);
    this.name = 'KafkaSinkConfigError';
  }
}

const BROKER = /^[A-Za-z0-9.-]+:\d{1,5}$|^\[[0-9A-Fa-f:.]+\]:\d{1,5}$/;
const TOPIC = /^[A-Za-z0-9._-]{1,249}$/;
const MECHANISMS = new Set<string>(['plain', 'scram-sha-256', 'scram-sha-512']);

function int(value: number | undefined, fallback: number, min: number, max: number, name: string) {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new KafkaSinkConfigError(`${name} must be an integer in ${min}..${max}`);
  }
  return value;
}

function parseTls(tls: KafkaSinkSettings['tls']): KafkaTlsConfig | undefined {
  if (tls === undefined || tls === false) return undefined;
  if (tls === true) return { rejectUnauthorized: true };
  return {
    ca: tls.ca,
    cert: tls.cert,
    key: tls.key,
    rejectUnauthorized: tls.reject_unauthorized ?? true,
  };
}

/**
 * Validates settings. In-flight requests default to 1: with producer retries, more than one
 * request in flight per broker can reorder a partition, and the destination promises order.
 */
export function parseKafkaSinkConfig(settings: KafkaSinkSettings): KafkaSinkConfig {
  const { brokers, topic, sasl } = settings;
  if (!Array.isArray(brokers) || brokers.length === 0 || !brokers.every((b) => BROKER.test(b))) {
    throw new KafkaSinkConfigError('brokers must be a non-empty list of host:port');
  }
  if (typeof topic !== 'string' || !TOPIC.test(topic) || topic === '.' || topic === '..') {
    throw new KafkaSinkConfigError('topic must be 1-249 characters of [A-Za-z0-9._-]');
  }
  const compression = settings.compression ?? 'none';
  if (compression !== 'none' && compression !== 'gzip') {
    throw new KafkaSinkConfigError('compression must be none or gzip');
  }
  if (sasl !== undefined) {
    if (!MECHANISMS.has(sasl.mechanism)) {
      throw new KafkaSinkConfigError(
        'sasl.mechanism must be plain, scram-sha-256 or scram-sha-512',
      );
    }
    if (!sasl.username || typeof sasl.password !== 'string') {
      throw new KafkaSinkConfigError('sasl needs username and password');
    }
  }
  return {
    brokers: [...brokers],
    topic,
    clientId: settings.client_id ?? 'agent-ingress',
    compression,
    sasl: sasl ? { ...sasl } : undefined,
    tls: parseTls(settings.tls),
    maxInFlightRequests: int(settings.max_in_flight_requests, 1, 1, 5, 'max_in_flight_requests'),
    allowAutoTopicCreation: settings.allow_auto_topic_creation ?? false,
    requestTimeoutMs: int(settings.request_timeout_ms, 30_000, 100, 300_000, 'request_timeout_ms'),
    connectionTimeoutMs: int(
      settings.connection_timeout_ms,
      3_000,
      100,
      60_000,
      'connection_timeout_ms',
    ),
  };
}
