import type { Logger } from '../../shared/logger.ts';
import type { Keyring } from '../../shared/secrets.ts';
import type { Db } from '../../store/db.ts';
import {
  currentPipelineVersion,
  loadPipelineConfig,
  type PipelineConfig,
} from '../store/pipeline-config.ts';
import type { PipelineCounts } from './account-stats.ts';
import type { Destinations } from './destinations.ts';
import { FreshRun } from './fresh-run.ts';
import { compileRouting, type Routing } from './routing.ts';
import type { RoutePool } from './worker-pool.ts';

const VERSION_POLL_MS = 2_000;

/** What the loader brings up to date at each load. */
export interface LoaderDeps {
  db: Db;
  keyring: Keyring;
  logger: Logger;
  destinations: Destinations;
  pool: RoutePool;
  counts: PipelineCounts;
}

/**
 * Keeps the pipeline's configuration (subscriptions, destinations) as new as the store's: loaded
 * when asked (after a change through this instance) and when the store's version moves (a change
 * through another instance, seen by a poll).
 */
export class ConfigLoader {
  /** The configuration last loaded. */
  loaded: PipelineConfig = { version: 0, destinations: [], subscriptions: [] };
  private routing: Routing = compileRouting({ version: 0, subscriptions: [] });
  private readonly deps: LoaderDeps;
  private readonly reloads = new FreshRun(() => this.load());
  private poll: NodeJS.Timeout | undefined;

  constructor(deps: LoaderDeps) {
    this.deps = deps;
  }

  /** Reads the store after this call, and applies what it read (see FreshRun). */
  readonly reload = (): Promise<void> => this.reloads.run();

  /** The routing at least as new as the store's version (reloaded first when behind). */
  readonly current = async (): Promise<Routing> => {
    if ((await currentPipelineVersion(this.deps.db)) !== this.routing.version) await this.reload();
    return this.routing;
  };

  /** Loads now, then keeps polling the store's version. */
  async start(): Promise<void> {
    await this.load();
    this.poll = setInterval(async () => {
      try {
        await this.current();
      } catch (error) {
        this.deps.logger.warn({ err: error }, 'pipeline configuration poll failed');
      }
    }, VERSION_POLL_MS);
    this.poll.unref();
  }

  stop(): void {
    clearInterval(this.poll);
  }

  private async load(): Promise<void> {
    const { db, keyring, logger, destinations, pool, counts } = this.deps;
    const config = await loadPipelineConfig(db, keyring);
    const next = compileRouting(config);
    for (const broken of next.broken)
      logger.error(broken, 'subscription source does not compile; skipped');
    // Destinations first, so no route ever names one that is not open yet.
    await destinations.sync(config.destinations);
    pool.setConfig(config);
    this.routing = next;
    this.loaded = config;
    counts.keepSubscriptions(new Set(config.subscriptions.map(({ id }) => id)));
  }
}
