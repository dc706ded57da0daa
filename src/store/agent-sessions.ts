import type { Queryable } from './db.ts';

// The session registry shared by the instances of one store (table agent_sessions): which
// instance serves each endpoint (hostname or reserved address), and the facts /tunnel_sessions
// shows. Leases are compared with the database's clock, so instances' clocks need not agree.

/** A live session as the store keeps it. */
export interface SessionRow {
  id: string;
  account_id: string;
  endpoint: string;
  owner_id: string;
  owner_url: string;
  credential_id: string;
  credential_kind: string;
  agent_ip: string;
  agent_version: string;
  region: string;
  started_at: Date;
  os: string;
  arch: string;
  hostname: string;
  metadata: string;
  user_agent: string;
  transport: string;
  /** What it serves: `http`, `https` or `tcp` (its URL is `<proto>://<endpoint>`). */
  proto: string;
  /** Where the agent forwards to, as an ngrok agent said at Bind ('' over SSH). */
  forwards_to: string;
}

/** A session to record: its row without the lease. */
export type NewSession = SessionRow;

// First key of the per-account advisory lock ("ss"): two instances counting an account's
// sessions at once could each admit one past the limit.
const SESSION_CLAIMS = 0x7373;
const LIVE = 'lease_until > now()';
const lease = (param: number) => `now() + $${param} * interval '1 millisecond'`;

/**
 * Records `session` unless its endpoint is served by a live session (that session's id and
 * account) or the account holds `maxPerAccount` live sessions; rows past their lease are dropped
 * first.
 */
export async function claimSession(
  db: { transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T> },
  session: NewSession,
  limits: { maxPerAccount: number; leaseMs: number },
): Promise<{ holder: string; account: string } | { full: true } | undefined> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [
      SESSION_CLAIMS,
      session.account_id,
    ]);
    await tx.query(
      'DELETE FROM agent_sessions WHERE lease_until <= now() AND (endpoint = $1 OR account_id = $2)',
      [session.endpoint, session.account_id],
    );
    const count = await tx.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM agent_sessions WHERE account_id = $1',
      [session.account_id],
    );
    if (count.rows[0].n >= limits.maxPerAccount) return { full: true };
    const columns = Object.keys(session) as (keyof NewSession)[];
    const inserted = await tx.query(
      `INSERT INTO agent_sessions (${columns.join(', ')}, lease_until)
       VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')}, ${lease(columns.length + 1)})
       ON CONFLICT (endpoint) DO NOTHING RETURNING id`,
      [...columns.map((column) => session[column]), limits.leaseMs],
    );
    if (inserted.rows.length > 0) return undefined;
    const holder = await tx.query<{ id: string; account_id: string }>(
      'SELECT id, account_id FROM agent_sessions WHERE endpoint = $1',
      [session.endpoint],
    );
    const row = holder.rows[0];
    return { holder: row?.id ?? 'of another instance', account: row?.account_id ?? '' };
  });
}

/** Removes an ended session's row (only its owner's: a lapsed row may be another's by now). */
export async function releaseSession(db: Queryable, id: string, ownerId: string): Promise<void> {
  await db.query('DELETE FROM agent_sessions WHERE id = $1 AND owner_id = $2', [id, ownerId]);
}

/**
 * Drops the sessions a previous process left behind (a crash): every other owner's with the
 * embedded store (one process at a time), else those of `owner.url` (this address, now ours).
 */
export async function dropPredecessors(
  db: Queryable & { kind: 'pglite' | 'postgres' },
  owner: { id: string; url: string },
): Promise<number> {
  if (db.kind === 'pglite') {
    const dropped = await db.query('DELETE FROM agent_sessions WHERE owner_id <> $1 RETURNING id', [
      owner.id,
    ]);
    return dropped.rows.length;
  }
  if (owner.url === '') return 0;
  const dropped = await db.query(
    'DELETE FROM agent_sessions WHERE owner_id <> $1 AND owner_url = $2 RETURNING id',
    [owner.id, owner.url],
  );
  return dropped.rows.length;
}

/**
 * Extends the lease of every session of `ownerId`: the ids still recorded, and those among them
 * whose credential is gone (deleted through another instance).
 */
export async function renewSessions(
  db: Queryable,
  ownerId: string,
  leaseMs: number,
): Promise<{ recorded: Set<string>; credentialGone: Set<string> }> {
  const renewed = await db.query<{ id: string; credential_live: boolean }>(
    `UPDATE agent_sessions s SET lease_until = ${lease(2)} WHERE owner_id = $1
     RETURNING id, EXISTS (SELECT 1 FROM account_objects o WHERE o.id = s.credential_id)
       AS credential_live`,
    [ownerId, leaseMs],
  );
  return {
    recorded: new Set(renewed.rows.map((row) => row.id)),
    credentialGone: new Set(renewed.rows.filter((r) => !r.credential_live).map((r) => r.id)),
  };
}

/** The live session serving `endpoint`, whichever instance owns it. */
export async function sessionOfEndpoint(
  db: Queryable,
  endpoint: string,
): Promise<SessionRow | undefined> {
  const found = await db.query<SessionRow>(
    `SELECT * FROM agent_sessions WHERE endpoint = $1 AND ${LIVE}`,
    [endpoint],
  );
  return found.rows[0];
}

/**
 * The account's internal endpoints (`<name>.internal`) that live sessions of instances other
 * than `ownerId` serve: their hostnames (the rows' endpoint is `<account>/<name>.internal`).
 */
export async function internalEndpointsElsewhere(
  db: Queryable,
  accountId: string,
  ownerId: string,
): Promise<Set<string>> {
  const found = await db.query<{ endpoint: string }>(
    `SELECT endpoint FROM agent_sessions
      WHERE account_id = $1 AND endpoint LIKE '%.internal' AND owner_id <> $2 AND ${LIVE}`,
    [accountId, ownerId],
  );
  return new Set(found.rows.map((row) => row.endpoint.slice(accountId.length + 1)));
}

/** The account's live session `id`. */
export async function sessionOfAccount(
  db: Queryable,
  accountId: string,
  id: string,
): Promise<SessionRow | undefined> {
  const found = await db.query<SessionRow>(
    `SELECT * FROM agent_sessions WHERE account_id = $1 AND id = $2 AND ${LIVE}`,
    [accountId, id],
  );
  return found.rows[0];
}

/** One page of the account's live sessions on every instance, newest first. */
export async function sessionPage(
  db: Queryable,
  accountId: string,
  page: { limit: number; beforeId: string | undefined },
): Promise<{ rows: SessionRow[]; more: boolean }> {
  const found = await db.query<SessionRow>(
    `SELECT * FROM agent_sessions WHERE account_id = $1 AND ${LIVE}
       AND ($3::text IS NULL OR id < $3) ORDER BY id DESC LIMIT $2`,
    [accountId, page.limit + 1, page.beforeId ?? null],
  );
  const more = found.rows.length > page.limit;
  return { rows: more ? found.rows.slice(0, page.limit) : found.rows, more };
}
