import type { Config } from '../../config/load.ts';
import { AppError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Metrics } from '../../shared/metrics.ts';
import type { Keyring } from '../../shared/secrets.ts';
import type { Db } from '../../store/db.ts';
import { RecordBlock } from '../sinks/record-block.ts';
import {
  currentPipelineVersion,
  loadPipelineConfig,
  type PipelineConfig,
} from '../store/pipeline-config.ts';
import { accountStats, createPipelineCounts, type PipelineStats } from './account-stats.ts';
import { type Claim, createAdmission } from './admission.ts';
import { type AuditRelay, createAuditRelay } from './audit-relay.ts';
import { deliverAll } from './deliver.ts';
import type { DestinationHealth } from './destination-health.ts';
import { createDestinations, type Destinations } from './destinations.ts';
import { compileRouting, type Routing } from './routing.ts';
import { createTaps, type Taps } from './taps.ts';
import { deliverTestEvent, type TestDelivery } from './test-delivery.ts';
import { createRoutePool, type RoutePool } from './worker-pool.ts';

/** The outcome of one acknowledged Publish. */
export interface Published {
  /** The PublishResponse, binary protobuf, as the worker encoded it. */
  response: Uint8Array;
  accepted: number;
  matched: number;
}

/** The data plane: routes requests in workers, delivers durably, relays audit events. */
export interface Pipeline {
  /**
   * Admits one Publish or PublishStream: a request slot and a share of the byte budget (see
   * admission.ts); throws AppError when there is no room.
   */
  admit(): Claim;
  /**
   * Resolves when every event of the request is durable; throws AppError otherwise. The routed
   * records are held on `claim` (refused, nothing delivered, when the budget cannot hold them);
   * `admitEvents` sees the request's event count before delivery and may refuse it by throwing.
   */
  publish(
    request: Uint8Array,
    receivedAt: number,
    claim: Claim,
    admitEvents?: (events: number) => void | Promise<void>,
  ): Promise<Published>;
  /** Reloads subscriptions and destinations from the store (after a change). */
  reload(): Promise<void>;
  destinationHealth(id: string): DestinationHealth | undefined;
  /** Sends one test event to a destination (POST /event_destinations/{id}/test). */
  testDestination(accountId: string, id: string): Promise<TestDelivery>;
  /** What `accountId` sees of the pipeline (GET /pipeline/stats): its own counters only. */
  stats(accountId: string): PipelineStats;
  /** Sets the gauges (destination states, backlog, workers) just before a scrape. */
  refreshGauges(): void;
  /** The open taps (GET …/tap, POST /filters/preview): what the workers tee to them. */
  readonly taps: Taps;
  /** The audit relay, for callers that want delivery now (tests, shutdown). */
  readonly relay: AuditRelay;
  /** Stops admitting requests, waits for the admitted ones to end, flushes every destination. */
  close(): Promise<void>;
}

const VERSION_POLL_MS = 2_000;

/** Builds the pipeline from the store's current configuration. */
export async function createPipeline(deps: {
  db: Db;
  config: Config;
  logger: Logger;
  metrics: Metrics;
  keyring: Keyring;
}): Promise<Pipeline> {
  const { db, config, logger, metrics, keyring } = deps;
  const pool: RoutePool = createRoutePool({
    threads: config.workerThreads,
    maxQueue: config.maxInflightRequests,
    maxEvents: config.maxIngestEvents,
    maxBytes: config.maxIngestBytes,
  });
  const admission = createAdmission({
    maxRequests: config.maxInflightRequests,
    maxBytes: config.maxInflightBytes,
  });
  const destinations: Destinations = createDestinations({
    dataDir: config.dataDir,
    logger,
    batcher: {
      maxEvents: config.batchMaxEvents,
      maxBytes: config.batchMaxBytes,
      lingerMs: config.batchLingerMs,
    },
    spoolMaxBytes: config.spoolMaxBytes,
    metrics,
  });
  const taps = createTaps();
  const counts = createPipelineCounts();
  let loaded: PipelineConfig = { version: 0, destinations: [], subscriptions: [] };
  let routing: Routing = compileRouting({ version: 0, subscriptions: [] });
  let reloading: Promise<void> | undefined;
  let reloadAgain: Promise<void> | undefined;

  async function load(): Promise<void> {
    const config = await loadPipelineConfig(db, keyring);
    const next = compileRouting(config);
    for (const broken of next.broken)
      logger.error(broken, 'subscription source does not compile; skipped');
    // Destinations first, so no route ever names one that is not open yet.
    await destinations.sync(config.destinations);
    pool.setConfig(config);
    routing = next;
    loaded = config;
    counts.keepSubscriptions(new Set(config.subscriptions.map(({ id }) => id)));
  }

  // A reload always reads the store after it was asked for: while one runs, callers share one
  // follow-up load instead of the one in flight (which may predate their change).
  function reload(): Promise<void> {
    if (reloading === undefined) {
      reloading = load().finally(() => {
        reloading = undefined;
      });
      return reloading;
    }
    reloadAgain ??= reloading
      .catch(() => {})
      .then(() => {
        reloadAgain = undefined;
        return reload();
      });
    return reloadAgain;
  }

  /** The routing at least as new as the store's version (reloaded first when behind). */
  async function currentRouting(): Promise<Routing> {
    if ((await currentPipelineVersion(db)) !== routing.version) await reload();
    return routing;
  }

  await load();
  const poll = setInterval(async () => {
    try {
      await currentRouting();
    } catch (error) {
      logger.warn({ err: error }, 'pipeline configuration poll failed');
    }
  }, VERSION_POLL_MS);
  poll.unref();
  const relay = createAuditRelay({
    db,
    destinations,
    routing: currentRouting,
    taps,
    counts,
    logger,
    intervalMs: 1_000,
  });

  /** Routes in a worker, then waits until every destination holds its records durably. */
  async function publishNow(
    request: Uint8Array,
    receivedAt: number,
    claim: Claim,
    admitEvents?: (events: number) => void | Promise<void>,
  ): Promise<Published> {
    let result: Awaited<ReturnType<RoutePool['route']>>;
    try {
      result = await pool.route(request, receivedAt, taps.specs());
    } catch (error) {
      if ((error as AppError).code !== 'ERR_BACKPRESSURE') {
        logger.error({ err: error }, 'route-events worker failed');
      }
      throw error;
    }
    if (result.kind === 'failed') {
      logger.error({ err: result.message }, 'route-events worker failed');
      throw new AppError('ERR_INTERNAL', 'internal error');
    }
    if (result.kind === 'invalid') {
      counts.rejected(result.accounts);
      throw new AppError('ERR_INVALID_EVENTS', result.message);
    }
    if (result.kind === 'too-many') throw new AppError('ERR_BODY_TOO_LARGE', result.message);
    if (result.tapped !== undefined) taps.offer(result.tapped);
    try {
      claim.take(result.bytes);
      try {
        await admitEvents?.(result.accepted);
        await deliverAll(
          destinations,
          result.deliveries.map(({ destinationId, parts }) => ({
            destinationId,
            block: new RecordBlock(parts),
          })),
        );
      } finally {
        claim.give(result.bytes);
      }
    } catch (error) {
      counts.rejected(result.tally.accounts.map(([accountId, events]) => [accountId, events]));
      throw error;
    }
    counts.routed(result.tally);
    return { response: result.response, accepted: result.accepted, matched: result.matched };
  }

  // A refusal is counted by the ingest, where every protocol's answer is given (ingest/publish.ts).
  const failed = (error: unknown) => AppError.from(error);

  return {
    relay,
    taps,
    reload,
    destinationHealth: (id) => destinations.health(id),
    stats: (accountId) =>
      accountStats(accountId, {
        counts,
        config: loaded,
        health: (id) => destinations.health(id),
        destinationCounts: (id) => destinations.counts(id),
      }),
    testDestination: (accountId, id) => deliverTestEvent(destinations, id, accountId, { reload }),
    admit() {
      try {
        return admission.enter();
      } catch (error) {
        throw failed(error);
      }
    },
    async publish(request, receivedAt, claim, admitEvents) {
      const stop = metrics.publishSeconds.startTimer();
      try {
        const published = await publishNow(request, receivedAt, claim, admitEvents);
        metrics.ingestRequests.inc({ result: 'ok' });
        metrics.eventsReceived.inc(published.accepted);
        metrics.eventsMatched.inc(published.matched);
        return published;
      } catch (error) {
        throw failed(error);
      } finally {
        stop();
      }
    },
    refreshGauges() {
      const counts = { ok: 0, retrying: 0, parked: 0 };
      let records = 0;
      let bytes = 0;
      for (const [, destination] of destinations.all()) {
        const health = destination.health();
        counts[health.status]++;
        records += health.backlog.events;
        bytes += health.backlog.bytes;
      }
      for (const [status, count] of Object.entries(counts))
        metrics.destinations.set({ status }, count);
      metrics.backlogRecords.set(records);
      metrics.backlogBytes.set(bytes);
      metrics.inflightRequests.set(admission.requests);
      metrics.inflightBytes.set(admission.bytes);
      metrics.workerUtilization.set(pool.utilization());
    },
    async close() {
      clearInterval(poll);
      taps.closeAll();
      await admission.close();
      await relay.close();
      await relay.drain().catch((error) => logger.warn({ err: error }, 'final audit relay failed'));
      await destinations.close();
      await pool.close();
    },
  };
}
