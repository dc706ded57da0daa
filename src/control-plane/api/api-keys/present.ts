import type { ApiKeyRow } from '../../../store/api-keys.ts';

/** The API key resource; `token` is shown only in the response that creates the key. */
export function presentApiKey(row: ApiKeyRow, publicUrl: string, token: string | null = null) {
  return {
    id: row.id,
    uri: `${publicUrl}/api_keys/${row.id}`,
    description: row.description,
    metadata: row.metadata,
    created_at: row.created_at.toISOString(),
    token,
  };
}

/** The API key resource as the API shows it. */
export type ApiKey = ReturnType<typeof presentApiKey>;
