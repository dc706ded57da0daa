import type { Keyring } from '../../shared/secrets.ts';
import type { Db } from '../../store/db.ts';

/**
 * The service's ACME account key for a directory, created once and kept sealed in the store, so
 * every instance uses one account (a CA limits how many accounts an address may create).
 */
export async function acmeAccountKey(
  db: Db,
  keyring: Keyring,
  directoryUrl: string,
  create: () => Promise<string>,
): Promise<string> {
  const read = async () =>
    (
      await db.query<{ sealed_key: string }>(
        'SELECT sealed_key FROM acme_accounts WHERE directory_url = $1',
        [directoryUrl],
      )
    ).rows[0]?.sealed_key;
  let sealed = await read();
  if (sealed === undefined) {
    await db.query(
      `INSERT INTO acme_accounts (directory_url, sealed_key, created_at) VALUES ($1, $2, now())
       ON CONFLICT (directory_url) DO NOTHING`,
      [directoryUrl, keyring.seal(await create())],
    );
    // Another instance may have won the race: everyone uses the stored key.
    sealed = (await read())!;
  }
  return keyring.open(sealed);
}
