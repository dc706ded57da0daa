/** A ClickHouse destination's settings as configured (names as in the destination resource). */
export interface ClickHouseSinkSettings {
  url: string;
  database?: string;
  table_prefix?: string;
  user?: string;
  password?: string;
  /** gzip the insert body; off by default (on loopback it costs CPU for no gain). */
  compression?: { request?: boolean };
  request_timeout_ms?: number;
}

/** Validated settings with defaults filled in. */
export interface ClickHouseSinkConfig {
  url: string;
  database: string;
  tablePrefix: string;
  user: string;
  password: string;
  requestCompression: boolean;
  requestTimeoutMs: number;
}

/** A ClickHouse destination whose settings cannot be used; the message names the setting. */
export class ClickHouseSinkConfigError extends Error {
  constructor(message: string) {
    super(`clickhouse destination: ${message}`);
    this.name = 'ClickHouseSinkConfigError';
  }
}

// Database and table names go into DDL: a plain identifier needs no escaping rules to be right.
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const PREFIX = /^[A-Za-z0-9_]*$/;

/** Validates settings: an http(s) URL, plain identifiers, a positive timeout. */
export function parseClickHouseSinkConfig(settings: ClickHouseSinkSettings): ClickHouseSinkConfig {
  let url: URL;
  try {
    url = new URL(settings.url);
  } catch {
    throw new ClickHouseSinkConfigError('url must be an absolute http(s) URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ClickHouseSinkConfigError('url must use http or https');
  }
  if (url.search || url.hash) {
    // Settings in a query string would be shown in responses and logs; they have their own fields.
    throw new ClickHouseSinkConfigError('url must not have a query string or fragment');
  }
  if (url.username || url.password) {
    throw new ClickHouseSinkConfigError('put credentials in user/password, not in the url');
  }
  const database = settings.database ?? 'default';
  if (!IDENTIFIER.test(database)) {
    throw new ClickHouseSinkConfigError('database must match [A-Za-z_][A-Za-z0-9_]*');
  }
  const tablePrefix = settings.table_prefix ?? '';
  if (!PREFIX.test(tablePrefix)) {
    throw new ClickHouseSinkConfigError('table_prefix may only hold [A-Za-z0-9_]');
  }
  const timeout = settings.request_timeout_ms ?? 30_000;
  if (!Number.isSafeInteger(timeout) || timeout < 1) {
    throw new ClickHouseSinkConfigError('request_timeout_ms must be a positive integer');
  }
  return {
    url: url.toString().replace(/\/$/, ''),
    database,
    tablePrefix,
    user: settings.user ?? 'default',
    password: settings.password ?? '',
    requestCompression: settings.compression?.request === true,
    requestTimeoutMs: timeout,
  };
}
