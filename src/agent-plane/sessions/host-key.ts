import { createHash } from 'node:crypto';
import { link, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import ssh2 from 'ssh2';
import { fsyncDir } from '../../shared/files/fsync-dir.ts';
import { pathExists } from '../../shared/files/path-exists.ts';

/** The agent listener's host key, under DATA_DIR (OpenSSH format, mode 0600). */
export const HOST_KEY_FILE = 'ssh_host_ed25519_key';

/**
 * A new ed25519 key in OpenSSH format. ssh2 1.17's generator drops the leading zero byte of the
 * public key in about one key of 600 (measured: 5 of 3,000), and then cannot parse its own key:
 * such a key is made again.
 */
export function newHostKey(): string {
  for (;;) {
    const { private: key } = ssh2.utils.generateKeyPairSync('ed25519');
    if (!(ssh2.utils.parseKey(key) instanceof Error)) return key;
  }
}

// Made on first start and linked into place whole, so agents that pinned the key keep trusting
// it across restarts and a crash never leaves half a key.
async function createHostKey(path: string): Promise<void> {
  const privateKey = newHostKey();
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, privateKey, { mode: 0o600, flush: true });
  try {
    await link(tmp, path);
    await fsyncDir(dirname(path));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    await rm(tmp, { force: true });
  }
}

/** The host key in DATA_DIR, created on first start. */
export async function loadHostKey(dataDir: string): Promise<Buffer> {
  const path = join(dataDir, HOST_KEY_FILE);
  if (!(await pathExists(path))) await createHostKey(path);
  return readFile(path);
}

/**
 * The host key's fingerprint as OpenSSH prints it (`ssh-keygen -lf`, and ssh on first contact):
 * `SHA256:` and the unpadded base64 of the public key blob's SHA-256. Printed at start so that
 * whoever connects an agent can check the key before trusting it.
 */
export function hostKeyFingerprint(privateKey: Buffer | string): string {
  const parsed = ssh2.utils.parseKey(privateKey);
  if (parsed instanceof Error) throw parsed;
  const digest = createHash('sha256').update(parsed.getPublicSSH()).digest('base64');
  return `SHA256:${digest.replace(/=+$/, '')}`;
}
