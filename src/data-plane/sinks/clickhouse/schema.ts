import type { ColumnSpec, FieldKind } from '../../../catalogue/types.ts';

/**
 * What the server can store. `modern` (>= 22): LowCardinality, DateTime64, Map. Legacy (the
 * 18.16 the tests run): DateTime in seconds, maps as JSON text, no LowCardinality (it sits
 * behind an experimental setting there).
 */
export interface ServerProfile {
  version: string;
  modern: boolean;
}

/** Reads `SELECT version()` output (e.g. `18.16.1`, `24.8.4.13`) into the profile the DDL follows. */
export function serverProfile(version: string): ServerProfile {
  const major = Number.parseInt(version, 10);
  return { version, modern: Number.isFinite(major) && major >= 22 };
}

/** Columns worth LowCardinality on modern servers: few distinct values, often grouped by. */
export const DEFAULT_LOW_CARDINALITY = new Set([
  'event_type',
  'account_id',
  'http_request_method',
  'http_request_url_scheme',
  'tls_version',
  'tls_cipher_suite',
  'compression_algorithm',
]);

function isLowCardinality(name: string, hint: ReadonlySet<string>): boolean {
  return hint.has(name) || name.endsWith('_decision');
}

/** The ClickHouse type of one column on a given server. */
export function columnType(
  column: ColumnSpec,
  profile: ServerProfile,
  lowCardinality: ReadonlySet<string> = DEFAULT_LOW_CARDINALITY,
): string {
  const kind: FieldKind = column.kind;
  switch (kind) {
    case 'string':
      return profile.modern && isLowCardinality(column.name, lowCardinality)
        ? 'LowCardinality(String)'
        : 'String';
    case 'int64':
      return 'Int64';
    case 'int32':
      return 'Int32';
    case 'bool':
      return 'UInt8';
    case 'timestamp':
      return profile.modern ? "DateTime64(3, 'UTC')" : "DateTime('UTC')";
    case 'string_list_map':
      return profile.modern ? 'Map(String, Array(String))' : 'String';
    case 'json':
      return 'String';
    case 'string_list':
      return 'Array(String)';
  }
}

/** Backtick-quotes an identifier (config validation already keeps them plain). */
export function quoteIdent(name: string): string {
  return `\`${name.replace(/\\/g, '\\\\').replace(/`/g, '\\`')}\``;
}

/**
 * Sort key for analyst queries, which almost always name one account and a time range (top
 * hosts, error rate by minute, p95 body size by path, TCP bytes by client). An audit table
 * (it has `object_id`) puts the object before time, so the audit trail of one object is a
 * narrow range scan.
 */
export function sortKey(columns: readonly ColumnSpec[]): string[] {
  const names = new Set(columns.map((c) => c.name));
  return ['account_id', 'object_id', 'event_timestamp'].filter((n) => names.has(n));
}

/** What a CREATE TABLE needs: where, what, and for which server. */
export interface TableDdlInput {
  database: string;
  table: string;
  columns: readonly ColumnSpec[];
  profile: ServerProfile;
  lowCardinality?: ReadonlySet<string>;
}

/** CREATE TABLE IF NOT EXISTS for one event type's table, partitioned by day. */
export function createTableSql(input: TableDdlInput): string {
  const { database, table, columns, profile, lowCardinality } = input;
  const defs = columns.map(
    (c) => `  ${quoteIdent(c.name)} ${columnType(c, profile, lowCardinality)}`,
  );
  const hasTimestamp = columns.some((c) => c.name === 'event_timestamp' && c.kind === 'timestamp');
  const key = sortKey(columns);
  return [
    `CREATE TABLE IF NOT EXISTS ${quoteIdent(database)}.${quoteIdent(table)}`,
    `(\n${defs.join(',\n')}\n)`,
    'ENGINE = MergeTree()',
    ...(hasTimestamp ? ['PARTITION BY toYYYYMMDD(event_timestamp)'] : []),
    `ORDER BY ${key.length > 0 ? `(${key.map(quoteIdent).join(', ')})` : 'tuple()'}`,
  ].join('\n');
}

/** ALTER TABLE … ADD COLUMN for a field added to the catalogue after the table was made (18.16 lacks IF NOT EXISTS here). */
export function addColumnSql(input: TableDdlInput & { column: ColumnSpec }): string {
  const { database, table, column, profile, lowCardinality } = input;
  return `ALTER TABLE ${quoteIdent(database)}.${quoteIdent(table)} ADD COLUMN ${quoteIdent(column.name)} ${columnType(column, profile, lowCardinality)}`;
}

/** CREATE DATABASE IF NOT EXISTS. */
export function createDatabaseSql(database: string): string {
  return `CREATE DATABASE IF NOT EXISTS ${quoteIdent(database)}`;
}
