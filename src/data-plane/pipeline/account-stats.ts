import type { PipelineConfig } from '../store/pipeline-config.ts';
import type { DestinationHealth } from './destination-health.ts';
import type { Tally } from './match-tally.ts';

// The counters an account sees of the pipeline (GET /pipeline/stats, the console): its own
// events, its subscriptions' matches and its destinations' deliveries, never another account's
// nor the service's totals (those are the operator's, at /metrics). Counted on this instance
// since it started, like /metrics; the workers send them summed per request (match-tally.ts).

/** Accounts counted at most: event account ids come from the edge, so they are bounded here. */
export const MAX_COUNTED_ACCOUNTS = 10_000;

/** What one destination did since this instance opened it. */
export interface DestinationCounts {
  delivered: number;
  spooled: number;
  errors: number;
}

interface AccountCounts {
  received: number;
  matched: number;
  rejected: number;
}

/** The per-account and per-subscription counters. */
export interface PipelineCounts {
  /** An acknowledged request's tally. */
  routed(tally: Tally): void;
  /** Events of refused requests, per account (once their accounts were known). */
  rejected(accounts: readonly (readonly [string, number])[]): void;
  /** `n` more events matched subscription `id` (the audit relay's deliveries). */
  subscriptionMatched(id: string, n: number): void;
  /** Forgets subscriptions no longer configured. */
  keepSubscriptions(ids: ReadonlySet<string>): void;
  account(accountId: string): Readonly<AccountCounts>;
  subscription(id: string): number;
}

const ZERO: Readonly<AccountCounts> = Object.freeze({ received: 0, matched: 0, rejected: 0 });

export function createPipelineCounts(): PipelineCounts {
  const accounts = new Map<string, AccountCounts>();
  const subscriptions = new Map<string, number>();

  function of(accountId: string): AccountCounts | undefined {
    let counts = accounts.get(accountId);
    if (counts === undefined && accounts.size < MAX_COUNTED_ACCOUNTS) {
      counts = { received: 0, matched: 0, rejected: 0 };
      accounts.set(accountId, counts);
    }
    return counts;
  }

  function subscriptionMatched(id: string, n: number) {
    subscriptions.set(id, (subscriptions.get(id) ?? 0) + n);
  }

  return {
    routed(tally) {
      for (const [accountId, received, matched] of tally.accounts) {
        const counts = of(accountId);
        if (counts === undefined) continue;
        counts.received += received;
        counts.matched += matched;
      }
      for (const [id, n] of tally.subscriptions) subscriptionMatched(id, n);
    },
    rejected(events) {
      for (const [accountId, n] of events) {
        const counts = of(accountId);
        if (counts !== undefined) counts.rejected += n;
      }
    },
    subscriptionMatched,
    keepSubscriptions(ids) {
      for (const id of subscriptions.keys()) if (!ids.has(id)) subscriptions.delete(id);
    },
    account: (accountId) => accounts.get(accountId) ?? ZERO,
    subscription: (id) => subscriptions.get(id) ?? 0,
  };
}

/** What one destination of the account shows in the stats. */
export interface DestinationStats {
  id: string;
  status: DestinationHealth['status'] | 'unknown';
  last_error: string | null;
  backlog_records: number;
  records_delivered: number;
  records_spooled: number;
  sink_errors: number;
}

/** Builds GET /pipeline/stats for one account from the counters and the loaded configuration. */
export function accountStats(
  accountId: string,
  deps: {
    counts: PipelineCounts;
    config: Pick<PipelineConfig, 'destinations' | 'subscriptions'>;
    health: (destinationId: string) => DestinationHealth | undefined;
    destinationCounts: (destinationId: string) => DestinationCounts | undefined;
  },
) {
  const { counts, config } = deps;
  const destinations: DestinationStats[] = config.destinations
    .filter((destination) => destination.accountId === accountId)
    .map(({ id }) => {
      const health = deps.health(id);
      const done = deps.destinationCounts(id);
      return {
        id,
        status: health?.status ?? 'unknown',
        last_error: health?.last_error ?? null,
        backlog_records: health?.backlog.events ?? 0,
        records_delivered: done?.delivered ?? 0,
        records_spooled: done?.spooled ?? 0,
        sink_errors: done?.errors ?? 0,
      };
    });
  const sum = (key: 'backlog_records' | 'records_delivered' | 'records_spooled' | 'sink_errors') =>
    destinations.reduce((total, destination) => total + destination[key], 0);
  const events = counts.account(accountId);
  return {
    at: new Date().toISOString(),
    account_id: accountId,
    events_received: events.received,
    events_matched: events.matched,
    events_rejected: events.rejected,
    records_delivered: sum('records_delivered'),
    records_spooled: sum('records_spooled'),
    sink_errors: sum('sink_errors'),
    backlog_records: sum('backlog_records'),
    destinations,
    subscriptions: config.subscriptions
      .filter((subscription) => subscription.accountId === accountId)
      .map(({ id, sources }) => ({
        id,
        types: sources.map((source) => source.type),
        events_matched: counts.subscription(id),
      })),
  };
}

/** What GET /pipeline/stats answers. */
export type PipelineStats = ReturnType<typeof accountStats>;
