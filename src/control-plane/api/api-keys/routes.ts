import type { FastifyInstance } from 'fastify';
import type { Caller } from '../../../shared/caller.ts';
import type { ApiKeyRow } from '../../../store/api-keys.ts';
import { deleteApiKey, getApiKey, updateApiKey } from '../../../store/api-keys.ts';
import type { Queryable } from '../../../store/db.ts';
import { withAudit } from '../audit.ts';
import type { ApiDeps } from '../deps.ts';
import { listRoute } from '../pagination.ts';
import { API_KEYS, auditEvent, notFound } from '../resources.ts';
import { acceptPathEchoes, readBody, rejectUnstorableStrings } from '../validate.ts';
import { mintApiKey } from './mint.ts';
import { presentApiKey } from './present.ts';

/** /api_keys: create (token shown once), get, list, update description/metadata, delete. */
export async function apiKeyRoutes(app: FastifyInstance, deps: ApiDeps): Promise<void> {
  app.addHook('preValidation', rejectUnstorableStrings);
  app.addHook('preValidation', acceptPathEchoes({ id: 'id' }));
  const { db } = deps;
  const base = deps.config.publicUrl;

  app.post('/api_keys', async (request, reply) => {
    const { text } = readBody(request.body, API_KEYS, 'create');
    const { description, metadata } = text;
    const { accountId } = request.caller;
    const key = await mintApiKey(db, { accountId, description, metadata }, request.caller, base);
    return reply.code(201).send(key);
  });

  app.get<{ Params: { id: string } }>('/api_keys/:id', async (request) => {
    const row = await getApiKey(db, request.caller.accountId, request.params.id);
    if (row === undefined) throw notFound(API_KEYS, request.params.id);
    return presentApiKey(row, base);
  });

  listRoute<ApiKeyRow>(app, deps, API_KEYS, (rows) => rows.map((row) => presentApiKey(row, base)));

  /** An update or delete of the caller's key `id`, with its audit event. */
  const change = (
    request: { caller: Caller },
    id: string,
    kind: 'updated' | 'deleted',
    work: (tx: Queryable) => Promise<ApiKeyRow | undefined>,
  ) =>
    withAudit(
      db,
      {
        eventType: auditEvent(API_KEYS, kind),
        accountId: request.caller.accountId,
        principal: request.caller,
        publicUrl: base,
      },
      async (tx) => {
        const row = await work(tx);
        if (row === undefined) throw notFound(API_KEYS, id);
        return presentApiKey(row, base);
      },
    );

  app.patch<{ Params: { id: string } }>('/api_keys/:id', async (request) => {
    const { text } = readBody(request.body, API_KEYS, 'update');
    const { id } = request.params;
    return change(request, id, 'updated', (tx) =>
      updateApiKey(tx, request.caller.accountId, id, text),
    );
  });

  app.delete<{ Params: { id: string } }>('/api_keys/:id', async (request, reply) => {
    const { id } = request.params;
    await change(request, id, 'deleted', (tx) => deleteApiKey(tx, request.caller.accountId, id));
    return reply.code(204).send();
  });
}
