import { link, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import ssh2 from 'ssh2';
import { fsyncDir } from '../fsync-dir.ts';
import { pathExists } from '../path-exists.ts';

/** The agent listener's host key, under DATA_DIR (OpenSSH format, mode 0600). */
export const HOST_KEY_FILE = 'ssh_host_ed25519_key';

// Made on first start and linked into place whole, so agents that pinned the key keep trusting
// it across restarts and a crash never leaves half a key.
async function createHostKey(path: string): Promise<void> {
  const { private: privateKey } = ssh2.utils.generateKeyPairSync('ed25519');
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
