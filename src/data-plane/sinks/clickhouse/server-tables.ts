import type { ClickHouseClient } from '@clickhouse/client';
import type { ColumnSpec } from '../../../catalogue/types.ts';
import type { Logger } from '../../../shared/logger.ts';
import {
  addColumnSql,
  createDatabaseSql,
  createTableSql,
  type ServerProfile,
  serverProfile,
} from './schema.ts';

/**
 * What one sink knows of its server: the version's profile, and the database and tables it has
 * made ready (each with its columns' types, as the server has them). Asked once per server and
 * table; forgotten when an insert finds the table gone.
 */
export class ServerTables {
  private readonly client: ClickHouseClient;
  private readonly database: string;
  private readonly log: Logger;
  private readonly lowCardinality: ReadonlySet<string> | undefined;
  private profile: ServerProfile | undefined;
  private databaseReady = false;
  // Per table made ready: the type of each of its columns, as the server has it.
  private readonly ready = new Map<string, Map<string, string>>();

  constructor(
    client: ClickHouseClient,
    database: string,
    log: Logger,
    lowCardinality: ReadonlySet<string> | undefined,
  ) {
    this.client = client;
    this.database = database;
    this.log = log;
    this.lowCardinality = lowCardinality;
  }

  async serverProfile(): Promise<ServerProfile> {
    if (this.profile) return this.profile;
    const rs = await this.client.query({ query: 'SELECT version() AS v', format: 'JSONEachRow' });
    const [row] = await rs.json<{ v: string }>();
    this.profile = serverProfile(row.v);
    this.log.info({ version: row.v, modern: this.profile.modern }, 'clickhouse server version');
    return this.profile;
  }

  // Create if missing, then add columns the catalogue gained since (fields are only ever added).
  // Rows are encoded for the types the table has, which an older version may have chosen.
  async columnTypes(
    table: string,
    columns: readonly ColumnSpec[],
    profile: ServerProfile,
  ): Promise<string[]> {
    let have = this.ready.get(table);
    if (have === undefined) {
      have = await this.prepare(table, columns, profile);
      this.ready.set(table, have);
    }
    const types = have;
    return columns.map((c) => types.get(c.name) ?? '');
  }

  /** The table was dropped behind our back: the next attempt creates it (and its database) again. */
  forget(table: string): void {
    this.ready.delete(table);
    this.databaseReady = false;
  }

  private async prepare(table: string, columns: readonly ColumnSpec[], profile: ServerProfile) {
    const { client, database } = this;
    if (!this.databaseReady) {
      await client.command({ query: createDatabaseSql(database) });
      this.databaseReady = true;
    }
    const ddl = { database, table, columns, profile, lowCardinality: this.lowCardinality };
    await client.command({ query: createTableSql(ddl) });
    const have = await this.existingColumns(table);
    let added = false;
    for (const column of columns) {
      if (have.has(column.name)) continue;
      await client.command({ query: addColumnSql({ ...ddl, column }) });
      this.log.info({ table, column: column.name }, 'added column');
      added = true;
    }
    return added ? await this.existingColumns(table) : have;
  }

  private async existingColumns(table: string): Promise<Map<string, string>> {
    // Literals, not query parameters: 18.16 has none; both names are checked plain identifiers.
    const rs = await this.client.query({
      query: `SELECT name, type FROM system.columns WHERE database = '${this.database}' AND table = '${table}'`,
      format: 'JSONEachRow',
    });
    return new Map((await rs.json<{ name: string; type: string }>()).map((r) => [r.name, r.type]));
  }
}
