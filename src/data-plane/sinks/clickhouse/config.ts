import { integer, object, type Settings, SinkConfigError, secret, setting } from '../settings.ts';

/** A ClickHouse destination's settings. */
export const CLICKHOUSE_SETTINGS = object(
  {
    url: { type: 'string', description: 'http(s) URL of the server, without credentials' },
    database: { type: 'string', default: 'default', description: 'created if missing' },
    table_prefix: { type: 'string', default: '', description: 'prefix of the tables it creates' },
    user: { type: 'string', default: 'default' },
    ...secret('password', "the user's password"),
    compression: object({
      request: {
        type: 'boolean',
        default: false,
        // On loopback gzip costs CPU for no gain.
        description: 'gzip the insert body',
      },
    }),
    request_timeout_ms: {
      type: 'number',
      minimum: 1,
      default: 30_000,
      description: 'how long an insert may take',
    },
  },
  ['url'],
);

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

const fail = (message: string, setting: string) =>
  new SinkConfigError('clickhouse', message, setting);

// Database and table names go into DDL: a plain identifier needs no escaping rules to be right.
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const PREFIX = /^[A-Za-z0-9_]*$/;

function parseUrl(value: unknown): URL {
  let url: URL;
  try {
    url = new URL(value as string);
  } catch {
    throw fail('url must be an absolute http(s) URL', 'url');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw fail('url must use http or https', 'url');
  }
  if (url.search || url.hash) {
    // Settings in a query string would be shown in responses and logs; they have their own fields.
    throw fail('url must not have a query string or fragment', 'url');
  }
  if (url.username || url.password) {
    throw fail('put credentials in user/password, not in the url', 'url');
  }
  return url;
}

/** Validates settings: an http(s) URL, plain identifiers, a positive timeout. */
export function parseClickHouseSinkConfig(settings: Settings): ClickHouseSinkConfig {
  const url = parseUrl(settings.url);
  const database = setting<string>(CLICKHOUSE_SETTINGS, settings, 'database');
  if (!IDENTIFIER.test(database)) {
    throw fail('database must match [A-Za-z_][A-Za-z0-9_]*', 'database');
  }
  const tablePrefix = setting<string>(CLICKHOUSE_SETTINGS, settings, 'table_prefix');
  if (!PREFIX.test(tablePrefix)) {
    throw fail('table_prefix may only hold [A-Za-z0-9_]', 'table_prefix');
  }
  const compression = settings.compression as { request?: boolean } | undefined;
  return {
    url: url.toString().replace(/\/$/, ''),
    database,
    tablePrefix,
    user: setting(CLICKHOUSE_SETTINGS, settings, 'user'),
    password: (settings.password as string | undefined) ?? '',
    requestCompression: compression?.request === true,
    requestTimeoutMs: integer('clickhouse', CLICKHOUSE_SETTINGS, settings, 'request_timeout_ms'),
  };
}
