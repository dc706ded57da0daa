import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { createSink, type TargetSettings } from '../sinks/index.ts';
import { type Sink, SinkError } from '../sinks/types.ts';
import type { BatcherOptions } from './batcher.ts';
import { createDestination, type Destination, type DestinationHealth } from './destination.ts';
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
 */
export function createDestinations(deps: DestinationsDeps): Destinations {
  const live = new Map<string, Live>();
  let syncing = Promise.resolve();

  /** A target that cannot be built parks its destination (error visible) instead of failing the pipeline. */
  function sinkOrBroken(config: DestinationConfig, logger: Logger): Sink {
    try {
      return createSink(config.target, { dataDir: deps.dataDir, logger });
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

  async function open(config: DestinationConfig): Promise<Live> {
    const spool = await openSpool({
      dir: join(deps.dataDir, 'spool', config.id),
      maxBytes: deps.spoolMaxBytes,
    });
    const logger = deps.logger.child({ destination_id: config.id });
    const kind = Object.keys(config.target)[0] ?? 'unknown';
    const destination = createDestination({
      id: config.id,
      sink: instrumentSink(sinkOrBroken(config, logger), kind, deps.metrics),
      spool: instrumentSpool(spool, kind, deps.metrics),
      batcher: deps.batcher,
      logger,
      retry: deps.retry ?? { baseMs: 200, maxMs: 30_000 },
      parkRetryMs: deps.parkRetryMs ?? 60_000,
    });
    return { target: config.target, destination };
  }

  async function apply(configs: readonly DestinationConfig[]): Promise<void> {
    const wanted = new Map(configs.map((config) => [config.id, config]));
    const closing: Promise<void>[] = [];
    for (const [id, entry] of live) {
      const config = wanted.get(id);
      if (config === undefined || !isDeepStrictEqual(config.target, entry.target)) {
        live.delete(id);
        closing.push(entry.destination.close());
      }
    }
    await Promise.all(closing);
    for (const config of configs) {
      if (live.has(config.id)) continue;
      try {
        live.set(config.id, await open(config));
      } catch (error) {
        deps.logger.error({ err: error, destination_id: config.id }, 'cannot open destination');
      }
    }
  }

  return {
    sync(configs) {
      syncing = syncing.then(() => apply(configs));
      return syncing;
    },
    get: (id) => live.get(id)?.destination,
    health: (id) => live.get(id)?.destination.health(),
    *all() {
      for (const [id, entry] of live) yield [id, entry.destination];
    },
    async close() {
      await syncing;
      await Promise.all([...live.values()].map((entry) => entry.destination.close()));
      live.clear();
    },
  };
}
