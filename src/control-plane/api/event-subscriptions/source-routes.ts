import type { FastifyInstance } from 'fastify';
import { AppError } from '../../../shared/errors.ts';
import {
  deleteEventSource,
  type EventSourceRow,
  insertEventSource,
  sourcesOf,
  updateEventSource,
} from '../../../store/event-subscriptions.ts';
import type { FamilyKit } from '../objects/family.ts';
import { acceptPathEchoes } from '../validate.ts';
import { checkSource, presentSource, readSource, readSourceChanges } from './sources.ts';

type Params = { Params: { id: string } };
type SourceParams = { Params: { id: string; type: string } };
type Shown = { type: string };

function sourceNotFound(id: string, type: string): AppError {
  return new AppError(
    'ERR_NOT_FOUND',
    `event subscription "${id}" has no source of type "${type}"`,
    { id, type },
  );
}

/** The source of `type` the subscription shows, or the 404. */
function sourceOf(subscription: Record<string, unknown>, id: string, type: string): Shown {
  const source = (subscription.sources as Shown[]).find((s) => s.type === type);
  if (source === undefined) throw sourceNotFound(id, type);
  return source;
}

/**
 * /event_subscriptions/{id}/sources[/{type}]: a subscription's sources one by one. A change of
 * one is a change of its subscription (kit.change): event_subscription_updated.v0, and the
 * routing version bumped. ngrok's clients repeat `subscription_id` and `type` in the body.
 */
export function sourceRoutes(app: FastifyInstance, { deps, show, change }: FamilyKit): void {
  const base = deps.config.publicUrl;
  const echoes = { preValidation: acceptPathEchoes({ subscription_id: 'id', type: 'type' }) };
  const collection = '/event_subscriptions/:id/sources';
  const item = `${collection}/:type`;

  app.get<Params>(collection, echoes, async (request) => {
    const subscription = await show(request, request.params.id);
    return { sources: subscription.sources, uri: `${subscription.uri}/sources` };
  });

  app.post<Params>(collection, echoes, async (request, reply) => {
    const source = readSource(request.body, '');
    const subscription = await change(request, request.params.id, async (row, { tx }) => {
      const existing = (await sourcesOf(tx, [row.id])).get(row.id)!;
      if (existing.some((s) => s.type === source.type)) {
        const uri = presentSource({ subscription_id: row.id, ...source }, base).uri;
        throw new AppError(
          'ERR_INVALID_FIELD',
          `event subscription "${row.id}" already has a source of type "${source.type}"; change it with PATCH ${uri}`,
          { field: 'type', type: source.type },
        );
      }
      const position = Math.max(-1, ...existing.map((s) => s.position)) + 1;
      const created = { subscription_id: row.id, ...source, position, created_at: new Date() };
      await insertEventSource(tx, created);
    });
    return reply.code(201).send(sourceOf(subscription, request.params.id, source.type));
  });

  app.get<SourceParams>(item, echoes, async (request) => {
    const { id, type } = request.params;
    return sourceOf(await show(request, id), id, type);
  });

  app.patch<SourceParams>(item, echoes, async (request) => {
    const changes = readSourceChanges(request.body);
    const { id, type } = request.params;
    const subscription = await change(request, id, async (_row, { tx }) => {
      const source = (await sourcesOf(tx, [id])).get(id)!.find((s) => s.type === type);
      if (source === undefined) throw sourceNotFound(id, type);
      const updated: EventSourceRow = {
        ...source,
        filter: changes.filter ?? source.filter,
        fields: changes.fields ?? source.fields,
        sample_rate: changes.sample_rate ?? source.sample_rate,
        redact_headers: changes.redact_headers ?? source.redact_headers,
        keep_credentials: changes.keep_credentials ?? source.keep_credentials,
      };
      checkSource(updated, '');
      await updateEventSource(tx, updated);
    });
    return sourceOf(subscription, id, type);
  });

  app.delete<SourceParams>(item, echoes, async (request, reply) => {
    const { id, type } = request.params;
    await change(request, id, async (_row, { tx }) => {
      if ((await deleteEventSource(tx, id, type)) === undefined) throw sourceNotFound(id, type);
    });
    return reply.code(204).send();
  });
}
