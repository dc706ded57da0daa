import { integer, object, type Settings, SinkConfigError, secret, setting } from '../settings.ts';

/** SASL mechanisms a destination may use (the client also has OAUTHBEARER and GSSAPI, not offered). */
export type KafkaSaslMechanism = 'plain' | 'scram-sha-256' | 'scram-sha-512';

const string = (description: string) => ({ type: 'string', description });
const milliseconds = (min: number, max: number, fallback: number, description: string) => ({
  type: 'number',
  minimum: min,
  maximum: max,
  default: fallback,
  description,
});

/** A Kafka destination's settings. */
export const KAFKA_SETTINGS = object(
  {
    brokers: { type: 'array', items: { type: 'string' }, description: '"host:port" strings' },
    topic: string('1-249 characters of [A-Za-z0-9._-]'),
    client_id: { ...string('client id the brokers see'), default: 'agent-ingress' },
    compression: {
      enum: ['none', 'gzip'],
      default: 'none',
      // The client also has snappy, lz4 and zstd: offering them would change only this file.
      description: 'record batch compression',
    },
    sasl: object(
      {
        mechanism: { enum: ['plain', 'scram-sha-256', 'scram-sha-512'] },
        username: string('SASL user'),
        ...secret('password', 'SASL password'),
      },
      ['mechanism', 'username'],
    ),
    tls: {
      type: ['boolean', 'object'],
      properties: {
        ca: string('PEM CA certificates to trust instead of the system ones'),
        cert: string('PEM client certificate'),
        ...secret('key', 'PEM private key of the client certificate'),
        reject_unauthorized: {
          type: 'boolean',
          default: true,
          description: 'false: accept any broker certificate (tests only)',
        },
      },
      additionalProperties: false,
      description: 'true: TLS with the system CAs; an object: PEM CA, client certificate and key',
    },
    // With producer retries, more than one request in flight per broker can reorder a
    // partition, and the destination promises order: 1 unless order does not matter.
    max_in_flight_requests: { type: 'number', minimum: 1, maximum: 5, default: 1 },
    allow_auto_topic_creation: {
      type: 'boolean',
      default: false,
      description:
        'whether the broker creates a missing topic (then unknown-topic errors are retried)',
    },
    request_timeout_ms: milliseconds(100, 300_000, 30_000, 'how long a produce request may take'),
    connection_timeout_ms: milliseconds(100, 60_000, 3_000, 'how long connecting may take'),
  },
  ['brokers', 'topic'],
);
/** TLS options handed to the client (node tls.connect options). */
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

const fail = (message: string, setting: string) => new SinkConfigError('kafka', message, setting);
const int = (settings: Settings, name: string) => integer('kafka', KAFKA_SETTINGS, settings, name);

const BROKER = /^[A-Za-z0-9.-]+:\d{1,5}$|^\[[0-9A-Fa-f:.]+\]:\d{1,5}$/;
const TOPIC = /^[A-Za-z0-9._-]{1,249}$/;

function parseTls(tls: unknown): KafkaTlsConfig | undefined {
  if (tls === undefined || tls === false) return undefined;
  if (tls === true) return { rejectUnauthorized: true };
  const pem = tls as Record<string, string | boolean | undefined>;
  for (const name of ['ca', 'cert', 'key'] as const) {
    const value = pem[name];
    if (value !== undefined && !/-----BEGIN [A-Z0-9 ]+-----/.test(value as string)) {
      throw fail(`tls.${name} must be PEM text`, `tls.${name}`);
    }
  }
  if ((pem.cert === undefined) !== (pem.key === undefined)) {
    throw fail('tls.cert and tls.key go together', 'tls');
  }
  return {
    ca: pem.ca as string | undefined,
    cert: pem.cert as string | undefined,
    key: pem.key as string | undefined,
    rejectUnauthorized: pem.reject_unauthorized !== false,
  };
}

function parseSasl(sasl: unknown): KafkaSinkConfig['sasl'] {
  if (sasl === undefined) return undefined;
  const { mechanism, username, password } = sasl as Record<string, string | undefined>;
  if (!['plain', 'scram-sha-256', 'scram-sha-512'].includes(mechanism as string)) {
    throw fail('sasl.mechanism must be plain, scram-sha-256 or scram-sha-512', 'sasl.mechanism');
  }
  if (typeof username !== 'string' || username === '') {
    throw fail('sasl.username must be a non-empty string', 'sasl.username');
  }
  if (typeof password !== 'string') throw fail('sasl.password is required', 'sasl.password');
  return { mechanism: mechanism as KafkaSaslMechanism, username, password };
}

/** Validates settings (the schema gives defaults and bounds). */
export function parseKafkaSinkConfig(settings: Settings): KafkaSinkConfig {
  const { brokers, topic } = settings;
  if (
    !Array.isArray(brokers) ||
    brokers.length === 0 ||
    !brokers.every((b) => typeof b === 'string' && BROKER.test(b))
  ) {
    throw fail('brokers must be a non-empty list of host:port', 'brokers');
  }
  if (typeof topic !== 'string' || !TOPIC.test(topic) || topic === '.' || topic === '..') {
    throw fail('topic must be 1-249 characters of [A-Za-z0-9._-]', 'topic');
  }
  const compression = setting<string>(KAFKA_SETTINGS, settings, 'compression');
  if (compression !== 'none' && compression !== 'gzip') {
    throw fail('compression must be none or gzip', 'compression');
  }
  return {
    brokers: [...brokers],
    topic,
    clientId: setting(KAFKA_SETTINGS, settings, 'client_id'),
    compression,
    sasl: parseSasl(settings.sasl),
    tls: parseTls(settings.tls),
    maxInFlightRequests: int(settings, 'max_in_flight_requests'),
    allowAutoTopicCreation: setting(KAFKA_SETTINGS, settings, 'allow_auto_topic_creation'),
    requestTimeoutMs: int(settings, 'request_timeout_ms'),
    connectionTimeoutMs: int(settings, 'connection_timeout_ms'),
  };
}
