import type { FastifyInstance } from 'fastify';
import { AppError } from '../../errors.ts';
import type { ApiKeyRow } from '../../store/api-keys.ts';
import { deleteApiKey, getApiKey, updateApiKey } from '../../store/api-keys.ts';
import { selectPage } from '../../store/pages.ts';
import { withAudit } from '../audit.ts';
import type { ApiDeps } from '../deps.ts';
import { pageLinks, parsePageQuery } from '../pagination.ts';
import {
  acceptPathEchoes,
  DESCRIPTION_BYTES,
  METADATA_BYTES,
  objectWith,
  rejectUnstorableStrings,
  stringField,
} from '../validate.ts';
import { mintApiKey } from './mint.ts';
import { presentApiKey } from './present.ts';

const FIELDS = ['description', 'metadata'] as const;

function notFound(id: string): AppError {
  return new AppError('ERR_NOT_FOUND', `API key "${id}" was not found`, { id });
}

/** /api_keys: create (token shown once), get, list, update description/metadata, delete. */
export async function apiKeyRoutes(app: FastifyInstance, { db, config }: ApiDeps): Promise<void> {
  app.addHook('preValidation', rejectUnstorableStrings);
  app.addHook('preValidation', acceptPathEchoes({ id: 'id' }));
  const base = config.publicUrl;

  app.post('/api_keys', async (request, reply) => {
    const body = objectWith(request.body ?? {}, FIELDS);
    const key = await mintApiKey(
      db,
      {
        accountId: request.caller.accountId,
        description: stringField(body, 'description', { maxBytes: DESCRIPTION_BYTES }),
        metadata: stringField(body, 'metadata', { maxBytes: METADATA_BYTES }),
      },
      request.caller,
      base,
    );
    return reply.code(201).send(key);
  });

  app.get<{ Params: { id: string } }>('/api_keys/:id', async (request) => {
    const row = await getApiKey(db, request.caller.accountId, request.params.id);
    if (row === undefined) throw notFound(request.params.id);
    return presentApiKey(row, base);
  });

  app.get('/api_keys', async (request) => {
    const query = parsePageQuery(request.query, 'ak');
    const page = await selectPage<ApiKeyRow>(
      db,
      'api_keys',
      request.caller.accountId,
      query.limit,
      query.beforeId,
    );
    return {
      keys: page.rows.map((row) => presentApiKey(row, base)),
      ...pageLinks(`${base}/api_keys`, query, page.rows.at(-1)?.id, page.more),
    };
  });

  app.patch<{ Params: { id: string } }>('/api_keys/:id', async (request) => {
    const body = objectWith(request.body, FIELDS);
    const changes = {
      description: stringField(body, 'description', { maxBytes: DESCRIPTION_BYTES }),
      metadata: stringField(body, 'metadata', { maxBytes: METADATA_BYTES }),
    };
    const { accountId } = request.caller;
    return withAudit(
      db,
      { eventType: 'api_key_updated.v0', accountId, principal: request.caller, publicUrl: base },
      async (tx) => {
        const row = await updateApiKey(tx, accountId, request.params.id, changes);
        if (row === undefined) throw notFound(request.params.id);
        return presentApiKey(row, base);
      },
    );
  });

  app.delete<{ Params: { id: string } }>('/api_keys/:id', async (request, reply) => {
    const { accountId } = request.caller;
    await withAudit(
      db,
      { eventType: 'api_key_deleted.v0', accountId, principal: request.caller, publicUrl: base },
      async (tx) => {
        const row = await deleteApiKey(tx, accountId, request.params.id);
        if (row === undefined) throw notFound(request.params.id);
        return presentApiKey(row, base);
      },
    );
    return reply.code(204).send();
  });
}
