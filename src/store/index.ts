import type { Config } from '../config/load.ts';
import { type Db, openPglite, openPostgres } from './db.ts';
import { migrate } from './migrate.ts';

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
