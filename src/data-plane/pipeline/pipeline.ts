import type { Config } from '../../config/load.ts';
import { AppError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Metrics } from '../../shared/metrics.ts';
import type { Keyring } from '../../shared/secrets.ts';
import type { Db } from '../../store/db.ts';
import { RecordBlock } from '../sinks/record-block.ts';
import {
  accountStats,
  createPipelineCounts,
  type PipelineCounts,
  type PipelineStats,
} from './account-stats.ts';
import { type Admission, type Claim, createAdmission } from './admission.ts';
import { type AuditRelay, createAuditRelay } from './audit-relay.ts';
import { SlabRegistry } from './block-slabs.ts';
import { ConfigLoader } from './config-loader.ts';
import { deliverAll } from './deliver.ts';
import type { DestinationHealth } from './destination-health.ts';
import { createDestinations, type Destinations } from './destinations.ts';
import { createTaps, type Taps } from './taps.ts';
import { deliverTestEvent, type TestDelivery } from './test-delivery.ts';
import { createRoutePool, type RoutePool } from './worker-pool.ts';
import type { RouteResult } from './worker-protocol.ts';

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

/** What createPipeline needs. */
export interface PipelineDeps {
  db: Db;
  config: Config;
  logger: Logger;
  metrics: Metrics;
  keyring: Keyring;
}

/** The pipeline's working parts, which its steps take as they need them. */
interface Parts {
  pool: RoutePool;
  admission: Admission;
  destinations: Destinations;
  taps: Taps;
  counts: PipelineCounts;
  logger: Logger;
  /** The workers' slabs, which routed blocks are views of until delivered. */
  slabs: SlabRegistry;
}

/** A worker's answer for a request it routed. */
type Routed = Extract<RouteResult, { kind: 'routed' }>;

/** Builds the pipeline from the store's current configuration. */
export async function createPipeline(deps: PipelineDeps): Promise<Pipeline> {
  const { db, logger, metrics } = deps;
  const parts = buildParts(deps);
  const { admission, destinations, taps, counts } = parts;
  const loader = new ConfigLoader({ ...deps, ...parts });
  await loader.start();
  const relay = createAuditRelay({
    db,
    destinations,
    routing: loader.current,
    taps,
    counts,
    logger,
    intervalMs: 1_000,
  });
  return {
    relay,
    taps,
    reload: loader.reload,
    destinationHealth: (id) => destinations.health(id),
    stats: (accountId) =>
      accountStats(accountId, {
        counts,
        config: loader.loaded,
        health: (id) => destinations.health(id),
        destinationCounts: (id) => destinations.counts(id),
      }),
    testDestination: (accountId, id) =>
      deliverTestEvent(destinations, id, accountId, { reload: loader.reload }),
    admit() {
      try {
        return admission.enter();
      } catch (error) {
        throw failed(error);
      }
    },
    publish: (request, receivedAt, claim, admitEvents) =>
      publish(parts, metrics, request, receivedAt, claim, admitEvents),
    refreshGauges: () => refreshGauges(parts, metrics),
    async close() {
      loader.stop();
      taps.closeAll();
      await admission.close();
      await relay.close();
      await relay.drain().catch((error) => logger.warn({ err: error }, 'final audit relay failed'));
      await destinations.close();
      await parts.pool.close();
    },
  };
}

function buildParts({ config, logger, metrics }: PipelineDeps): Parts {
  const pool = createRoutePool({
    threads: config.workerThreads,
    maxQueue: config.maxInflightRequests,
    maxEvents: config.maxIngestEvents,
    maxBytes: config.maxIngestBytes,
    maxInflightBytes: config.maxInflightBytes,
  });
  const admission = createAdmission({
    maxRequests: config.maxInflightRequests,
    maxBytes: config.maxInflightBytes,
  });
  const destinations = createDestinations({
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
  return {
    pool,
    admission,
    destinations,
    taps: createTaps(),
    counts: createPipelineCounts(),
    logger,
    slabs: new SlabRegistry(),
  };
}

// A refusal is counted by the ingest, where every protocol's answer is given (ingest/publish.ts).
const failed = (error: unknown) => AppError.from(error);

/** One Publish, timed and counted: routed, then delivered. */
async function publish(
  parts: Parts,
  metrics: Metrics,
  request: Uint8Array,
  receivedAt: number,
  claim: Claim,
  admitEvents?: (events: number) => void | Promise<void>,
): Promise<Published> {
  const stop = metrics.publishSeconds.startTimer();
  try {
    const routed = await route(parts, request, receivedAt);
    await deliver(parts, routed, claim, admitEvents);
    metrics.ingestRequests.inc({ result: 'ok' });
    metrics.eventsReceived.inc(routed.accepted);
    metrics.eventsMatched.inc(routed.matched);
    return { response: routed.response, accepted: routed.accepted, matched: routed.matched };
  } catch (error) {
    throw failed(error);
  } finally {
    stop();
  }
}

/** Routes the request in a worker; any answer but `routed` becomes the request's error. */
async function route(
  { pool, taps, counts, logger, slabs }: Parts,
  request: Uint8Array,
  receivedAt: number,
): Promise<Routed> {
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
  slabs.learn(result.slabs);
  if (result.tapped !== undefined) taps.offer(result.tapped);
  return result;
}

/**
 * Waits until every destination holds its records durably, the records held on the claim
 * meanwhile; then (delivered or not) gives the blocks' slabs back to the workers.
 */
async function deliver(
  { destinations, counts, slabs }: Parts,
  routed: Routed,
  claim: Claim,
  admitEvents?: (events: number) => void | Promise<void>,
): Promise<void> {
  try {
    claim.take(routed.bytes);
    try {
      await admitEvents?.(routed.accepted);
      // deliverAll settles only once no destination holds a view of a block any more.
      await deliverAll(
        destinations,
        routed.deliveries.map((delivery) => ({
          destinationId: delivery.destinationId,
          block: new RecordBlock('slab' in delivery ? slabs.parts(delivery.slab) : delivery.parts),
        })),
      );
    } finally {
      claim.give(routed.bytes);
    }
  } catch (error) {
    counts.rejected(routed.tally.accounts.map(([accountId, events]) => [accountId, events]));
    throw error;
  } finally {
    for (const delivery of routed.deliveries) if ('slab' in delivery) slabs.free(delivery.slab);
  }
  counts.routed(routed.tally);
}

/** Sets the gauges (destination states, backlog, workers) just before a scrape. */
function refreshGauges({ destinations, admission, pool }: Parts, metrics: Metrics): void {
  const counts = { ok: 0, retrying: 0, parked: 0 };
  let records = 0;
  let bytes = 0;
  for (const [, destination] of destinations.all()) {
    const health = destination.health();
    counts[health.status]++;
    records += health.backlog.events;
    bytes += health.backlog.bytes;
  }
  for (const [status, count] of Object.entries(counts)) metrics.destinations.set({ status }, count);
  metrics.backlogRecords.set(records);
  metrics.backlogBytes.set(bytes);
  metrics.inflightRequests.set(admission.requests);
  metrics.inflightBytes.set(admission.bytes);
  metrics.workerUtilization.set(pool.utilization());
}
