import type { FastifyInstance } from 'fastify';
import type { SessionRegistry } from '../../../agent-plane/sessions/registry.ts';
import { AppError } from '../../../shared/errors.ts';
import { type SessionRow, sessionOfAccount, sessionPage } from '../../../store/agent-sessions.ts';
import type { ApiDeps } from '../deps.ts';
import { pageLinks, parsePageQuery } from '../pagination.ts';
import { TUNNEL_SESSION_ROUTES } from './declaration.ts';

// /tunnel_sessions (ngrok's path and shapes): the account's live agent sessions on every
// instance sharing the store, newest first, and POST /tunnel_sessions/{id}/stop, which ends one
// wherever it lives (its stop event says so).

const [LIST, GET, STOP] = TUNNEL_SESSION_ROUTES;

/** A session as ngrok's TunnelSession shows it. */
function present(row: SessionRow, publicUrl: string) {
  return {
    id: row.id,
    uri: `${publicUrl}/tunnel_sessions/${row.id}`,
    agent_version: row.agent_version,
    credential: {
      id: row.credential_id,
      uri: `${publicUrl}/${row.credential_kind}/${row.credential_id}`,
    },
    ip: row.agent_ip,
    metadata: row.metadata,
    os: row.os,
    region: row.region,
    started_at: new Date(row.started_at).toISOString(),
    transport: row.transport,
  };
}

function notFound(id: string): AppError {
  return new AppError('ERR_NOT_FOUND', `tunnel session "${id}" was not found`, { id });
}

/** The routes; without an agent listener (SSH_PORT=off) this instance only stops others'. */
export function tunnelSessionRoutes(registry: SessionRegistry | undefined) {
  return async function routes(app: FastifyInstance, { config, db }: ApiDeps): Promise<void> {
    const base = config.publicUrl;
    app.get(LIST.path, async (request) => {
      const query = parsePageQuery(request.query, 'ts');
      const page = await sessionPage(db, request.caller.accountId, query);
      return {
        tunnel_sessions: page.rows.map((row) => present(row, base)),
        ...pageLinks(`${base}${LIST.path}`, query, page.rows.at(-1)?.id, page.more),
      };
    });
    app.get<{ Params: { id: string } }>(GET.path.replace('{id}', ':id'), async (request) => {
      const row = await sessionOfAccount(db, request.caller.accountId, request.params.id);
      if (row === undefined) throw notFound(request.params.id);
      return present(row, base);
    });
    app.post<{ Params: { id: string } }>(
      STOP.path.replace('{id}', ':id'),
      async (request, reply) => {
        const { caller, params } = request;
        const stopped = (await registry?.stop(caller.accountId, params.id, caller)) ?? false;
        if (!stopped) throw notFound(params.id);
        return reply.code(204).send();
      },
    );
  };
}
