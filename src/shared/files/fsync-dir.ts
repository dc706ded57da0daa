import { open } from 'node:fs/promises';

/** Flushes a directory's entries (a created, renamed or removed file) to disk. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
