import type { FastifyInstance } from 'fastify';
import { AppError } from '../../../shared/errors.ts';
import { isId } from '../../../shared/ids.ts';
import { sessionOfAccount, sessionPage } from '../../../store/agent-sessions.ts';
import type { ApiDeps } from '../deps.ts';
import { pageLinks, parsePageQuery } from '../pagination.ts';
import { TUNNEL_ROUTES } from './declaration.ts';
import { presentTunnel, sessionIdOf } from './present.ts';

// /tunnels (ngrok's path and Tunnel shape): what the account's agents serve on every instance
// sharing the store, one tunnel per live session, newest first.

const [LIST, GET] = TUNNEL_ROUTES;

export async function tunnelRoutes(app: FastifyInstance, { config, db }: ApiDeps): Promise<void> {
  const base = config.publicUrl;
  app.get(LIST.path, async (request) => {
    const query = parsePageQuery(request.query, 'tn');
    const page = await sessionPage(db, request.caller.accountId, {
      limit: query.limit,
      beforeId: query.beforeId && sessionIdOf(query.beforeId),
    });
    const tunnels = page.rows.map((row) => presentTunnel(row, base));
    return {
      tunnels,
      ...pageLinks(`${base}${LIST.path}`, query, tunnels.at(-1)?.id, page.more),
    };
  });
  app.get<{ Params: { id: string } }>(GET.path.replace('{id}', ':id'), async (request) => {
    const { id } = request.params;
    const row = isId(id, 'tn')
      ? await sessionOfAccount(db, request.caller.accountId, sessionIdOf(id))
      : undefined;
    if (row === undefined) {
      throw new AppError('ERR_NOT_FOUND', `tunnel "${id}" was not found`, { id });
    }
    return presentTunnel(row, base);
  });
}
