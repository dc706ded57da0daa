import type { Queryable } from './db.ts';

/** An event subscription as stored; its sources and destinations are rows of their own. */
export interface EventSubscriptionRow {
  id: string;
  account_id: string;
  description: string;
  metadata: string;
  created_at: Date;
}

/** One event kind a subscription delivers, with its CEL filter and field selection. */
export interface EventSourceRow {
  subscription_id: string;
  type: string;
  /** '' = every event. */
  filter: string;
  /** [] = every field. */
  fields: string[];
  /** The share of filtered events delivered, 0 < r <= 1 (src/data-plane/pipeline/sampling.ts). */
  sample_rate: number;
  /** Header names (lower-case) redacted on top of the credential headers. */
  redact_headers: string[];
  /** true: credential headers and token query parameters delivered in clear (opt-in). */
  keep_credentials: boolean;
  position: number;
  created_at: Date;
}

/** Inserts a subscription row (sources and destinations are set separately). */
export async function insertEventSubscription(
  db: Queryable,
  row: EventSubscriptionRow,
): Promise<void> {
  await db.query(
    `INSERT INTO event_subscriptions (id, account_id, description, metadata, created_at)
     VALUES ($1, $2, $3, $4, $5)`,
    [row.id, row.account_id, row.description, row.metadata, row.created_at],
  );
}

/** One subscription of an account. */
export async function getEventSubscription(
  db: Queryable,
  accountId: string,
  id: string,
): Promise<EventSubscriptionRow | undefined> {
  const result = await db.query<EventSubscriptionRow>(
    'SELECT * FROM event_subscriptions WHERE account_id = $1 AND id = $2',
    [accountId, id],
  );
  return result.rows[0];
}

/** Writes description and metadata of an existing (locked) row. */
export async function updateEventSubscription(
  db: Queryable,
  row: EventSubscriptionRow,
): Promise<void> {
  await db.query(
    'UPDATE event_subscriptions SET description = $3, metadata = $4 WHERE account_id = $1 AND id = $2',
    [row.account_id, row.id, row.description, row.metadata],
  );
}

/** The sources of each subscription, in the order they were given. */
export async function sourcesOf(
  db: Queryable,
  subscriptionIds: string[],
): Promise<Map<string, EventSourceRow[]>> {
  const bySubscription = new Map<string, EventSourceRow[]>(subscriptionIds.map((id) => [id, []]));
  if (subscriptionIds.length === 0) return bySubscription;
  const result = await db.query<EventSourceRow>(
    `SELECT * FROM event_sources WHERE subscription_id = ANY($1)
     ORDER BY subscription_id, position, type`,
    [subscriptionIds],
  );
  for (const row of result.rows) bySubscription.get(row.subscription_id)?.push(row);
  return bySubscription;
}

/** The destination ids of each subscription, in the order they were given. */
export async function destinationIdsOf(
  db: Queryable,
  subscriptionIds: string[],
): Promise<Map<string, string[]>> {
  const bySubscription = new Map<string, string[]>(subscriptionIds.map((id) => [id, []]));
  if (subscriptionIds.length === 0) return bySubscription;
  const result = await db.query<{ subscription_id: string; destination_id: string }>(
    `SELECT subscription_id, destination_id FROM event_subscription_destinations
     WHERE subscription_id = ANY($1) ORDER BY subscription_id, position`,
    [subscriptionIds],
  );
  for (const row of result.rows) bySubscription.get(row.subscription_id)?.push(row.destination_id);
  return bySubscription;
}

/** Inserts one source; a type the subscription already has raises the unique violation. */
export async function insertEventSource(db: Queryable, row: EventSourceRow): Promise<void> {
  await db.query(
    `INSERT INTO event_sources
       (subscription_id, type, filter, fields, sample_rate, redact_headers, keep_credentials,
        position, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      row.subscription_id,
      row.type,
      row.filter,
      JSON.stringify(row.fields),
      row.sample_rate,
      JSON.stringify(row.redact_headers),
      row.keep_credentials,
      row.position,
      row.created_at,
    ],
  );
}

/** Replaces every source of a subscription with `rows` (PATCH of `sources`). */
export async function replaceEventSources(
  db: Queryable,
  subscriptionId: string,
  rows: EventSourceRow[],
): Promise<void> {
  await db.query('DELETE FROM event_sources WHERE subscription_id = $1', [subscriptionId]);
  for (const row of rows) await insertEventSource(db, row);
}

/** Writes the filter, fields, sample rate and redaction of an existing source. */
export async function updateEventSource(db: Queryable, row: EventSourceRow): Promise<void> {
  await db.query(
    `UPDATE event_sources
     SET filter = $3, fields = $4, sample_rate = $5, redact_headers = $6, keep_credentials = $7
     WHERE subscription_id = $1 AND type = $2`,
    [
      row.subscription_id,
      row.type,
      row.filter,
      JSON.stringify(row.fields),
      row.sample_rate,
      JSON.stringify(row.redact_headers),
      row.keep_credentials,
    ],
  );
}

/** Deletes one source and returns the row it was. */
export async function deleteEventSource(
  db: Queryable,
  subscriptionId: string,
  type: string,
): Promise<EventSourceRow | undefined> {
  const result = await db.query<EventSourceRow>(
    'DELETE FROM event_sources WHERE subscription_id = $1 AND type = $2 RETURNING *',
    [subscriptionId, type],
  );
  return result.rows[0];
}

/** Replaces the destinations of a subscription, keeping the order given. */
export async function replaceSubscriptionDestinations(
  db: Queryable,
  subscriptionId: string,
  destinationIds: string[],
): Promise<void> {
  await db.query('DELETE FROM event_subscription_destinations WHERE subscription_id = $1', [
    subscriptionId,
  ]);
  if (destinationIds.length === 0) return;
  await db.query(
    `INSERT INTO event_subscription_destinations (subscription_id, destination_id, position)
     SELECT $1, destination_id, position::int - 1
     FROM unnest($2::text[]) WITH ORDINALITY AS given (destination_id, position)`,
    [subscriptionId, destinationIds],
  );
}
