import pino from 'pino';

/** Fields that may hold a secret; pino replaces them wherever they appear in a log line. */
const REDACT = [
  'req.headers.authorization',
  '*.token',
  '*.password',
  '*.secret',
  '*.aws_secret_access_key',
  '*.sasl',
];

/** The service's structured JSON logger. */
export function createLogger(level: string) {
  return pino({ level, redact: { paths: REDACT, censor: '[redacted]' } });
}

/** The logger type passed to every component. */
export type Logger = ReturnType<typeof createLogger>;
