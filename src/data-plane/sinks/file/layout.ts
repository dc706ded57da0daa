import { mkdir, readdir, rename, rmdir, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { fsyncDir } from '../../../shared/files/fsync-dir.ts';
import { pathExists } from '../../../shared/files/path-exists.ts';
import type { Logger } from '../../../shared/logger.ts';
import { dirInside } from './config.ts';

// File destinations live in DATA_DIR/events/<account_id>/<path>. Earlier versions wrote them to
// DATA_DIR/events/<path>, one namespace for every account. migrateFileLayout() moves such a
// directory once, at start, in steps that a crash can resume:
//   1. every entry of events/ moves into events/.legacy-partial, renamed to events/.legacy when
//      all are in (inside events/ so that a mount point or symlink there stays as it is);
//   2. each destination's directory moves from .legacy to its account's directory, deepest
//      path first, so a path nested in another account's leaves with its owner;
//   3. the marker is written; what no destination claimed is set aside in events/.unclaimed.

const MARKER = '.layout-per-account';
const STAGING = '.legacy-partial';
const STAGED = '.legacy';
const UNCLAIMED = '.unclaimed';
/** The files a file destination writes (see sink.ts). */
const EVENT_FILE = /^events-.*\.ndjson(\.open)?$/;

/** Where every account's file destinations live: `DATA_DIR/events`. */
export function eventsDir(dataDir: string): string {
  return join(dataDir, 'events');
}

/** One account's directory; its file destinations' paths are relative to it. */
export function accountEventsDir(dataDir: string, accountId: string): string {
  return join(eventsDir(dataDir), accountId);
}

/** A stored file destination, as the layout migration needs it. */
export interface FileDestinationPath {
  accountId: string;
  path: string;
}

async function stage(events: string): Promise<void> {
  const staging = join(events, STAGING);
  await mkdir(staging, { recursive: true });
  for (const name of await readdir(events)) {
    if (name !== STAGING) await rename(join(events, name), join(staging, name));
  }
  await rename(staging, join(events, STAGED));
  await fsyncDir(events);
}

async function moveOne(from: string, to: string, logger: Logger): Promise<void> {
  if (!(await pathExists(from))) return;
  if (await pathExists(to)) {
    logger.warn({ from, to }, 'file layout: both the old and the new directory exist; left as is');
    return;
  }
  await mkdir(dirname(to), { recursive: true });
  await rename(from, to);
}

async function moveDestinations(
  events: string,
  destinations: readonly FileDestinationPath[],
  logger: Logger,
): Promise<void> {
  const staged = join(events, STAGED);
  const moves = destinations.flatMap(({ accountId, path }) => {
    // An earlier version took "." (the events directory itself): it is moved too.
    const from = dirInside(staged, path);
    const to = dirInside(join(events, accountId), path);
    return from === undefined || to === undefined ? [] : [{ from, to }];
  });
  const depth = (dir: string) => relative(staged, dir).split(sep).filter(Boolean).length;
  moves.sort((a, b) => depth(b.from) - depth(a.from));
  for (const { from, to } of moves) {
    if (from !== staged) {
      await moveOne(from, to, logger);
      continue;
    }
    // A destination whose path was "." wrote into events/ itself: only its files are its own.
    for (const name of (await readdir(from)).filter((n) => EVENT_FILE.test(n))) {
      await moveOne(join(from, name), join(to, name), logger);
    }
  }
}

async function setAside(events: string, logger: Logger): Promise<void> {
  const staged = join(events, STAGED);
  const left = await readdir(staged);
  if (left.length === 0) {
    await rmdir(staged);
  } else {
    let aside = join(events, UNCLAIMED);
    if (await pathExists(aside)) aside = `${aside}-${Date.now()}`;
    await rename(staged, aside);
    logger.warn(
      { dir: aside, entries: left },
      'file layout: files of the old layout that no destination claims were set aside',
    );
  }
  await fsyncDir(events);
}

/**
 * Brings DATA_DIR/events to the per-account layout (see the steps above); `destinations` lists
 * every stored file destination and is only called while there is something to move.
 */
export async function migrateFileLayout(
  dataDir: string,
  destinations: () => Promise<FileDestinationPath[]>,
  logger: Logger,
): Promise<void> {
  const events = eventsDir(dataDir);
  await mkdir(events, { recursive: true });
  if (!(await pathExists(join(events, MARKER)))) {
    if (!(await pathExists(join(events, STAGED)))) await stage(events);
    await moveDestinations(events, await destinations(), logger);
    await writeFile(join(events, MARKER), 'file destinations: events/<account_id>/<path>\n');
    await fsyncDir(events);
  }
  if (await pathExists(join(events, STAGED))) await setAside(events, logger);
}
