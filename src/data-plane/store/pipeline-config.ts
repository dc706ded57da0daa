import type { Keyring } from '../../shared/secrets.ts';
import type { Db, Queryable } from '../../store/db.ts';
import { type DestinationTarget, openTarget } from './event-destinations.ts';

/** A destination as the pipeline delivers to it: the full target, secrets included. */
export interface PipelineDestination {
  id: string;
  accountId: string;
  format: 'JSON';
  target: DestinationTarget;
}

/** A subscription as the pipeline routes by it. */
export interface PipelineSubscription {
  id: string;
  accountId: string;
  sources: {
    type: string;
    filter: string;
    fields: string[];
    sampleRate: number;
    redactHeaders: string[];
    keepCredentials: boolean;
  }[];
  destinationIds: string[];
}

/**
 * Every account's routing at one version. The hot path never reads the store: it routes by this
 * snapshot and reloads it when told (or when the stored version moves on).
 */
export interface PipelineConfig {
  version: number;
  destinations: PipelineDestination[];
  subscriptions: PipelineSubscription[];
}

/**
 * Moves the routing version on, in the caller's transaction. Every routing change calls it, so
 * the version commits with the change; the row lock also orders concurrent changes.
 */
export async function bumpPipelineVersion(db: Queryable): Promise<number> {
  const result = await db.query<{ version: string }>(
    'UPDATE pipeline_version SET version = version + 1 RETURNING version::text AS version',
  );
  return Number(result.rows[0].version);
}

/** The routing version now stored; cheap enough to poll. */
export async function currentPipelineVersion(db: Queryable): Promise<number> {
  const result = await db.query<{ version: string }>(
    'SELECT version::text AS version FROM pipeline_version',
  );
  return Number(result.rows[0].version);
}

/** Loads all routing as one consistent snapshot (a repeatable-read transaction), secrets opened. */
export async function loadPipelineConfig(db: Db, keyring: Keyring): Promise<PipelineConfig> {
  return db.transaction(async (tx) => {
    await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
    const version = await currentPipelineVersion(tx);
    const destinations = await tx.query<{
      id: string;
      account_id: string;
      format: 'JSON';
      target: DestinationTarget;
    }>('SELECT id, account_id, format, target FROM event_destinations ORDER BY id');
    const subscriptions = await tx.query<{ id: string; account_id: string }>(
      'SELECT id, account_id FROM event_subscriptions ORDER BY id',
    );
    const sources = await tx.query<{
      subscription_id: string;
      type: string;
      filter: string;
      fields: string[];
      sample_rate: number;
      redact_headers: string[];
      keep_credentials: boolean;
    }>(
      `SELECT subscription_id, type, filter, fields, sample_rate, redact_headers, keep_credentials
       FROM event_sources
       ORDER BY subscription_id, position, type`,
    );
    const links = await tx.query<{ subscription_id: string; destination_id: string }>(
      `SELECT subscription_id, destination_id FROM event_subscription_destinations
       ORDER BY subscription_id, position`,
    );
    const byId = new Map<string, PipelineSubscription>();
    for (const row of subscriptions.rows) {
      byId.set(row.id, { id: row.id, accountId: row.account_id, sources: [], destinationIds: [] });
    }
    for (const row of sources.rows) {
      byId.get(row.subscription_id)?.sources.push({
        type: row.type,
        filter: row.filter,
        fields: row.fields,
        sampleRate: row.sample_rate,
        redactHeaders: row.redact_headers,
        keepCredentials: row.keep_credentials,
      });
    }
    for (const row of links.rows)
      byId.get(row.subscription_id)?.destinationIds.push(row.destination_id);
    return {
      version,
      destinations: destinations.rows.map((row) => ({
        id: row.id,
        accountId: row.account_id,
        format: row.format,
        target: openTarget(row.target, keyring),
      })),
      subscriptions: [...byId.values()],
    };
  });
}
