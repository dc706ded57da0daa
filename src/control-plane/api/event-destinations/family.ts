import { accountEventsDir } from '../../../data-plane/sinks/file/layout.ts';
import {
  type EventDestinationRow,
  insertEventDestination,
  openTarget,
  subscriptionsUsingDestination,
  updateEventDestination,
} from '../../../data-plane/store/event-destinations.ts';
import { AppError } from '../../../shared/errors.ts';
import type { Keyring } from '../../../shared/secrets.ts';
import { isUniqueViolation, type Queryable } from '../../../store/db.ts';
import type { Family, FamilyContext, StoredObject } from '../objects/family.ts';
import { ownTable } from '../objects/storage.ts';
import { EVENT_DESTINATIONS } from './resource.ts';
import { completeTarget, presentTarget, readTarget, type TargetInput } from './target.ts';
import { addDestinationTestAction } from './test-action.ts';

/** A unique violation on a destination can only be its file path within its account (migration 005). */
async function pathFree(write: Promise<void>): Promise<void> {
  try {
    await write;
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    throw new AppError(
      'ERR_INVALID_TARGET',
      '"target.file.path" is already used by another destination',
      { field: 'target.file.path' },
    );
  }
}

/** The event_destinations table, its targets' secrets sealed there and in clear here. */
function destinationTable(keyring: Keyring) {
  const rowOf = (destination: StoredObject) => ({
    ...destination,
    format: 'JSON' as const,
    target: destination.fields.target as EventDestinationRow['target'],
  });
  const write =
    (store: typeof insertEventDestination) => (tx: Queryable, destination: StoredObject) =>
      pathFree(store(tx, rowOf(destination), keyring));
  return ownTable<EventDestinationRow>({
    table: 'event_destinations',
    fields: (row) => ({ format: row.format, target: openTarget(row.target, keyring) }),
    insert: write(insertEventDestination),
    update: write(updateEventDestination),
  });
}

/** The events waiting in a destination's spool, from the health the pipeline reports. */
function backlogOf(health: unknown): { events: number; bytes: number } | undefined {
  const backlog = (health as { backlog?: { events: number; bytes: number } } | undefined)?.backlog;
  return backlog !== undefined && backlog.events > 0 ? backlog : undefined;
}

/**
 * Refuses to delete a destination a subscription still names, or one whose spool holds events
 * (deleting discards the spool) unless the caller said `discard_backlog=true`. The lock on the
 * destination makes subscriptions about to name it wait for the delete.
 */
async function refuseDelete(destination: StoredObject, ctx: FamilyContext): Promise<void> {
  const { id } = destination;
  const users = await subscriptionsUsingDestination(ctx.tx, id);
  if (users.length > 0) {
    const named = `event subscription${users.length > 1 ? 's' : ''} ${users.join(', ')}`;
    throw new AppError(
      'ERR_DESTINATION_IN_USE',
      `event destination "${id}" is still used by ${named}; remove it from destination_ids first`,
      { id, subscription_ids: users },
    );
  }
  const backlog = backlogOf(ctx.deps.destinationHealth?.(id));
  if (backlog !== undefined && !ctx.query?.discard_backlog) {
    throw new AppError(
      'ERR_DESTINATION_BACKLOG',
      `event destination "${id}" still has ${backlog.events} events waiting in its spool; ` +
        'wait until its health shows an empty backlog, or delete with ?discard_backlog=true to drop them',
      { id, backlog },
    );
  }
}

/** The directory a file target's path names a directory of its own in. */
const accountDir = (ctx: FamilyContext) => accountEventsDir(ctx.config.dataDir, ctx.accountId);

/**
 * Event destinations: a target read against its sink's settings (target.ts), its secrets
 * write-only; the only format is JSON, in any letter case (docs/decisions.md#destination-format).
 * A PATCH's `target` replaces the whole target, but an omitted secret is kept while the kind stays.
 * Answers add the pipeline's delivery health; POST /{id}/test is test-action.ts.
 */
export const EVENT_DESTINATIONS_FAMILY: Family = {
  resource: EVENT_DESTINATIONS,
  storage: destinationTable,
  routing: true,
  prepare: (body) => (body.target === undefined ? undefined : readTarget(body.target)),
  create: (_body, ctx) => ({
    fields: {
      format: 'JSON',
      target: completeTarget(ctx.prepared as TargetInput, undefined, accountDir(ctx)),
    },
  }),
  update(current, _body, ctx) {
    if (ctx.prepared === undefined) return {};
    const previous = current.fields.target as EventDestinationRow['target'];
    const target = completeTarget(ctx.prepared as TargetInput, previous, accountDir(ctx));
    return { fields: { target } };
  },
  beforeDelete: refuseDelete,
  shown: (destinations) =>
    destinations.map((destination) => ({
      target: presentTarget(destination.fields.target as EventDestinationRow['target']),
    })),
  live(id, deps) {
    const health = deps.destinationHealth?.(id);
    return health === undefined ? {} : { health };
  },
  routes: (app, kit) => addDestinationTestAction(app, kit.deps),
};
