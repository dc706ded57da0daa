import type { FastifyInstance, FastifyRequest } from 'fastify';
import { lockDestinationsForReference } from '../../../data-plane/store/event-destinations.ts';
import { AppError } from '../../../shared/errors.ts';
import { newId } from '../../../shared/ids.ts';
import type { Queryable } from '../../../store/db.ts';
import {
  deleteEventSource,
  deleteEventSubscription,
  destinationIdsOf,
  type EventSourceRow,
  type EventSubscriptionRow,
  getEventSubscription,
  insertEventSource,
  insertEventSubscription,
  lockEventSubscription,
  replaceEventSources,
  replaceSubscriptionDestinations,
  sourcesOf,
  updateEventSource,
  updateEventSubscription,
} from '../../../store/event-subscriptions.ts';
import type { ApiDeps } from '../deps.ts';
import { listRoute } from '../pagination.ts';
import type { JsonObject } from '../resource-types.ts';
import { auditEvent, EVENT_SUBSCRIPTIONS, notFound } from '../resources.ts';
import { routingChange } from '../routing-change.ts';
import { acceptPathEchoes, readBody, rejectUnstorableStrings } from '../validate.ts';
import { type EventSubscription, presentEventSource, presentEventSubscription } from './present.ts';
import {
  checkSource,
  readSource,
  readSourceChanges,
  readSources,
  type SourceInput,
} from './sources.ts';

type Params = { Params: { id: string } };
type SourceParams = { Params: { id: string; type: string } };

function sourceNotFound(id: string, type: string): AppError {
  return new AppError(
    'ERR_NOT_FOUND',
    `event subscription "${id}" has no source of type "${type}"`,
    { id, type },
  );
}

/** Reads `destination_ids`: a list of distinct destination ids (checked against the store later). */
function destinationIdsField(body: JsonObject): string[] | undefined {
  const value = body.destination_ids;
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || !value.every((id) => typeof id === 'string')) {
    throw new AppError('ERR_INVALID_FIELD', '"destination_ids" must be a list of ids', {
      field: 'destination_ids',
    });
  }
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

function sourceRows(subscriptionId: string, sources: SourceInput[]): EventSourceRow[] {
  const now = new Date();
  return sources.map((source, position) => ({
    subscription_id: subscriptionId,
    ...source,
    position,
    created_at: now,
  }));
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

/**
 * /event_subscriptions CRUD and its sources (/event_subscriptions/{id}/sources[/{type}]). A
 * source change is a change of its subscription: it writes event_subscription_updated.v0. Every
 * change bumps the routing version in its transaction and then tells the pipeline.
 */
export async function eventSubscriptionRoutes(app: FastifyInstance, deps: ApiDeps): Promise<void> {
  app.addHook('preValidation', rejectUnstorableStrings);
  app.addHook('preValidation', async (request: FastifyRequest) => {
    const sources = request.routeOptions.url?.includes('/sources') === true;
    await acceptPathEchoes(sources ? { subscription_id: 'id', type: 'type' } : { id: 'id' })(
      request,
    );
  });
  const { db, config } = deps;
  const base = config.publicUrl;

  /** The resources of some subscriptions with their sources and destinations. */
  async function presentAll(tx: Queryable, rows: EventSubscriptionRow[]) {
    const ids = rows.map((row) => row.id);
    const sources = await sourcesOf(tx, ids);
    const destinations = await destinationIdsOf(tx, ids);
    return rows.map((row) =>
      presentEventSubscription(row, sources.get(row.id)!, destinations.get(row.id)!, base),
    );
  }

  async function present(tx: Queryable, row: EventSubscriptionRow) {
    return (await presentAll(tx, [row]))[0];
  }

  const change = (
    request: FastifyRequest,
    kind: 'created' | 'updated' | 'deleted',
    work: (tx: Queryable) => Promise<EventSubscription>,
  ): Promise<EventSubscription> =>
    routingChange(deps, request, auditEvent(EVENT_SUBSCRIPTIONS, kind), work);

  /** A source change: locks the subscription, runs `work`, and records a subscription update. */
  function changeSource(
    request: FastifyRequest<SourceParams | Params>,
    work: (tx: Queryable, row: EventSubscriptionRow) => Promise<void>,
  ): Promise<EventSubscription> {
    const { accountId } = request.caller;
    const { id } = request.params;
    return change(request, 'updated', async (tx) => {
      const row = await lockEventSubscription(tx, accountId, id);
      if (row === undefined) throw notFound(EVENT_SUBSCRIPTIONS, id);
      await work(tx, row);
      return present(tx, row);
    });
  }

  app.post('/event_subscriptions', async (request, reply) => {
    const { body, text } = readBody(request.body, EVENT_SUBSCRIPTIONS, 'create');
    const row: EventSubscriptionRow = {
      id: newId(EVENT_SUBSCRIPTIONS.idPrefix),
      account_id: request.caller.accountId,
      description: text.description ?? '',
      metadata: text.metadata ?? '',
      created_at: new Date(),
    };
    const sources = body.sources === undefined ? [] : readSources(body.sources);
    const destinationIds = destinationIdsField(body) ?? [];
    const created = await change(request, 'created', async (tx) => {
      await insertEventSubscription(tx, row);
      await replaceEventSources(tx, row.id, sourceRows(row.id, sources));
      await setDestinations(tx, row.account_id, row.id, destinationIds);
      return present(tx, row);
    });
    return reply.code(201).send(created);
  });

  app.get<Params>('/event_subscriptions/:id', async (request) => {
    const row = await getEventSubscription(db, request.caller.accountId, request.params.id);
    if (row === undefined) throw notFound(EVENT_SUBSCRIPTIONS, request.params.id);
    return present(db, row);
  });

  listRoute<EventSubscriptionRow>(app, deps, EVENT_SUBSCRIPTIONS, (rows) => presentAll(db, rows));

  // An omitted field is unchanged; `sources` and `destination_ids` replace the whole list.
  app.patch<Params>('/event_subscriptions/:id', async (request) => {
    const { body, text } = readBody(request.body, EVENT_SUBSCRIPTIONS, 'update');
    const { description, metadata } = text;
    const sources = body.sources === undefined ? undefined : readSources(body.sources);
    const destinationIds = destinationIdsField(body);
    const { accountId } = request.caller;
    return change(request, 'updated', async (tx) => {
      const row = await lockEventSubscription(tx, accountId, request.params.id);
      if (row === undefined) throw notFound(EVENT_SUBSCRIPTIONS, request.params.id);
      const updated: EventSubscriptionRow = {
        ...row,
        description: description ?? row.description,
        metadata: metadata ?? row.metadata,
      };
      await updateEventSubscription(tx, updated);
      if (sources !== undefined) {
        await replaceEventSources(tx, row.id, sourceRows(row.id, sources));
      }
      if (destinationIds !== undefined) {
        await setDestinations(tx, accountId, row.id, destinationIds);
      }
      return present(tx, updated);
    });
  });

  app.delete<Params>('/event_subscriptions/:id', async (request, reply) => {
    const { accountId } = request.caller;
    const { id } = request.params;
    await change(request, 'deleted', async (tx) => {
      const row = await lockEventSubscription(tx, accountId, id);
      if (row === undefined) throw notFound(EVENT_SUBSCRIPTIONS, id);
      const object = await present(tx, row);
      await deleteEventSubscription(tx, accountId, id);
      return object;
    });
    return reply.code(204).send();
  });

  app.get<Params>('/event_subscriptions/:id/sources', async (request) => {
    const row = await getEventSubscription(db, request.caller.accountId, request.params.id);
    if (row === undefined) throw notFound(EVENT_SUBSCRIPTIONS, request.params.id);
    const subscription = await present(db, row);
    return { sources: subscription.sources, uri: `${subscription.uri}/sources` };
  });

  app.post<Params>('/event_subscriptions/:id/sources', async (request, reply) => {
    const source = readSource(request.body, '');
    const subscription = await changeSource(request, async (tx, row) => {
      const existing = (await sourcesOf(tx, [row.id])).get(row.id)!;
      if (existing.some((s) => s.type === source.type)) {
        throw new AppError(
          'ERR_INVALID_FIELD',
          `event subscription "${row.id}" already has a source of type "${source.type}"; change it with PATCH ${presentEventSource({ subscription_id: row.id, ...source }, base).uri}`,
          { field: 'type', type: source.type },
        );
      }
      const position = Math.max(-1, ...existing.map((s) => s.position)) + 1;
      await insertEventSource(tx, {
        subscription_id: row.id,
        ...source,
        position,
        created_at: new Date(),
      });
    });
    return reply.code(201).send(subscription.sources.find((s) => s.type === source.type));
  });

  app.get<SourceParams>('/event_subscriptions/:id/sources/:type', async (request) => {
    const { id, type } = request.params;
    const row = await getEventSubscription(db, request.caller.accountId, id);
    if (row === undefined) throw notFound(EVENT_SUBSCRIPTIONS, id);
    const source = (await sourcesOf(db, [id])).get(id)!.find((s) => s.type === type);
    if (source === undefined) throw sourceNotFound(id, type);
    return presentEventSource(source, base);
  });

  app.patch<SourceParams>('/event_subscriptions/:id/sources/:type', async (request) => {
    const changes = readSourceChanges(request.body);
    const { id, type } = request.params;
    const subscription = await changeSource(request, async (tx) => {
      const source = (await sourcesOf(tx, [id])).get(id)!.find((s) => s.type === type);
      if (source === undefined) throw sourceNotFound(id, type);
      const updated: EventSourceRow = {
        ...source,
        filter: changes.filter ?? source.filter,
        fields: changes.fields ?? source.fields,
        sample_rate: changes.sample_rate ?? source.sample_rate,
      };
      checkSource(updated, '');
      await updateEventSource(tx, updated);
    });
    return subscription.sources.find((s) => s.type === type);
  });

  app.delete<SourceParams>('/event_subscriptions/:id/sources/:type', async (request, reply) => {
    const { id, type } = request.params;
    await changeSource(request, async (tx) => {
      if ((await deleteEventSource(tx, id, type)) === undefined) {
        throw sourceNotFound(id, type);
      }
    });
    return reply.code(204).send();
  });
}
