import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
import { ConfigError } from '../config/load.ts';
import { restrictTree } from '../shared/files/data-dir.ts';
import { seedFromTemplate, templateArchive } from './pglite-template.ts';
import { lockStore } from './store-lock.ts';

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

// PGlite's PostgreSQL runs with PostgreSQL's default shared_buffers (128 MB), which live in its
// WebAssembly memory: 188 MiB of it instead of the 128 MiB the module starts with, filled as
// pages are read and never given back. The store holds configuration, not events (a few MiB;
// the OS page cache keeps its files too), so 16 MB of buffers keep the memory at its initial
// 128 MiB (wal_buffers follows at 1/32). The defaults besides are PGlite's own.
const PGLITE_SETTINGS = ['shared_buffers=16MB'];

/** SQLSTATE of a unique-constraint violation, the same in PGlite and PostgreSQL. */
export const UNIQUE_VIOLATION = '23505';

/** True when a database error is a unique-constraint violation. */
export function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: string } | null)?.code === UNIQUE_VIOLATION;
}

/**
 * Opens PGlite under `dataDir/store` (or in memory when dataDir is null), holding the store's
 * lock (`dataDir/store.lock`) until close: throws StoreInUseError while another process has it.
 * A new store is unpacked from the PGlite version's template (pglite-template.ts).
 */
export async function openPglite(dataDir: string | null): Promise<Db> {
  // Each engine's library loads only when it is the one configured (a faster start).
  const { PGlite } = await import('@electric-sql/pglite');
  const dir = dataDir === null ? undefined : join(dataDir, 'store');
  if (dir !== undefined) mkdirSync(dir, { recursive: true, mode: 0o700 });
  const lock = dir === undefined ? undefined : lockStore(`${dir}.lock`, dir);
  // Store files are 0600 (PGlite ignores the umask for some): after opening, and after closing
  // for those written meanwhile (inside DATA_DIR and store/, both 0700, until then).
  const restrict = () => (dir === undefined ? Promise.resolve() : restrictTree(dir));
  let db: PGlite;
  try {
    const startParams = [
      ...PGlite.defaultStartParams,
      ...PGLITE_SETTINGS.flatMap((setting) => ['-c', setting]),
    ];
    // A new store starts from the version's pre-initialised cluster instead of initdb: unpacked
    // into an empty directory, or loaded by PGlite itself in memory.
    const memoryTemplate = dir === undefined ? templateArchive() : undefined;
    if (dir !== undefined) seedFromTemplate(dir);
    // Options in one object: `new PGlite(undefined, options)` ignores them.
    db = new PGlite({
      dataDir: dir,
      startParams,
      loadDataDir: memoryTemplate && new Blob([memoryTemplate], { type: 'application/x-gzip' }),
    });
    await db.waitReady;
    await restrict();
  } catch (error) {
    lock?.release();
    throw error;
  }
  return {
    kind: 'pglite',
    query: (sql, params) => db.query(sql, params),
    wasmMemoryBytes: () => wasmMemoryBytes(db),
    transaction: (work) =>
      db.transaction((tx) => work({ query: (sql, params) => tx.query(sql, params) })),
    async close() {
      try {
        await db.close();
        await restrict();
      } finally {
        lock?.release();
      }
    },
  };
}

/** The size of PGlite's WebAssembly memory (its Emscripten module's heap view; not typed). */
function wasmMemoryBytes(db: PGlite): number {
  const mod = (db as unknown as { mod?: { HEAPU8?: Uint8Array } }).mod;
  return mod?.HEAPU8?.byteLength ?? 0;
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
