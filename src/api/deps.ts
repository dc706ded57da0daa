import type { Config } from '../config.ts';
import type { Db } from '../store/db.ts';

/** What every REST resource plugin is given. */
export interface ApiDeps {
  db: Db;
  config: Config;
}
