import type { FastifyInstance, FastifyRequest } from 'fastify';
import { accountEventsDir } from '../../../data-plane/sinks/file/layout.ts';
import {
  deleteEventDestination,
  type EventDestinationRow,
  getEventDestination,
  insertEventDestination,
  lockEventDestination,
  openRow,
  subscriptionsUsingDestination,
  updateEventDestination,
} from '../../../data-plane/store/event-destinations.ts';
import { AppError } from '../../../shared/errors.ts';
import { newId } from '../../../shared/ids.ts';
import type { Queryable } from '../../../store/db.ts';
import { isUniqueViolation } from '../../../store/db.ts';
import type { ApiDeps } from '../deps.ts';
import { listRoute } from '../pagination.ts';
import type { JsonObject } from '../resource-types.ts';
import { auditEvent, EVENT_DESTINATIONS, notFound } from '../resources.ts';
import { routingChange } from '../routing-change.ts';
import { acceptPathEchoes, readBody, rejectUnstorableStrings } from '../validate.ts';
import { type EventDestination, presentEventDestination, withHealth } from './present.ts';
import { completeTarget, readTarget } from './target.ts';
import { addDestinationTestAction } from './test-action.ts';

/** A unique violation on a destination can only be its file path within its account (migration 005). */
function pathTaken(error: unknown): never {
  if (!isUniqueViolation(error)) throw error;
  throw new AppError(
    'ERR_INVALID_TARGET',
    '"target.file.path" is already used by another destination',
    {
      field: 'target.file.path',
    },
  );
}

/** DELETE's only parameter: `discard_backlog=true` drops what the destination's spool holds. */
function discardBacklogQuery(query: unknown): boolean {
  const params = (query ?? {}) as Record<string, unknown>;
  for (const key of Object.keys(params)) {
    if (key !== 'discard_backlog') {
      throw new AppError(
        'ERR_INVALID_QUERY',
        `unknown query parameter "${key}"; allowed: discard_backlog`,
        { parameter: key },
      );
    }
  }
  const value = params.discard_backlog;
  if (value === undefined) return false;
  if (value !== 'true' && value !== 'false') {
    throw new AppError('ERR_INVALID_QUERY', '"discard_backlog" must be true or false', {
      parameter: 'discard_backlog',
    });
  }
  return value === 'true';
}

/** The events waiting in a destination's spool, from the health the pipeline reports. */
function backlogOf(health: unknown): { events: number; bytes: number } | undefined {
  const backlog = (health as { backlog?: { events: number; bytes: number } } | undefined)?.backlog;
  return backlog !== undefined && backlog.events > 0 ? backlog : undefined;
}

/** The only format is `JSON`, in any letter case; `JSON` is returned (docs/decisions.md#destination-format). */
function formatField(body: JsonObject): 'JSON' | undefined {
  const value = body.format;
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.toUpperCase() !== 'JSON') {
    throw new AppError('ERR_INVALID_FIELD', '"format" must be "JSON"', { field: 'format' });
  }
  return 'JSON';
}

/**
 * /event_destinations CRUD and the test action (test-action.ts). Every change bumps the routing
 * version in its transaction and then tells the pipeline; secrets in targets are write-only
 * (see target.ts).
 */
export async function eventDestinationRoutes(app: FastifyInstance, deps: ApiDeps): Promise<void> {
  app.addHook('preValidation', rejectUnstorableStrings);
  app.addHook('preValidation', acceptPathEchoes({ id: 'id' }));
  const { db, config, keyring } = deps;
  const base = config.publicUrl;
  const accountDir = (request: FastifyRequest) =>
    accountEventsDir(config.dataDir, request.caller.accountId);

  /** The resource with the pipeline's health of the destination, when it reports one. */
  const show = (resource: EventDestination) =>
    withHealth(resource, deps.destinationHealth?.(resource.id));

  /** A destination change (routingChange), answered as the presented destination. */
  const change = (
    request: FastifyRequest,
    kind: 'created' | 'updated' | 'deleted',
    work: (tx: Queryable) => Promise<EventDestinationRow>,
  ): Promise<EventDestination> =>
    routingChange(deps, request, auditEvent(EVENT_DESTINATIONS, kind), async (tx) =>
      presentEventDestination(await work(tx), base),
    );

  app.post('/event_destinations', async (request, reply) => {
    const { body, text } = readBody(request.body, EVENT_DESTINATIONS, 'create');
    const format = formatField(body) ?? 'JSON';
    const target = completeTarget(readTarget(body.target), undefined, accountDir(request));
    const row: EventDestinationRow = {
      id: newId(EVENT_DESTINATIONS.idPrefix),
      account_id: request.caller.accountId,
      description: text.description ?? '',
      metadata: text.metadata ?? '',
      format,
      target,
      created_at: new Date(),
    };
    const created = await change(request, 'created', async (tx) => {
      await insertEventDestination(tx, row, keyring);
      return row;
    }).catch(pathTaken);
    return reply.code(201).send(show(created));
  });

  app.get<{ Params: { id: string } }>('/event_destinations/:id', async (request) => {
    const row = await getEventDestination(db, request.caller.accountId, request.params.id, keyring);
    if (row === undefined) throw notFound(EVENT_DESTINATIONS, request.params.id);
    return show(presentEventDestination(row, base));
  });

  listRoute<EventDestinationRow>(app, deps, EVENT_DESTINATIONS, (rows) =>
    rows.map((row) => show(presentEventDestination(openRow(row, keyring), base))),
  );

  // An omitted field is unchanged; a given `target` replaces the whole target, except that an
  // omitted password is kept when the target kind stays the same.
  app.patch<{ Params: { id: string } }>('/event_destinations/:id', async (request) => {
    const { body, text } = readBody(request.body, EVENT_DESTINATIONS, 'update');
    const { description, metadata } = text;
    const format = formatField(body);
    const target = body.target === undefined ? undefined : readTarget(body.target);
    const { accountId } = request.caller;
    const updated = await change(request, 'updated', async (tx) => {
      const row = await lockEventDestination(tx, accountId, request.params.id, keyring);
      if (row === undefined) throw notFound(EVENT_DESTINATIONS, request.params.id);
      const next: EventDestinationRow = {
        ...row,
        description: description ?? row.description,
        metadata: metadata ?? row.metadata,
        format: format ?? row.format,
        target:
          target === undefined
            ? row.target
            : completeTarget(target, row.target, accountDir(request)),
      };
      await updateEventDestination(tx, next, keyring);
      return next;
    }).catch(pathTaken);
    return show(updated);
  });

  // Deleting discards the destination's spool (the pipeline removes it), so a delete while it
  // holds events is refused unless the caller says to discard them.
  app.delete<{ Params: { id: string } }>('/event_destinations/:id', async (request, reply) => {
    const { accountId } = request.caller;
    const { id } = request.params;
    const discardBacklog = discardBacklogQuery(request.query);
    await change(request, 'deleted', async (tx) => {
      // The lock makes subscriptions that are about to name this destination wait for us.
      const row = await lockEventDestination(tx, accountId, id, keyring);
      if (row === undefined) throw notFound(EVENT_DESTINATIONS, id);
      const users = await subscriptionsUsingDestination(tx, id);
      if (users.length > 0) {
        const named = `event subscription${users.length > 1 ? 's' : ''} ${users.join(', ')}`;
        throw new AppError(
          'ERR_DESTINATION_IN_USE',
          `event destination "${id}" is still used by ${named}; remove it from destination_ids first`,
          { id, subscription_ids: users },
        );
      }
      const backlog = backlogOf(deps.destinationHealth?.(id));
      if (backlog !== undefined && !discardBacklog) {
        throw new AppError(
          'ERR_DESTINATION_BACKLOG',
          `event destination "${id}" still has ${backlog.events} events waiting in its spool; ` +
            'wait until its health shows an empty backlog, or delete with ?discard_backlog=true to drop them',
          { id, backlog },
        );
      }
      await deleteEventDestination(tx, accountId, id, keyring);
      return row;
    });
    return reply.code(204).send();
  });

  addDestinationTestAction(app, deps);
}
