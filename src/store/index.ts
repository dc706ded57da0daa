import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config/load.ts';
import { type Db, openPglite, openPostgres } from './db.ts';
import { migrate } from './migrate.ts';

/**
 * What opening the configured store is about to do, for the person watching a start: creating
 * the embedded store is the slow step of a first start (PostgreSQL's initdb in WebAssembly).
 */
export function storeOpening(config: Pick<Config, 'databaseUrl' | 'dataDir'>): string {
  if (config.databaseUrl) return 'Connecting to PostgreSQL (DATABASE_URL)…';
  const dir = join(config.dataDir, 'store');
  return existsSync(join(dir, 'PG_VERSION'))
    ? `Opening the embedded store under ${dir}…`
    : `Creating the embedded store under ${dir} (first start only; this takes a while)…`;
}

/** Opens the configured store and brings its schema up to date. */
export async function openStore(config: Pick<Config, 'databaseUrl' | 'dataDir'>): Promise<Db> {
  const db = config.databaseUrl
    ? await openPostgres(config.databaseUrl)
    : await openPglite(config.dataDir);
  try {
    await migrate(db);
  } catch (error) {
    await db.close();
    throw error;
  }
  return db;
}
