import { hashToken, newToken } from '../../../shared/tokens.ts';
import { type ApiKeyRow, insertApiKey, updateApiKey } from '../../../store/api-keys.ts';
import type { Draft, Family } from '../objects/family.ts';
import { ownTable } from '../objects/storage.ts';
import { API_KEYS } from './resource.ts';

/** A key's draft: its token shown once, kept only as its SHA-256 (api-key-auth.ts looks it up). */
export function apiKeyDraft(token: string): Draft {
  return {
    fields: {},
    unique: { key: hashToken(token).toString('base64url'), scope: 'service', field: 'token' },
    shownOnce: { token },
  };
}

/** The api_keys table: the token's hash is its unique key. */
export const API_KEY_TABLE = ownTable<ApiKeyRow>({
  table: 'api_keys',
  fields: () => ({}),
  uniqueKey: (row) => Buffer.from(row.token_hash).toString('base64url'),
  async insert(tx, key) {
    await insertApiKey(tx, { ...key, token_hash: Buffer.from(key.unique_key!, 'base64url') });
  },
  update: (tx, key) => updateApiKey(tx, key),
});

/** API keys: nothing of their own but the token, minted here and shown once. */
export const API_KEYS_FAMILY: Family = {
  resource: API_KEYS,
  storage: () => API_KEY_TABLE,
  create: () => apiKeyDraft(newToken()),
};
