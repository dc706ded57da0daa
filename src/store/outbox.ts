import type { Queryable } from './db.ts';

/** The envelope every delivered event has (docs/decisions.md#envelope). */
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

/**
 * Claims the oldest undelivered audit events that no other relay holds, for `leaseSeconds`;
 * a relay that dies lets its lease run out and another takes the rows again.
 */
export async function claimOutbox(
  db: Queryable,
  limit: number,
  leaseSeconds: number,
): Promise<OutboxRow[]> {
  const result = await db.query<OutboxRow>(
    `UPDATE audit_outbox SET lease_until = now() + make_interval(secs => $2)
     WHERE seq IN (
       SELECT seq FROM audit_outbox
       WHERE delivered_at IS NULL AND (lease_until IS NULL OR lease_until < now())
       ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED)
     RETURNING seq::text AS seq, event_id, account_id, event_type, envelope`,
    [limit, leaseSeconds],
  );
  return result.rows.sort((a, b) => (BigInt(a.seq) < BigInt(b.seq) ? -1 : 1));
}

/** Gives claimed rows back at once (delivery failed; retry without waiting for the lease). */
export async function releaseOutbox(db: Queryable, seqs: string[]): Promise<void> {
  if (seqs.length === 0) return;
  await db.query('UPDATE audit_outbox SET lease_until = NULL WHERE seq = ANY($1::bigint[])', [
    seqs,
  ]);
}

/** Marks audit events delivered (durable at every destination they were routed to). */
export async function markDelivered(db: Queryable, seqs: string[]): Promise<void> {
  if (seqs.length === 0) return;
  await db.query('UPDATE audit_outbox SET delivered_at = now() WHERE seq = ANY($1::bigint[])', [
    seqs,
  ]);
}
