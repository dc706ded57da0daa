import type { Config } from '../config.ts';
import type { Db } from '../store/db.ts';

/** What every REST resource plugin is given. */
export interface ApiDeps {
  db: Db;
  config: Config;
  /** The pipeline's view of a destination's delivery health, shown as its `health`; optional. */
  destinationHealth?: (id: string) => unknown;
  /** Called after a routing change commits, so this instance reloads its routing at once. */
  onPipelineChange?: () => void;
}
