import { lockDestinationsForReference } from '../../../data-plane/store/event-destinations.ts';
import { AppError } from '../../../shared/errors.ts';
import type { Queryable } from '../../../store/db.ts';
import {
  destinationIdsOf,
  type EventSourceRow,
  type EventSubscriptionRow,
  insertEventSubscription,
  replaceEventSources,
  replaceSubscriptionDestinations,
  sourcesOf,
  updateEventSubscription,
} from '../../../store/event-subscriptions.ts';
import type { Family } from '../objects/family.ts';
import { ownTable } from '../objects/storage.ts';
import type { JsonObject } from '../resource-types.ts';
import { EVENT_SUBSCRIPTIONS } from './resource.ts';
import { sourceRoutes } from './source-routes.ts';
import { presentSource, readSources, type SourceInput } from './sources.ts';

/** Reads `destination_ids` (a list of strings, as declared): distinct ids, checked against the store later. */
function destinationIdsField(body: JsonObject): string[] | undefined {
  const value = body.destination_ids as string[] | undefined;
  if (value === undefined) return undefined;
  // A Set, not indexOf: a body of 100,000 ids would otherwise hold the event loop for seconds.
  const seen = new Set<string>();
  for (const id of value) {
    if (seen.has(id)) {
      throw new AppError('ERR_INVALID_FIELD', `"destination_ids" names "${id}" twice`, {
        field: 'destination_ids',
        id,
      });
    }
    seen.add(id);
  }
  return value;
}

/**
 * Points a subscription at destinations of the caller's account, in the order given. Another
 * account's destination is treated as not existing; the named ones stay locked against deletion
 * until the transaction ends.
 */
async function setDestinations(
  tx: Queryable,
  accountId: string,
  subscriptionId: string,
  ids: string[],
): Promise<void> {
  const found = await lockDestinationsForReference(tx, accountId, ids);
  const missing = ids.find((id) => !found.has(id));
  if (missing !== undefined) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"destination_ids": event destination "${missing}" was not found`,
      { field: 'destination_ids', id: missing },
    );
  }
  await replaceSubscriptionDestinations(tx, subscriptionId, ids);
}

/** The sources to store, in the order given. */
function sourceRows(subscriptionId: string, sources: SourceInput[]): EventSourceRow[] {
  const now = new Date();
  return sources.map((source, position) => ({
    subscription_id: subscriptionId,
    ...source,
    position,
    created_at: now,
  }));
}

/** What a body gives beyond description and metadata, read before the change. */
interface Given {
  sources?: SourceInput[];
  destinationIds?: string[];
}

/**
 * Event subscriptions: sources (an event type, a CEL filter and a field selection each, compiled
 * when written: sources.ts) and destinations, kept in tables of their own; `sources` and
 * `destination_ids` replace the whole list when given. Sources are also a sub-collection
 * (source-routes.ts), each change of one an update of its subscription.
 */
export const EVENT_SUBSCRIPTIONS_FAMILY: Family = {
  resource: EVENT_SUBSCRIPTIONS,
  storage: () =>
    ownTable<EventSubscriptionRow>({
      table: 'event_subscriptions',
      fields: () => ({}),
      insert: insertEventSubscription,
      update: updateEventSubscription,
    }),
  routing: true,
  prepare: (body): Given => ({
    sources: body.sources === undefined ? undefined : readSources(body.sources as unknown[]),
    destinationIds: destinationIdsField(body),
  }),
  create: () => ({ fields: {} }),
  async afterChange(stored, previous, ctx) {
    const given = ctx.prepared as Given;
    const created = previous === undefined;
    if (given.sources !== undefined || created) {
      await replaceEventSources(ctx.tx, stored.id, sourceRows(stored.id, given.sources ?? []));
    }
    if (given.destinationIds !== undefined || created) {
      await setDestinations(ctx.tx, ctx.accountId, stored.id, given.destinationIds ?? []);
    }
  },
  async shown(subscriptions, { db, config }) {
    const ids = subscriptions.map((subscription) => subscription.id);
    const sources = await sourcesOf(db, ids);
    const destinations = await destinationIdsOf(db, ids);
    const base = config.publicUrl;
    return ids.map((id) => ({
      sources: sources.get(id)!.map((source) => presentSource(source, base)),
      destinations: destinations.get(id)!.map((destination) => ({
        id: destination,
        uri: `${base}/event_destinations/${destination}`,
      })),
    }));
  },
  routes: sourceRoutes,
};
