import { chmod, lstat, mkdir, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../logger.ts';

/**
 * Creates DATA_DIR with mode 0700, or narrows an existing one to 0700: what the service keeps
 * there (store, spools, event files, the secrets key) is for its own user only.
 */
export async function prepareDataDir(dataDir: string, logger: Logger): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const mode = (await stat(dataDir)).mode & 0o777;
  if ((mode & 0o077) === 0) return;
  try {
    await chmod(dataDir, 0o700);
    logger.info({ data_dir: dataDir, was: mode.toString(8) }, 'DATA_DIR is now mode 0700');
  } catch (error) {
    logger.warn({ err: error, data_dir: dataDir }, 'cannot make DATA_DIR mode 0700');
  }
}

/**
 * Takes group and other permissions off everything under dir (files 0600, directories 0700).
 * For the embedded store: PGlite writes its initial files 0666 and some later ones 0644,
 * whatever the process umask says.
 */
export async function restrictTree(dir: string): Promise<void> {
  for (const name of await readdir(dir)) {
    const path = join(dir, name);
    const info = await lstat(path);
    if (info.isSymbolicLink()) continue;
    if ((info.mode & 0o077) !== 0) await chmod(path, info.isDirectory() ? 0o700 : 0o600);
    if (info.isDirectory()) await restrictTree(path);
  }
}
