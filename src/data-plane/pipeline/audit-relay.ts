import type { Logger } from '../../shared/logger.ts';
import type { Db } from '../../store/db.ts';
import { claimOutbox, markDelivered, type OutboxRow, releaseOutbox } from '../../store/outbox.ts';
import { type EventRecord, RecordBlock } from '../sinks/record-block.ts';
import type { PipelineCounts } from './account-stats.ts';
import { deliverAll } from './deliver.ts';
import type { Destinations } from './destinations.ts';
import { FreshRun } from './fresh-run.ts';
import type { Routing } from './routing.ts';
import { createTee, type Tee } from './tap-tee.ts';
import type { Taps } from './taps.ts';

const BATCH = 500;
const LEASE_SECONDS = 60;

/** Relays audit events from the outbox to their subscriptions' destinations. */
export interface AuditRelay {
  /** Relays until the outbox has nothing claimable; resolves with how many rows it handled. */
  drain(): Promise<number>;
  /** Asks for a relay soon (an audit event was just written); never throws. */
  kick(): void;
  close(): Promise<void>;
}

/** What the relay needs. */
export interface AuditRelayDeps {
  db: Db;
  destinations: Destinations;
  /**
   * The routing as of now: an audit event claimed from the outbox may have committed after a
   * routing change this instance has not loaded yet (a subscription created just before it).
   */
  routing: () => Promise<Routing>;
  taps: Taps;
  counts: PipelineCounts;
  logger: Logger;
  intervalMs: number;
}

/**
 * Polls the outbox, routes each audit event by account and type (audit sources have no filter
 * or field selection), delivers through the same destinations as traffic, and marks a row
 * delivered only once it is durable at every destination it was routed to. What it delivered is
 * then counted per subscription and shown to the taps open on those subscriptions.
 */
export function createAuditRelay(deps: AuditRelayDeps): AuditRelay {
  // A drain covers every row written before it was asked for (see FreshRun).
  const drains = new FreshRun(() => drainOutbox(deps));
  let closed = false;
  function kick(): void {
    if (closed || drains.queued) return;
    drains.run().catch((error) => deps.logger.warn({ err: error }, 'audit relay will retry'));
  }
  // The interval is the safety net (other instances' writes, expired leases); local writes kick.
  const timer = setInterval(kick, deps.intervalMs);
  timer.unref();
  return {
    drain: drains.run,
    kick,
    async close() {
      closed = true;
      clearInterval(timer);
      await drains.inFlight?.catch(() => {});
    },
  };
}

/** Relays batches until one comes back short: the outbox has nothing more to claim. */
async function drainOutbox(deps: AuditRelayDeps): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await relayBatch(deps);
    total += n;
    if (n < BATCH) return total;
  }
}

/** Claims one batch of rows, delivers them, and marks them delivered (or releases them). */
async function relayBatch(deps: AuditRelayDeps): Promise<number> {
  const { db } = deps;
  const rows = await claimOutbox(db, BATCH, LEASE_SECONDS);
  if (rows.length === 0) return 0;
  const routing = await deps.routing();
  const tee = createTee(deps.taps.specs());
  const { byDestination, matched } = routeRows(rows, routing, tee);
  const deliveries = [...byDestination].map(([destinationId, records]) => ({
    destinationId,
    block: RecordBlock.of(records),
  }));
  const seqs = rows.map((row) => row.seq);
  try {
    await deliverAll(deps.destinations, deliveries);
  } catch (error) {
    await releaseOutbox(db, seqs);
    throw error;
  }
  await markDelivered(db, seqs);
  for (const [id, n] of matched) deps.counts.subscriptionMatched(id, n);
  if (tee !== undefined) deps.taps.offer(tee.catches());
  return rows.length;
}

/**
 * Each row as a record for every destination its routes name (once per destination), with the
 * matches per subscription; what is routed is shown to `tee`.
 */
export function routeRows(rows: readonly OutboxRow[], routing: Routing, tee: Tee | undefined) {
  const byDestination = new Map<string, EventRecord[]>();
  const matched = new Map<string, number>();
  for (const row of rows) {
    const routes = routing.routes(row.account_id, row.event_type);
    if (routes.length === 0) continue;
    const object = row.envelope.object as { id?: string } | null;
    const record: EventRecord = {
      eventId: row.event_id,
      eventType: row.event_type,
      accountId: row.account_id,
      partitionKey: object?.id ?? row.account_id,
      json: JSON.stringify(row.envelope),
    };
    for (const { subscriptionId } of routes) {
      matched.set(subscriptionId, (matched.get(subscriptionId) ?? 0) + 1);
      tee?.routed(subscriptionId, row.event_type, record.json);
    }
    for (const id of new Set(routes.flatMap((route) => route.destinationIds))) {
      const records = byDestination.get(id);
      if (records === undefined) byDestination.set(id, [record]);
      else records.push(record);
    }
  }
  return { byDestination, matched };
}
