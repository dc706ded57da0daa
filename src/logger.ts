import pino, { type DestinationStream } from 'pino';

// Fastify's request serializer logs method, url, host and peer, never headers or bodies; keep it
// so. These paths are the backstop for objects that may hold a secret when someone logs them.
// pino's `*` stands for exactly one level, so each depth that occurs in the code is listed.
const REDACT = [
  // The bearer token (API key or ingest token) if a request or its headers are ever logged.
  'req.headers.authorization',
  'headers.authorization',
  'requestHeader.authorization',
  // Secret-named fields at the top level and one level down (`{ token }`, `{ config: { … } }`).
  'token',
  'password',
  'secret',
  '*.token',
  '*.password',
  '*.secret',
  '*.aws_secret_access_key',
  '*.sasl',
  // A destination's stored target (DestinationConfig, a row) and a sink's parsed settings.
  'target.kafka.sasl.password',
  'target.clickhouse.password',
  '*.target.kafka.sasl.password',
  '*.target.clickhouse.password',
  // PGlite errors carry the failed query's parameters (a target with its password, say), and a
  // 5xx logs the thrown error as `err`. A cause is serialized into `stack` only, without them.
  'err.params',
];

/** The service's structured JSON logger; `destination` defaults to stdout (tests capture it). */
export function createLogger(level: string, destination?: DestinationStream) {
  const options = { level, redact: { paths: REDACT, censor: '[redacted]' } };
  return destination === undefined ? pino(options) : pino(options, destination);
}

/** The logger type passed to every component. */
export type Logger = ReturnType<typeof createLogger>;
