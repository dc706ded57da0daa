import type { Config } from '../config/load.ts';
import { createAccount, storeIsEmpty } from '../store/accounts.ts';
import type { Db } from '../store/db.ts';
import type { ApiKey } from './api/api-keys/mint.ts';
import { mintApiKey } from './api/api-keys/mint.ts';

/**
 * On first start (no account yet) creates an account and its first API key, so a new user can
 * call the API at once. BOOTSTRAP_API_KEY, when set, becomes that key's token. Returns the key
 * (with its token) when one was created.
 */
export async function bootstrapFirstKey(
  db: Db,
  config: Pick<Config, 'bootstrapApiKey' | 'publicUrl'>,
): Promise<(ApiKey & { accountId: string }) | undefined> {
  if (!(await storeIsEmpty(db))) return undefined;
  const accountId = await createAccount(db);
  const key = await mintApiKey(
    db,
    {
      accountId,
      description: 'first API key, created at first start',
      token: config.bootstrapApiKey,
    },
    null,
    config.publicUrl,
  );
  return { ...key, accountId };
}
