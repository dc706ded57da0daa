import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from '../../shared/logger.ts';
import type { Metrics } from '../../shared/metrics.ts';
import { createSink, sinkKind, type TargetSettings } from '../sinks/index.ts';
import { type Sink, SinkError } from '../sinks/types.ts';
import type { DestinationCounts } from './account-stats.ts';
import type { BatcherOptions } from './batcher.ts';
import {
  createDestination,
  type Destination,
  type DestinationHealth,
  destinationClosed,
  notDurable,
} from './destination.ts';
import { instrumentSink, instrumentSpool } from './instrument.ts';
import { openSpool } from './spool.ts';

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
  const live = new Map<string, Live>();
  /** Destinations being rebuilt after a target change, by id (see reopening()). */
  const replacing = new Map<string, Destination>();
  /** Configured destinations that could not be opened (see unopened()); retried at each sync. */
  const broken = new Map<string, Destination>();
  /** Kept by id across a target change (the destination is the same to its account). */
  const counts = new Map<string, DestinationCounts>();
  let syncing = Promise.resolve();
  let firstSync = true;

  /** A target that cannot be built parks its destination (error visible) instead of failing the pipeline. */
  async function sinkOrBroken(config: DestinationConfig, logger: Logger): Promise<Sink> {
    try {
      return await createSink(config.target, {
        dataDir: deps.dataDir,
        accountId: config.accountId,
        logger,
      });
    } catch (error) {
      const message = `cannot build the destination's target: ${(error as Error).message}`;
      return {
        write: async () => {
          throw new SinkError(message, false);
        },
        close: async () => {},
      };
    }
  }

  const spoolDir = (id: string) => join(deps.dataDir, 'spool', id);

  /** Removes a deleted destination's spool, saying how many events went with it. */
  async function removeSpool(id: string, backlog: DestinationHealth['backlog']): Promise<void> {
    const logger = deps.logger.child({ destination_id: id });
    if (backlog.events > 0) {
      logger.warn({ backlog }, 'destination deleted: the events in its spool are discarded');
    }
    await rm(spoolDir(id), { recursive: true, force: true }).catch((error: unknown) => {
      logger.error({ err: error }, 'cannot remove the spool of a deleted destination');
    });
  }

  /**
   * Spools of destinations deleted while this instance was down are named, not removed: a store
   * that lacks them may as well be the wrong store (DATABASE_URL), and their events were acknowledged.
   */
  async function reportUnknownSpools(configs: readonly DestinationConfig[]): Promise<void> {
    const known = new Set(configs.map((config) => config.id));
    const names = await readdir(join(deps.dataDir, 'spool')).catch(() => []);
    const unknown = names.filter((name) => !known.has(name)).map(spoolDir);
    if (unknown.length > 0) {
      deps.logger.warn(
        { spools: unknown },
        'spools of destinations that no longer exist; remove them to discard their events',
      );
    }
  }

  async function open(config: DestinationConfig): Promise<Live> {
    const spool = await openSpool({
      dir: spoolDir(config.id),
      maxBytes: deps.spoolMaxBytes,
    });
    const logger = deps.logger.child({ destination_id: config.id });
    const kind = sinkKind(Object.keys(config.target)[0] ?? '')?.kind ?? 'unknown';
    let done = counts.get(config.id);
    if (done === undefined) {
      done = { delivered: 0, spooled: 0, errors: 0 };
      counts.set(config.id, done);
    }
    const destination = createDestination({
      id: config.id,
      sink: instrumentSink(await sinkOrBroken(config, logger), kind, deps.metrics, done),
      spool: instrumentSpool(spool, kind, deps.metrics, done),
      batcher: deps.batcher,
      logger,
      retry: deps.retry ?? { baseMs: 200, maxMs: 30_000 },
      parkRetryMs: deps.parkRetryMs ?? 60_000,
    });
    return { target: config.target, destination };
  }

  /**
   * Stands in for a destination whose target changed while it is closed and opened again: the
   * routing still names it, so a delivery in that window waits for the new one. (No destination
   * at all means "deleted" to deliverAll, which would acknowledge the events undelivered.)
   */
  function reopening(id: string, old: Destination, reopened: Promise<void>): Destination {
    return {
      async deliver(records) {
        await reopened;
        const next = live.get(id)?.destination;
        if (next === undefined) throw destinationClosed(id);
        return next.deliver(records);
      },
      health: () => old.health(),
      close: async () => {},
    };
  }

  /**
   * Stands in for a destination whose spool could not be opened (disk full, permissions): its
   * events cannot be made durable, so deliveries fail (retryable) and health shows why, instead
   * of the id being absent, which deliverAll takes for "deleted" and acknowledges.
   */
  function unopened(id: string, error: unknown): Destination {
    const message = `cannot open the destination: ${error instanceof Error ? error.message : String(error)}`;
    const at = new Date().toISOString();
    return {
      deliver: () => Promise.reject(notDurable(`destination ${id}: ${message}`)),
      health: () => ({
        status: 'parked',
        last_error: message,
        last_error_at: at,
        last_success_at: null,
        backlog: { events: 0, bytes: 0 },
      }),
      close: async () => {},
    };
  }

  async function apply(configs: readonly DestinationConfig[]): Promise<void> {
    const wanted = new Map(configs.map((config) => [config.id, config]));
    for (const id of counts.keys()) if (!wanted.has(id)) counts.delete(id);
    const closing: Promise<void>[] = [];
    for (const [id, destination] of broken) {
      if (wanted.has(id)) continue;
      broken.delete(id);
      closing.push(removeSpool(id, destination.health().backlog));
    }
    const reopened: (() => void)[] = [];
    for (const [id, entry] of live) {
      const config = wanted.get(id);
      if (config === undefined || !isDeepStrictEqual(config.target, entry.target)) {
        live.delete(id);
        const closed = entry.destination.close().catch((error: unknown) => {
          deps.logger.error({ err: error, destination_id: id }, 'closing destination failed');
        });
        closing.push(
          config === undefined
            ? closed.then(() => removeSpool(id, entry.destination.health().backlog))
            : closed,
        );
        if (config !== undefined) {
          let release!: () => void;
          const done = new Promise<void>((resolve) => (release = resolve));
          replacing.set(id, reopening(id, entry.destination, done));
          reopened.push(() => {
            replacing.delete(id);
            release();
          });
        }
      }
    }
    try {
      await Promise.all(closing);
      for (const config of configs) {
        if (live.has(config.id)) continue;
        try {
          live.set(config.id, await open(config));
          broken.delete(config.id);
        } catch (error) {
          deps.logger.error({ err: error, destination_id: config.id }, 'cannot open destination');
          broken.set(config.id, unopened(config.id, error));
        }
      }
    } finally {
      for (const release of reopened) release();
    }
  }

  return {
    sync(configs) {
      if (firstSync) {
        firstSync = false;
        reportUnknownSpools(configs).catch(() => {});
      }
      // A failed sync must not stop the ones after it: each runs after the previous settles.
      const run = () => apply(configs);
      syncing = syncing.then(run, run);
      return syncing;
    },
    get: (id) => live.get(id)?.destination ?? replacing.get(id) ?? broken.get(id),
    health: (id) => (live.get(id)?.destination ?? replacing.get(id) ?? broken.get(id))?.health(),
    counts: (id) => counts.get(id),
    *all() {
      for (const [id, entry] of live) yield [id, entry.destination];
      yield* broken;
    },
    async close() {
      await syncing.catch(() => {});
      await Promise.all([...live.values()].map((entry) => entry.destination.close()));
      live.clear();
      broken.clear();
    },
  };
}
