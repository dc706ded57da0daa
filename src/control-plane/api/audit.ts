import type { Caller } from '../../shared/caller.ts';
import { newId } from '../../shared/ids.ts';
import type { Db, Queryable } from '../../store/db.ts';
import { appendToOutbox } from '../../store/outbox.ts';

/** What a mutation returns: the resource as GET shows it (the audit event's object). */
export interface Mutation<T> {
  object: T;
}

/**
 * Runs a mutation and writes its audit event in the same transaction, so a change and its event
 * exist together or not at all. `principal` is the API key that made the change, null for the
 * service itself (bootstrap).
 */
export async function withAudit<T>(
  db: Db,
  audit: { eventType: string; accountId: string; principal: Caller | null; publicUrl: string },
  work: (tx: Queryable) => Promise<T>,
): Promise<T> {
  return db.transaction(async (tx) => {
    const object = await work(tx);
    await appendToOutbox(tx, {
      event_id: newId('ev'),
      event_type: audit.eventType,
      event_timestamp: new Date().toISOString(),
      account_id: audit.accountId,
      principal:
        audit.principal === null
          ? null
          : {
              id: audit.principal.keyId,
              uri: `${audit.publicUrl}/api_keys/${audit.principal.keyId}`,
            },
      object,
    });
    return object;
  });
}
