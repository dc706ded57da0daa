import type { Queryable } from './db.ts';

/** The envelope every delivered event has (DESIGN.md §4). */
export interface Envelope {
  event_id: string;
  event_type: string;
  event_timestamp: string;
  account_id: string;
  principal: { id: string; uri: string } | null;
  object: unknown;
}

/** Writes an audit event into the outbox, in the caller's transaction. */
export async function appendToOutbox(db: Queryable, envelope: Envelope): Promise<void> {
  await db.query(
    `INSERT INTO audit_outbox (event_id, account_id, event_type, envelope, created_at)
     VALUES ($1, $2, $3, $4, $5)`,
    [
      envelope.event_id,
      envelope.account_id,
      envelope.event_type,
      JSON.stringify(envelope),
      envelope.event_timestamp,
    ],
  );
}

/** An outbox row waiting for delivery. */
export interface OutboxRow {
  seq: string;
  event_id: string;
  account_id: string;
  event_type: string;
  envelope: Envelope;
}

/** The oldest undelivered audit events. */
export async function pendingOutbox(db: Queryable, limit: number): Promise<OutboxRow[]> {
  const result = await db.query<OutboxRow>(
    `SELECT seq, event_id, account_id, event_type, envelope FROM audit_outbox
     WHERE delivered_at IS NULL ORDER BY seq LIMIT $1`,
    [limit],
  );
  return result.rows;
}

/** Marks audit events delivered (durable at every destination they were routed to). */
export async function markDelivered(db: Queryable, seqs: string[]): Promise<void> {
  if (seqs.length === 0) return;
  await db.query('UPDATE audit_outbox SET delivered_at = now() WHERE seq = ANY($1::bigint[])', [
    seqs,
  ]);
}
