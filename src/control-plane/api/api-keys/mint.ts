import type { Caller } from '../../../shared/caller.ts';
import { newId } from '../../../shared/ids.ts';
import { hashToken, newToken } from '../../../shared/tokens.ts';
import { insertApiKey } from '../../../store/api-keys.ts';
import type { Db } from '../../../store/db.ts';
import { withAudit } from '../audit.ts';
import { API_KEYS, auditEvent } from '../resources.ts';
import { type ApiKey, presentApiKey } from './present.ts';

/** Everything a new key needs; `token` overrides the random token (BOOTSTRAP_API_KEY). */
export interface NewApiKey {
  accountId: string;
  description?: string;
  metadata?: string;
  token?: string;
}

/**
 * Creates an API key with its audit event and returns it with its token, the only time the
 * token is ever visible. Used by the API, the first-start bootstrap and the CLI.
 */
export async function mintApiKey(
  db: Db,
  key: NewApiKey,
  principal: Caller | null,
  publicUrl: string,
): Promise<ApiKey> {
  const token = key.token ?? newToken();
  const created = await withAudit(
    db,
    { eventType: auditEvent(API_KEYS, 'created'), accountId: key.accountId, principal, publicUrl },
    async (tx) => {
      const row = await insertApiKey(tx, {
        id: newId('ak'),
        account_id: key.accountId,
        description: key.description ?? '',
        metadata: key.metadata ?? '',
        token_hash: hashToken(token),
        created_at: new Date(),
      });
      return presentApiKey(row, publicUrl);
    },
  );
  return { ...created, token };
}
