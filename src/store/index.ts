import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config/load.ts';
import { type Db, openPglite, openPostgres } from './db.ts';
import { migrate } from './migrate.ts';
import { templateFile } from './pglite-template.ts';

/**
 * What opening the configured store is about to do, for the person watching a start. Creating
 * the embedded store is quick from the PGlite version's template; without one, PGlite's initdb
 * (PostgreSQL's bootstrap in WebAssembly) takes seconds, and the line says so.
 */
export function storeOpening(config: Pick<Config, 'databaseUrl' | 'dataDir'>): string {
  if (config.databaseUrl) return 'Connecting to PostgreSQL (DATABASE_URL)…';
  const dir = join(config.dataDir, 'store');
  if (existsSync(join(dir, 'PG_VERSION'))) return `Opening the embedded store under ${dir}…`;
  const slow = existsSync(templateFile())
    ? ''
    : '; no template for this PGlite, this takes a while';
  return `Creating the embedded store under ${dir} (first start only${slow})…`;
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
