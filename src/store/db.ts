import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../config/load.ts';
import { type OpenPglite, openPgliteFiles, wasmMemoryBytes } from './pglite-files.ts';
import { lockStore } from './store-lock.ts';
import { openStoreProcess } from './store-process.ts';

/** The rows a query returns, whichever engine ran it. */
export interface QueryResult<Row> {
  rows: Row[];
}

/** What repositories need of a database: a query, and a transaction holding queries. */
export interface Queryable {
  query<Row = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<QueryResult<Row>>;
}

/** The store's connection: PGlite embedded or a PostgreSQL pool behind one interface. */
export interface Db extends Queryable {
  readonly kind: 'pglite' | 'postgres';
  transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  /** Bytes of WebAssembly memory the store holds in this process (PGlite's heap; 0 for PostgreSQL). */
  wasmMemoryBytes(): number;
}

/** SQLSTATE of a unique-constraint violation, the same in PGlite and PostgreSQL. */
export const UNIQUE_VIOLATION = '23505';

/** True when a database error is a unique-constraint violation. */
export function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: string } | null)?.code === UNIQUE_VIOLATION;
}

/**
 * Opens PGlite under `dataDir/store` in a process of its own (store-process.ts), holding the
 * store's lock (`dataDir/store.lock`) until close: throws StoreInUseError while another process
 * has it. In memory (dataDir null: tests), PGlite runs in this process.
 */
export async function openPglite(dataDir: string | null): Promise<Db> {
  if (dataDir === null) return inProcess(await openPgliteFiles(undefined));
  const dir = join(dataDir, 'store');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const lock = lockStore(`${dir}.lock`, dir);
  try {
    const db = await openStoreProcess(dir);
    return { ...db, close: () => db.close().finally(() => lock.release()) };
  } catch (error) {
    lock.release();
    throw error;
  }
}

function inProcess({ db, close }: OpenPglite): Db {
  return {
    kind: 'pglite',
    query: (sql, params) => db.query(sql, params),
    wasmMemoryBytes: () => wasmMemoryBytes(db),
    transaction: (work) =>
      db.transaction((tx) => work({ query: (sql, params) => tx.query(sql, params) })),
    close,
  };
}

/** Opens a PostgreSQL pool. */
export async function openPostgres(connectionString: string): Promise<Db> {
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({ connectionString, max: 10 });
  // An idle client's connection can end under us (server restart, admin terminate): the pool
  // drops it and the next query opens another; without a listener it would crash the process.
  pool.on('error', () => {});
  const client = await pool.connect().catch(async (error: Error) => {
    await pool.end();
    // The message names what failed (host, database, role), never the URL: it may hold a password.
    throw new ConfigError('DATABASE_URL', `does not connect: ${error.message}`);
  });
  client.release();
  const query = async <Row>(sql: string, params?: unknown[]) =>
    (await pool.query(sql, params)) as unknown as QueryResult<Row>;
  return {
    kind: 'postgres',
    query,
    wasmMemoryBytes: () => 0,
    async transaction(work) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await work({
          query: async <Row>(sql: string, params?: unknown[]) =>
            (await client.query(sql, params)) as unknown as QueryResult<Row>,
        });
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        throw error;
      } finally {
        client.release();
      }
    },
    close: () => pool.end(),
  };
}
