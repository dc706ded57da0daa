import type { Caller } from '../../../shared/caller.ts';
import { newToken } from '../../../shared/tokens.ts';
import type { Db } from '../../../store/db.ts';
import { withAudit } from '../audit.ts';
import { presentObject } from '../objects/present.ts';
import { newObject } from '../objects/storage.ts';
import type { JsonObject } from '../resource-types.ts';
import { auditEvent } from '../resources.ts';
import { API_KEY_TABLE, apiKeyDraft } from './family.ts';
import { API_KEYS } from './resource.ts';

/** Everything a new key needs; `token` overrides the random token (BOOTSTRAP_API_KEY). */
export interface NewApiKey {
  accountId: string;
  description?: string;
  metadata?: string;
  token?: string;
}

/** An API key as the API shows it, with its token. */
export type ApiKey = JsonObject & { id: string; token: string };

/**
 * Creates an API key with its audit event, outside a request: the first-start bootstrap and the
 * CLI (the API's POST is the family's generic create). Returns it with its token, the only time
 * the token is ever visible.
 */
export async function mintApiKey(
  db: Db,
  key: NewApiKey,
  principal: Caller | null,
  publicUrl: string,
): Promise<ApiKey> {
  const token = key.token ?? newToken();
  const row = newObject(API_KEYS, key.accountId, apiKeyDraft(token), key);
  const created = await withAudit(
    db,
    { eventType: auditEvent(API_KEYS, 'created'), accountId: key.accountId, principal, publicUrl },
    async (tx) => {
      await API_KEY_TABLE.insert(tx, row);
      return presentObject(API_KEYS, row, publicUrl);
    },
  );
  return { ...created, id: row.id, token };
}
