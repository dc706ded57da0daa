import type { Keyring } from '../../shared/secrets.ts';
import type { Db, Queryable } from '../../store/db.ts';
import { type TargetSettings, targetKind } from '../sinks/index.ts';
import { mapSecrets as mapSettingsSecrets } from '../sinks/settings.ts';

// Targets are stored with their secrets (each sink's writeOnly settings) sealed by the
// keyring (src/shared/secrets.ts); every function here seals on write and opens on read, so rows in
// memory hold them in clear for the pipeline, and the store's files never do.

/** Exactly one kind of target (a kind of src/data-plane/sinks/index.ts), stored whole, secrets sealed. */
export type DestinationTarget = TargetSettings;

/** An event destination as stored. */
export interface EventDestinationRow {
  id: string;
  account_id: string;
  description: string;
  metadata: string;
  format: 'JSON';
  target: DestinationTarget;
  created_at: Date;
}

/** The target with each secret (its schema's writeOnly settings) replaced by `change(secret)`. */
function mapSecrets(
  target: DestinationTarget,
  change: (secret: string) => string,
): DestinationTarget {
  const { sink, settings } = targetKind(target);
  return { [sink.kind]: mapSettingsSecrets(sink.settings, settings, change) };
}

/** The target with its secrets in clear, as stored targets are sealed. */
export function openTarget(target: DestinationTarget, keyring: Keyring): DestinationTarget {
  return mapSecrets(target, keyring.open);
}

function sealedJson(target: DestinationTarget, keyring: Keyring): string {
  return JSON.stringify(mapSecrets(target, keyring.seal));
}

/** A row as read from the store, its target's secrets opened. */
export function openRow<Row extends { target: DestinationTarget } | undefined>(
  row: Row,
  keyring: Keyring,
): Row {
  return row === undefined ? row : { ...row, target: openTarget(row.target, keyring) };
}

/** Inserts a destination row. */
export async function insertEventDestination(
  db: Queryable,
  row: EventDestinationRow,
  keyring: Keyring,
): Promise<void> {
  await db.query(
    `INSERT INTO event_destinations (id, account_id, description, metadata, format, target, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [
      row.id,
      row.account_id,
      row.description,
      row.metadata,
      row.format,
      sealedJson(row.target, keyring),
      row.created_at,
    ],
  );
}

// One destination of an account by `sql` ($1 account, $2 id), its secrets opened.
async function oneRow(
  sql: string,
  db: Queryable,
  accountId: string,
  id: string,
  keyring: Keyring,
): Promise<EventDestinationRow | undefined> {
  const result = await db.query<EventDestinationRow>(sql, [accountId, id]);
  return openRow(result.rows[0], keyring);
}

/** One destination of an account. */
export const getEventDestination = oneRow.bind(
  undefined,
  'SELECT * FROM event_destinations WHERE account_id = $1 AND id = $2',
);

/**
 * The ids among `ids` that name destinations of the account, locked against deletion until the
 * caller's transaction ends (so a subscription never names a destination being deleted).
 */
export async function lockDestinationsForReference(
  db: Queryable,
  accountId: string,
  ids: string[],
): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const result = await db.query<{ id: string }>(
    'SELECT id FROM event_destinations WHERE account_id = $1 AND id = ANY($2) FOR KEY SHARE',
    [accountId, ids],
  );
  return new Set(result.rows.map((row) => row.id));
}

/** Writes description, metadata, format and target of an existing (locked) row. */
export async function updateEventDestination(
  db: Queryable,
  row: EventDestinationRow,
  keyring: Keyring,
): Promise<void> {
  await db.query(
    `UPDATE event_destinations SET description = $3, metadata = $4, format = $5, target = $6
     WHERE account_id = $1 AND id = $2`,
    [
      row.account_id,
      row.id,
      row.description,
      row.metadata,
      row.format,
      sealedJson(row.target, keyring),
    ],
  );
}

/** The subscriptions that still deliver to a destination, oldest first. */
export async function subscriptionsUsingDestination(
  db: Queryable,
  destinationId: string,
): Promise<string[]> {
  const result = await db.query<{ subscription_id: string }>(
    `SELECT subscription_id FROM event_subscription_destinations
     WHERE destination_id = $1 ORDER BY subscription_id`,
    [destinationId],
  );
  return result.rows.map((row) => row.subscription_id);
}

/** Every file destination's account and path (for moving files of the old layout at start). */
export async function fileDestinationPaths(
  db: Queryable,
): Promise<{ accountId: string; path: string }[]> {
  const result = await db.query<{ accountId: string; path: string }>(
    `SELECT account_id AS "accountId", target -> 'file' ->> 'path' AS path
     FROM event_destinations WHERE target ? 'file'`,
  );
  return result.rows;
}

/**
 * Seals again every secret not sealed with the keyring's current key: those an earlier version
 * stored in clear, and those of a key being rotated out. Run at start; returns the rows changed.
 */
export async function resealDestinationSecrets(db: Db, keyring: Keyring): Promise<number> {
  const changed = await db.transaction(async (tx) => {
    const rows = await tx.query<{ id: string; target: DestinationTarget }>(
      'SELECT id, target FROM event_destinations ORDER BY id FOR UPDATE',
    );
    let changed = 0;
    for (const row of rows.rows) {
      let stale = false;
      mapSecrets(row.target, (secret) => {
        stale ||= keyring.stale(secret);
        return secret;
      });
      if (!stale) continue;
      await tx.query('UPDATE event_destinations SET target = $2 WHERE id = $1', [
        row.id,
        sealedJson(openTarget(row.target, keyring), keyring),
      ]);
      changed++;
    }
    return changed;
  });
  // The rows' earlier versions stay in the table's pages until the table is rewritten.
  if (changed > 0) await db.query('VACUUM FULL event_destinations');
  return changed;
}
