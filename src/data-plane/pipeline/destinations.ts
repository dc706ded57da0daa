import { isDeepStrictEqual } from 'node:util';
import type { Logger } from '../../shared/logger.ts';
import type { Metrics } from '../../shared/metrics.ts';
import { createSink, sinkKind, type TargetSettings } from '../sinks/index.ts';
import type { DestinationCounts } from './account-stats.ts';
import type { BatcherOptions } from './batcher.ts';
import { createDestination, type Destination } from './destination.ts';
import type { DestinationHealth } from './destination-health.ts';
import { removeSpool, reportUnknownSpools, spoolDir } from './destination-spools.ts';
import { instrumentSink, instrumentSpool } from './instrument.ts';
import { openSpool } from './spool.ts';
import { reopening, unbuiltSink, unopened } from './stand-ins.ts';

/** A destination as configured in the store. */
export interface DestinationConfig {
  id: string;
  accountId: string;
  target: TargetSettings;
}

/** What the registry needs to build destinations. */
export interface DestinationsDeps {
  dataDir: string;
  logger: Logger;
  batcher: BatcherOptions;
  spoolMaxBytes: number;
  metrics: Metrics;
  retry?: { baseMs: number; maxMs: number };
  parkRetryMs?: number;
}

/** The live destinations, kept in step with the configured ones. */
export interface Destinations {
  /** Opens new destinations, closes removed ones, rebuilds those whose target changed. */
  sync(configs: readonly DestinationConfig[]): Promise<void>;
  get(id: string): Destination | undefined;
  health(id: string): DestinationHealth | undefined;
  /** What the destination delivered, spooled and failed since this instance opened it. */
  counts(id: string): DestinationCounts | undefined;
  all(): IterableIterator<[string, Destination]>;
  close(): Promise<void>;
}

interface Live {
  target: TargetSettings;
  destination: Destination;
}

/**
 * One Destination per configured destination, each with its own spool under
 * `DATA_DIR/spool/<id>`. A changed target keeps the spool: its backlog goes to the new target.
 * A deleted destination's spool is removed with it (the API refuses to delete one whose spool
 * holds events unless told to discard them).
 */
export function createDestinations(deps: DestinationsDeps): Destinations {
  return new DestinationRegistry(deps);
}

/** The registry's state, and the steps of a sync: forget, close, open. */
class DestinationRegistry implements Destinations {
  private readonly deps: DestinationsDeps;
  private readonly live = new Map<string, Live>();
  /** Destinations being rebuilt after a target change, by id (see reopening()). */
  private readonly replacing = new Map<string, Destination>();
  /** Configured destinations that could not be opened (see unopened()); retried at each sync. */
  private readonly broken = new Map<string, Destination>();
  /** Kept by id across a target change (the destination is the same to its account). */
  private readonly tallies = new Map<string, DestinationCounts>();
  private syncing = Promise.resolve();
  private firstSync = true;

  constructor(deps: DestinationsDeps) {
    this.deps = deps;
  }

  sync(configs: readonly DestinationConfig[]): Promise<void> {
    if (this.firstSync) {
      this.firstSync = false;
      const known = new Set(configs.map((config) => config.id));
      reportUnknownSpools(this.deps.dataDir, this.deps.logger, known).catch(() => {});
    }
    // A failed sync must not stop the ones after it: each runs after the previous settles.
    const run = () => this.apply(configs);
    this.syncing = this.syncing.then(run, run);
    return this.syncing;
  }

  get(id: string): Destination | undefined {
    return this.live.get(id)?.destination ?? this.replacing.get(id) ?? this.broken.get(id);
  }

  health(id: string): DestinationHealth | undefined {
    return this.get(id)?.health();
  }

  counts(id: string): DestinationCounts | undefined {
    return this.tallies.get(id);
  }

  *all(): IterableIterator<[string, Destination]> {
    for (const [id, entry] of this.live) yield [id, entry.destination];
    yield* this.broken;
  }

  async close(): Promise<void> {
    await this.syncing.catch(() => {});
    await Promise.all([...this.live.values()].map((entry) => entry.destination.close()));
    this.live.clear();
    this.broken.clear();
  }

  private async apply(configs: readonly DestinationConfig[]): Promise<void> {
    const wanted = new Map(configs.map((config) => [config.id, config]));
    for (const id of this.tallies.keys()) if (!wanted.has(id)) this.tallies.delete(id);
    const closing = this.dropBroken(wanted);
    const reopened = this.closeStale(wanted, closing);
    try {
      await Promise.all(closing);
      await this.openMissing(configs);
    } finally {
      for (const release of reopened) release();
    }
  }

  /** Forgets the unopened destinations no longer configured; returns their spools' removal. */
  private dropBroken(wanted: ReadonlyMap<string, DestinationConfig>): Promise<void>[] {
    const removing: Promise<void>[] = [];
    for (const [id, destination] of this.broken) {
      if (wanted.has(id)) continue;
      this.broken.delete(id);
      removing.push(this.removeSpool(id, destination));
    }
    return removing;
  }

  /**
   * Closes the live destinations deleted or retargeted (onto `closing`); a retargeted one is
   * replaced by a stand-in until it opens again. Returns the releases of those stand-ins.
   */
  private closeStale(
    wanted: ReadonlyMap<string, DestinationConfig>,
    closing: Promise<void>[],
  ): (() => void)[] {
    const reopened: (() => void)[] = [];
    for (const [id, entry] of this.live) {
      const config = wanted.get(id);
      if (config !== undefined && isDeepStrictEqual(config.target, entry.target)) continue;
      this.live.delete(id);
      const closed = entry.destination.close().catch((error: unknown) => {
        this.deps.logger.error({ err: error, destination_id: id }, 'closing destination failed');
      });
      if (config === undefined) {
        closing.push(closed.then(() => this.removeSpool(id, entry.destination)));
        continue;
      }
      closing.push(closed);
      let release!: () => void;
      const done = new Promise<void>((resolve) => (release = resolve));
      const next = () => this.live.get(id)?.destination;
      this.replacing.set(id, reopening(id, entry.destination, done, next));
      reopened.push(() => {
        this.replacing.delete(id);
        release();
      });
    }
    return reopened;
  }

  /** Opens every configured destination not live; one that cannot open stands as unopened. */
  private async openMissing(configs: readonly DestinationConfig[]): Promise<void> {
    for (const config of configs) {
      if (this.live.has(config.id)) continue;
      try {
        this.live.set(config.id, await this.open(config));
        this.broken.delete(config.id);
      } catch (error) {
        this.deps.logger.error(
          { err: error, destination_id: config.id },
          'cannot open destination',
        );
        this.broken.set(config.id, unopened(config.id, error));
      }
    }
  }

  private async open(config: DestinationConfig): Promise<Live> {
    const tally = () => {
      let done = this.tallies.get(config.id);
      if (done === undefined) {
        done = { delivered: 0, spooled: 0, errors: 0 };
        this.tallies.set(config.id, done);
      }
      return done;
    };
    return { target: config.target, destination: await openDestination(this.deps, config, tally) };
  }

  private removeSpool(id: string, destination: Destination): Promise<void> {
    return removeSpool(this.deps.dataDir, this.deps.logger, id, destination.health().backlog);
  }
}

/**
 * Opens one destination: its spool, then its sink, both counted into the metrics and the
 * destination's tally (taken once the spool is open: an unopened destination has none).
 */
async function openDestination(
  deps: DestinationsDeps,
  config: DestinationConfig,
  tallyOf: () => DestinationCounts,
): Promise<Destination> {
  const spool = await openSpool({
    dir: spoolDir(deps.dataDir, config.id),
    maxBytes: deps.spoolMaxBytes,
  });
  const logger = deps.logger.child({ destination_id: config.id });
  const kind = sinkKind(Object.keys(config.target)[0] ?? '')?.kind ?? 'unknown';
  const tally = tallyOf();
  const sink = await createSink(config.target, {
    dataDir: deps.dataDir,
    accountId: config.accountId,
    logger,
  }).catch(unbuiltSink);
  return createDestination({
    id: config.id,
    sink: instrumentSink(sink, kind, deps.metrics, tally),
    spool: instrumentSpool(spool, kind, deps.metrics, tally),
    batcher: deps.batcher,
    logger,
    retry: deps.retry ?? { baseMs: 200, maxMs: 30_000 },
    parkRetryMs: deps.parkRetryMs ?? 60_000,
  });
}
