import type { FastifyRequest } from 'fastify';
import pino, { type DestinationStream } from 'pino';

const CENSOR = '[redacted]';

// The request serializer logs method, URL, host and peer, never headers or bodies; keep it so.
// These paths are the backstop for objects that may hold a secret when someone logs them.
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

/**
 * A URL with every query value (or bare parameter) censored: clients put tokens in any
 * parameter (`?token=`, `?api_key=`, `?sig=`), and the names alone are enough to debug with.
 */
export function redactQuery(url: string): string {
  const start = url.indexOf('?');
  if (start < 0) return url;
  const params = url
    .slice(start + 1)
    .split('&')
    .map((param) => {
      const eq = param.indexOf('=');
      return eq < 0 ? CENSOR : `${param.slice(0, eq)}=${CENSOR}`;
    });
  return `${url.slice(0, start)}?${params.join('&')}`;
}

const redactUrl = (url: unknown) => (typeof url === 'string' ? redactQuery(url) : url);

// Fastify's own request serializer, but for the query string; any other logged `url` too.
const serializers = {
  req: (request: FastifyRequest) => ({
    method: request.method,
    url: redactUrl(request.url),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  }),
  url: redactUrl,
};

/** The service's structured JSON logger; `destination` defaults to stdout (tests capture it). */
export function createLogger(level: string, destination?: DestinationStream) {
  const options = { level, serializers, redact: { paths: REDACT, censor: CENSOR } };
  return destination === undefined ? pino(options) : pino(options, destination);
}

/** The logger type passed to every component. */
export type Logger = ReturnType<typeof createLogger>;
