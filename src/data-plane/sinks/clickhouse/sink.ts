import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { type ClickHouseClient, ClickHouseLogLevel, createClient } from '@clickhouse/client';
import type { ColumnSpec } from '../../../catalogue/types.ts';
import type { Logger } from '../../../shared/logger.ts';
import { withSinkContract } from '../contract.ts';
import { type Batch, type Sink, SinkError } from '../types.ts';
import type { ClickHouseSinkConfig } from './config.ts';
import { byTable, type TableFor, type TableRecords } from './encode.ts';
import { encodeInWorker } from './encode-pool.ts';
import { quoteIdent, type ServerProfile } from './schema.ts';
import { ServerTables } from './server-tables.ts';

/** What the ClickHouse sink needs: settings, the catalogue's table lookup, the logger. */
export interface ClickHouseSinkDeps {
  config: ClickHouseSinkConfig;
  tableFor: TableFor;
  logger: Logger;
  /** Column names stored as LowCardinality on modern servers; schema.ts has the default. */
  lowCardinality?: ReadonlySet<string>;
}

// Server error codes that say "later": overload, timeouts, network, read-only replicas.
const RETRIABLE_CODES = new Set([
  3, // UNEXPECTED_END_OF_FILE
  159, // TIMEOUT_EXCEEDED
  160, // TOO_SLOW
  202, // TOO_MANY_SIMULTANEOUS_QUERIES
  203, // NO_FREE_CONNECTION
  209, // SOCKET_TIMEOUT
  210, // NETWORK_ERROR
  241, // MEMORY_LIMIT_EXCEEDED
  242, // TABLE_IS_READ_ONLY
  252, // TOO_MANY_PARTS
  319, // UNKNOWN_STATUS_OF_INSERT
  394, // QUERY_WAS_CANCELLED
  425, // SYSTEM_ERROR
  999, // KEEPER_EXCEPTION
]);

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

function serverCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown })?.code;
  if (typeof code === 'string' && /^\d+$/.test(code)) return Number(code);
  const m = /Code: (\d+)/.exec(err instanceof Error ? err.message : String(err));
  return m ? Number(m[1]) : undefined;
}

// 18.16 answers "Code: 193, e.displayText() = DB::Exception: Wrong password…, e.what() = …".
function cleanMessage(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const m = /DB::Exception: (.*?)(?:, e\.what\(\) = DB::Exception)?\s*$/s.exec(text);
  return (m ? m[1] : text).trim();
}

/**
 * Maps a client error to a SinkError. A server exception is permanent unless its code is one of
 * the overload/timeout codes (auth 192-195/516, unknown table 60, unknown database 81, type
 * and parse errors 6/26/27/41/53/117: retrying the same rows cannot help). No server code
 * means the request never got an answer (refused, reset, timeout, proxy 5xx page): retriable.
 */
export function clickHouseSinkError(err: unknown): SinkError {
  if (err instanceof SinkError) return err;
  const code = serverCode(err);
  const message = `clickhouse: ${code !== undefined ? `code ${code}: ` : ''}${cleanMessage(err)}`;
  const retriable = code === undefined || RETRIABLE_CODES.has(code);
  return new SinkError(message, retriable, { cause: err });
}

// The client's own log lines go to the service logger at debug: the destination reports failures.
function loggerClass(logger: Logger) {
  return class {
    trace() {}
    debug(p: { message: string }) {
      logger.debug(p.message);
    }
    info(p: { message: string }) {
      logger.debug(p.message);
    }
    warn(p: { message: string; err?: Error }) {
      logger.debug({ err: p.err }, p.message);
    }
    error(p: { message: string; err: Error }) {
      logger.debug({ err: p.err }, p.message);
    }
  };
}

/** Builds the ClickHouse sink: creates database and tables on first use, one insert per table per batch. */
export function createClickHouseSink(deps: ClickHouseSinkDeps): Sink {
  const { config, tableFor } = deps;
  const log = deps.logger.child({ sink: 'clickhouse', url: config.url });
  const client = openClient(config, log);
  const tables = new ServerTables(client, config.database, log, deps.lowCardinality);
  const target: Target = { client, config, tables, tableFor };
  return withSinkContract('clickhouse', {
    write: (batch) => writeBatch(batch, target),
    async close() {
      await client.close();
    },
  });
}

function openClient(config: ClickHouseSinkConfig, log: Logger): ClickHouseClient {
  return createClient({
    url: config.url,
    username: config.user,
    password: config.password,
    request_timeout: config.requestTimeoutMs,
    compression: { request: config.requestCompression, response: false },
    application: 'agent-ingress',
    log: { LoggerClass: loggerClass(log), level: ClickHouseLogLevel.WARN },
  });
}

/** Where a batch goes: the client, the settings, what the server has, and each record's table. */
interface Target {
  client: ClickHouseClient;
  config: ClickHouseSinkConfig;
  tables: ServerTables;
  tableFor: TableFor;
}

/** Splits the batch by table, makes each table ready, encodes the rows in a worker, inserts them. */
async function writeBatch(batch: Batch, target: Target): Promise<void> {
  let profile: ServerProfile;
  try {
    profile = await target.tables.serverProfile();
  } catch (err) {
    throw clickHouseSinkError(err);
  }
  try {
    const groups = [...byTable(batch, target.tableFor).values()];
    const names = groups.map((group) => tableName(target.config, group));
    const types: string[][] = [];
    for (const [i, group] of groups.entries()) {
      types.push(await target.tables.columnTypes(names[i], group.target.columns, profile));
    }
    const chunks = groups.map((group, i) => ({
      columns: group.target.columns,
      types: types[i],
      jsons: group.jsons,
    }));
    const rows = await encodeInWorker({ modern: profile.modern, tables: chunks });
    // One insert per table; a failure after an earlier table succeeded replays that table's
    // rows too (at-least-once: duplicates carry the same event_id).
    for (const [i, group] of groups.entries()) {
      await insert(target, names[i], group.target.columns, rows[i]);
    }
  } catch (err) {
    throw clickHouseSinkError(err);
  }
}

function tableName(config: ClickHouseSinkConfig, group: TableRecords): string {
  const table = `${config.tablePrefix}${group.target.table}`;
  if (!IDENTIFIER.test(table)) {
    throw new SinkError(
      `clickhouse: table name ${JSON.stringify(table)} is not an identifier`,
      false,
    );
  }
  return table;
}

// The columns are named: the table may hold them in another order, or hold more.
async function insert(
  { client, config, tables }: Target,
  table: string,
  columns: readonly ColumnSpec[],
  rows: Uint8Array,
): Promise<void> {
  const names = columns.map((c) => quoteIdent(c.name)).join(', ');
  try {
    const { stream } = await client.exec({
      query: `INSERT INTO ${quoteIdent(config.database)}.${quoteIdent(table)} (${names}) FORMAT RowBinary`,
      values: Readable.from([rows]),
    });
    // The answer of an insert is empty; read to its end so the connection is reused.
    await finished(stream.resume());
  } catch (err) {
    // Dropped behind our back (unknown table 60, unknown database 81): the next (parked)
    // attempt creates it again.
    if (serverCode(err) === 60 || serverCode(err) === 81) tables.forget(table);
    throw err;
  }
}
