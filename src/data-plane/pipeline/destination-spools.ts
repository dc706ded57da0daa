import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../shared/logger.ts';
import type { DestinationHealth } from './destination-health.ts';

// Each destination's spool is DATA_DIR/spool/<id>: what happens to those directories as
// destinations come and go.

/** Where destination `id` spools. */
export function spoolDir(dataDir: string, id: string): string {
  return join(dataDir, 'spool', id);
}

/** Removes a deleted destination's spool, saying how many events went with it. */
export async function removeSpool(
  dataDir: string,
  logger: Logger,
  id: string,
  backlog: DestinationHealth['backlog'],
): Promise<void> {
  const log = logger.child({ destination_id: id });
  if (backlog.events > 0) {
    log.warn({ backlog }, 'destination deleted: the events in its spool are discarded');
  }
  await rm(spoolDir(dataDir, id), { recursive: true, force: true }).catch((error: unknown) => {
    log.error({ err: error }, 'cannot remove the spool of a deleted destination');
  });
}

/**
 * Spools of destinations deleted while this instance was down are named, not removed: a store
 * that lacks them may as well be the wrong store (DATABASE_URL), and their events were acknowledged.
 */
export async function reportUnknownSpools(
  dataDir: string,
  logger: Logger,
  known: ReadonlySet<string>,
): Promise<void> {
  const names = await readdir(join(dataDir, 'spool')).catch(() => []);
  const unknown = names.filter((name) => !known.has(name)).map((name) => spoolDir(dataDir, name));
  if (unknown.length > 0) {
    logger.warn(
      { spools: unknown },
      'spools of destinations that no longer exist; remove them to discard their events',
    );
  }
}
