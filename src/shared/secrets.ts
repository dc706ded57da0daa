import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';
import { link, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { type Config, ConfigError, parseSecretsKey } from '../config/load.ts';
import { fsyncDir } from './files/fsync-dir.ts';
import { pathExists } from './files/path-exists.ts';

// Destination secrets are stored sealed: `enc:v1:<key id>:<base64url(nonce ‖ ciphertext ‖ tag)>`,
// AES-256-GCM with a random 96-bit nonce per value. The key id (a hash prefix of the key, which
// reveals nothing of it) says which key sealed a value, so a rotation can open values of the
// previous keys and reseal them with the current one.

const PREFIX = 'enc:v1:';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
/** Where the generated key is kept when SECRETS_KEY is unset. */
export const SECRETS_KEY_FILE = 'secrets.key';

/** Seals and opens secrets with the configured keys. */
export interface Keyring {
  /** The secret encrypted with the current key. */
  seal(plain: string): string;
  /** The secret a sealed value holds; a value stored in clear by an earlier version, as is. */
  open(value: string): string;
  /** True when the value is not sealed with the current key (in clear, or an older key). */
  stale(value: string): boolean;
  /**
   * Keys for `purpose` derived from the current key (first) and the previous ones, so instances
   * sharing SECRETS_KEY agree, also midway through a rotation.
   */
  derive(purpose: string): Buffer[];
}

/** A key's id: the first 8 characters of its SHA-256 in base64url. */
function keyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('base64url').slice(0, 8);
}

/** A keyring sealing with `current` and opening values of `current` and `previous`. */
export function createKeyring(current: Buffer, previous: readonly Buffer[] = []): Keyring {
  const currentId = keyId(current);
  const keys = new Map([...previous, current].map((key) => [keyId(key), key]));
  return {
    seal(plain) {
      const nonce = randomBytes(NONCE_BYTES);
      const cipher = createCipheriv('aes-256-gcm', current, nonce);
      const sealed = Buffer.concat([nonce, cipher.update(plain, 'utf8'), cipher.final()]);
      return `${PREFIX}${currentId}:${Buffer.concat([sealed, cipher.getAuthTag()]).toString('base64url')}`;
    },
    open(value) {
      if (!value.startsWith(PREFIX)) return value;
      const [id, data = ''] = value.slice(PREFIX.length).split(':');
      const key = keys.get(id);
      if (key === undefined) {
        throw new ConfigError(
          'SECRETS_KEY',
          `does not open the store's secrets: one is sealed with key ${id}, which is neither ` +
            `SECRETS_KEY (${currentId}) nor in SECRETS_KEY_PREVIOUS; set the key that sealed it ` +
            '(a generated key is in DATA_DIR/secrets.key of the instance that made it), the same on every instance',
        );
      }
      const body = Buffer.from(data, 'base64url');
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, body.subarray(0, NONCE_BYTES));
        decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
        const text = body.subarray(NONCE_BYTES, body.length - TAG_BYTES);
        return Buffer.concat([decipher.update(text), decipher.final()]).toString('utf8');
      } catch (error) {
        throw new Error(`a destination secret encrypted with key ${id} does not decrypt`, {
          cause: error,
        });
      }
    },
    stale: (value) => !value.startsWith(`${PREFIX}${currentId}:`),
    derive: (purpose) =>
      [current, ...previous].map((key) => createHmac('sha256', key).update(purpose).digest()),
  };
}

// The generated key is written whole to a temporary file and linked into place, so a crash or a
// second process never sees a partial key; fsync'd, since losing it loses every secret.
async function createKeyFile(path: string): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flush: true });
  try {
    await link(tmp, path);
    await fsyncDir(dirname(path));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    await rm(tmp, { force: true });
  }
}

async function keyFromFile(dataDir: string): Promise<Buffer> {
  const path = join(dataDir, SECRETS_KEY_FILE);
  if (!(await pathExists(path))) await createKeyFile(path);
  return parseSecretsKey((await readFile(path, 'utf8')).trim(), path);
}

/**
 * SECRETS_KEY is unset with a shared store: each instance would generate a key of its own and
 * seal with it what the others cannot open (docs/decisions.md#shared-secrets-key).
 */
async function sharedStoreWithoutKey(dataDir: string): Promise<ConfigError> {
  const path = join(dataDir, SECRETS_KEY_FILE);
  const how = (await pathExists(path))
    ? `this instance generated one earlier: set SECRETS_KEY to the content of ${path} on every instance`
    : "if an instance ran on this database without it, take the key from that instance's DATA_DIR/secrets.key; else make one (openssl rand -base64 32)";
  return new ConfigError(
    'SECRETS_KEY',
    `must be set with DATABASE_URL, the same on every instance sharing the store; ${how}`,
  );
}

/**
 * The configured keyring: SECRETS_KEY, or with the embedded store the key in
 * DATA_DIR/secrets.key (made on first start). Throws ConfigError when a shared store has none.
 */
export async function loadKeyring(
  config: Pick<Config, 'dataDir' | 'databaseUrl' | 'secretsKey' | 'secretsKeyPrevious'>,
): Promise<Keyring> {
  if (config.secretsKey === undefined && config.databaseUrl !== undefined) {
    throw await sharedStoreWithoutKey(config.dataDir);
  }
  const current = config.secretsKey ?? (await keyFromFile(config.dataDir));
  return createKeyring(current, config.secretsKeyPrevious);
}
