import type { FastifyInstance } from 'fastify';
import type { LiveSession, SessionRegistry } from '../../agents/registry.ts';
import { STOP_REASONS } from '../../agents/session-events.ts';
import { AppError } from '../../errors.ts';
import type { ApiDeps } from '../deps.ts';
import { pageLinks, parsePageQuery } from '../pagination.ts';
import { TUNNEL_SESSION_ROUTES } from './declaration.ts';

// /tunnel_sessions (ngrok's path and shapes): the account's live agent sessions on this instance,
// newest first, and POST /tunnel_sessions/{id}/stop, which ends one (its stop event says so).

const [LIST, GET, STOP] = TUNNEL_SESSION_ROUTES;

/** A session as ngrok's TunnelSession shows it. */
function present(session: LiveSession, publicUrl: string) {
  const { facts } = session;
  return {
    id: facts.id,
    uri: `${publicUrl}/tunnel_sessions/${facts.id}`,
    agent_version: facts.userAgent,
    credential: {
      id: facts.credential.id,
      uri: `${publicUrl}/${facts.credential.kind}/${facts.credential.id}`,
    },
    ip: facts.agentIp,
    metadata: facts.metadata,
    os: '',
    region: facts.region,
    started_at: facts.startedAt.toISOString(),
    transport: 'ssh',
  };
}

function notFound(id: string): AppError {
  return new AppError('ERR_NOT_FOUND', `tunnel session "${id}" was not found`, { id });
}

/** The routes; without an agent listener (SSH_PORT=off) the account simply has no sessions. */
export function tunnelSessionRoutes(registry: SessionRegistry | undefined) {
  return async function routes(app: FastifyInstance, { config }: ApiDeps): Promise<void> {
    const base = config.publicUrl;
    const find = (accountId: string, id: string) => {
      const session = registry?.get(accountId, id);
      if (session === undefined) throw notFound(id);
      return session;
    };
    app.get(LIST.path, async (request) => {
      const query = parsePageQuery(request.query, 'ts');
      const older = (registry?.ofAccount(request.caller.accountId) ?? [])
        .filter((s) => query.beforeId === undefined || s.facts.id < query.beforeId)
        .sort((a, b) => (a.facts.id < b.facts.id ? 1 : -1));
      const page = older.slice(0, query.limit);
      return {
        tunnel_sessions: page.map((session) => present(session, base)),
        ...pageLinks(
          `${base}${LIST.path}`,
          query,
          page.at(-1)?.facts.id,
          older.length > page.length,
        ),
      };
    });
    app.get<{ Params: { id: string } }>(GET.path.replace('{id}', ':id'), async (request) =>
      present(find(request.caller.accountId, request.params.id), base),
    );
    app.post<{ Params: { id: string } }>(
      STOP.path.replace('{id}', ':id'),
      async (request, reply) => {
        const session = find(request.caller.accountId, request.params.id);
        await session.end(STOP_REASONS.api, request.caller);
        return reply.code(204).send();
      },
    );
  };
}
