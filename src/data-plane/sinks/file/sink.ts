import { type FileHandle, lstat, mkdir, open, readdir, rename } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { fsyncDir } from '../../../shared/files/fsync-dir.ts';
import { pathExists } from '../../../shared/files/path-exists.ts';
import type { Logger } from '../../../shared/logger.ts';
import { withSinkContract } from '../contract.ts';
import { type Sink, SinkError } from '../types.ts';
import type { FileSinkConfig } from './config.ts';

// On-disk layout: the file being written is `events-<UTC yyyymmddThhmmssZ>-<seq>.ndjson.open`;
// rotation (size, age, close) fsyncs it and renames it to drop `.open`, so a reader that ignores
// `*.open` only ever sees complete files. A leftover `.open` file (crash) is trimmed to its last
// complete line and renamed at the next start. One directory belongs to one destination.

const OPEN_SUFFIX = '.open';

/** What the file sink needs: its validated settings and the service logger. */
export interface FileSinkDeps {
  config: FileSinkConfig;
  logger: Logger;
}

interface ActiveFile {
  fh: FileHandle;
  name: string;
  size: number;
  timer: NodeJS.Timeout;
}

// Disk problems an operator or time can fix are retried; a path we may never write is permanent.
const PERMANENT_CODES = new Set([
  'EACCES',
  'EPERM',
  'EROFS',
  'ENOTDIR',
  'EISDIR',
  'ENAMETOOLONG',
  'ELOOP',
]);

/** Maps a filesystem error to a SinkError: permission and path errors are permanent. */
export function fileSinkError(err: unknown): SinkError {
  if (err instanceof SinkError) return err;
  const code = (err as NodeJS.ErrnoException)?.code ?? '';
  const message = err instanceof Error ? err.message : String(err);
  return new SinkError(`file sink: ${message}`, !PERMANENT_CODES.has(code), { cause: err });
}

function utcStamp(date: Date): string {
  return date
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
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

/** Builds the NDJSON file sink: rotating files, fsync'd before write() resolves. */
export function createFileSink(deps: FileSinkDeps): Sink {
  const { root, dir, maxFileBytes, maxFileAgeMs } = deps.config;
  const log = deps.logger.child({ sink: 'file', dir });
  let ready = false;
  let seq = 0;
  let active: ActiveFile | undefined;
  let chain: Promise<unknown> = Promise.resolve();

  // Writes, rotations and close run one after another: a file is never renamed mid-write.
  function serial<T>(op: () => Promise<T>): Promise<T> {
    const run = chain.then(op);
    chain = run.catch(() => {});
    return run;
  }

  async function recover(): Promise<void> {
    await makeDirInside(root, dir);
    for (const name of await readdir(dir)) {
      if (!name.endsWith(OPEN_SUFFIX)) continue;
      const path = join(dir, name);
      await trimPartialLine(path);
      await rename(path, path.slice(0, -OPEN_SUFFIX.length));
      log.info({ file: name }, 'finished a file left open by a previous run');
    }
    await fsyncDir(dir);
    ready = true;
  }

  async function openNext(): Promise<ActiveFile> {
    const stamp = utcStamp(new Date());
    for (;;) {
      const name = `events-${stamp}-${String(seq++).padStart(6, '0')}.ndjson`;
      // Same second after a restart: a name is taken (finished or open), try the next number.
      if (await pathExists(join(dir, name))) continue;
      try {
        const fh = await open(join(dir, name + OPEN_SUFFIX), 'wx');
        await fsyncDir(dir);
        const timer = setTimeout(() => {
          serial(async () => {
            if (active?.name === name) await finish();
          }).catch((err) => log.warn({ err }, 'age rotation failed'));
        }, maxFileAgeMs);
        timer.unref();
        return { fh, name, size: 0, timer };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
    }
  }

  async function finish(): Promise<void> {
    const file = active;
    if (!file) return;
    active = undefined;
    clearTimeout(file.timer);
    await file.fh.close();
    await rename(join(dir, file.name + OPEN_SUFFIX), join(dir, file.name));
    await fsyncDir(dir);
  }

  // The batch's blocks in one writev (a short write, or more blocks than the OS takes at once,
  // goes on with the rest), then one fdatasync.
  async function writeAll(file: ActiveFile, chunks: readonly Buffer[], size: number) {
    let written = 0;
    while (written < size) {
      const { bytesWritten } = await file.fh.writev(rest(chunks, written), file.size + written);
      written += bytesWritten;
    }
    await file.fh.datasync();
  }

  // Finish what a crash left open now, not at this destination's next event: readers skip
  // `.open` files, so acknowledged events must not wait for traffic that may never come.
  // On failure the next write tries again (and reports the error).
  serial(recover).catch((err) => log.warn({ err }, 'cannot finish files left open yet'));

  return withSinkContract('file', {
    write(batch) {
      return serial(async () => {
        const size = batch.bytes;
        try {
          if (!ready) await recover();
          if (active && active.size > 0 && active.size + size > maxFileBytes) await finish();
          active ??= await openNext();
          const file = active;
          try {
            await writeAll(
              file,
              batch.blocks.map((block) => block.text),
              size,
            );
            file.size += size;
          } catch (err) {
            // Drop what part of the batch reached the file, then start a fresh file next time.
            await file.fh.truncate(file.size).catch(() => {});
            await finish().catch(() => {});
            throw err;
          }
        } catch (err) {
          throw fileSinkError(err);
        }
      });
    },
    close() {
      return serial(finish);
    },
  });
}

/** The chunks without their first `skip` bytes (views, no copy). */
function rest(chunks: readonly Buffer[], skip: number): Buffer[] {
  const out: Buffer[] = [];
  for (const chunk of chunks) {
    if (skip >= chunk.length) skip -= chunk.length;
    else {
      out.push(skip > 0 ? chunk.subarray(skip) : chunk);
      skip = 0;
    }
  }
  return out;
}
