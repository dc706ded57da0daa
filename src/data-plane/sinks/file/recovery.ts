import { lstat, mkdir, open, readdir, rename } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { fsyncDir } from '../../../shared/files/fsync-dir.ts';
import type { Logger } from '../../../shared/logger.ts';
import { SinkError } from '../types.ts';

// What a crash leaves in a file destination's directory, and how a start makes it whole: the
// file being written ends in `.open` (see sink.ts); one left over is trimmed to its last complete
// line and renamed, so readers that skip `*.open` see it.

/** The suffix of the file being written. */
export const OPEN_SUFFIX = '.open';

/** Makes `dir` inside `root` (safely, see makeDirInside), then finishes the files left open. */
export async function finishLeftOpen(root: string, dir: string, log: Logger): Promise<void> {
  await makeDirInside(root, dir);
  for (const name of await readdir(dir)) {
    if (!name.endsWith(OPEN_SUFFIX)) continue;
    const path = join(dir, name);
    await trimPartialLine(path);
    await rename(path, path.slice(0, -OPEN_SUFFIX.length));
    log.info({ file: name }, 'finished a file left open by a previous run');
  }
  await fsyncDir(dir);
}

// Creates dir one component at a time from root down, refusing a symbolic link anywhere on the
// way: a link planted in an account's directory must not lead its events somewhere else.
async function makeDirInside(root: string, dir: string): Promise<void> {
  await mkdir(root, { recursive: true });
  let current = root;
  for (const part of ['', ...relative(root, dir).split(sep).filter(Boolean)]) {
    current = join(current, part);
    await mkdir(current).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    if ((await lstat(current)).isSymbolicLink()) {
      throw new SinkError(
        `file sink: ${current} is a symbolic link; a destination's directory may not pass through one`,
        false,
      );
    }
  }
}

// Cuts a crashed file after its last newline: a partial line was never acknowledged.
async function trimPartialLine(path: string): Promise<void> {
  const fh = await open(path, 'r+');
  try {
    const { size } = await fh.stat();
    const chunk = Buffer.alloc(64 * 1024);
    let end = size;
    while (end > 0) {
      const start = Math.max(0, end - chunk.length);
      const { bytesRead } = await fh.read(chunk, 0, end - start, start);
      const nl = chunk.subarray(0, bytesRead).lastIndexOf(0x0a);
      if (nl >= 0) {
        end = start + nl + 1;
        break;
      }
      end = start;
    }
    if (end < size) {
      await fh.truncate(end);
      await fh.sync();
    }
  } finally {
    await fh.close();
  }
}
