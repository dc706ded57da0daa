import type { FastifyInstance } from 'fastify';
import type { AgentCommand } from '../../../agent-plane/sessions/live-session.ts';
import type { SessionRegistry } from '../../../agent-plane/sessions/registry.ts';
import { AppError } from '../../../shared/errors.ts';
import { type SessionRow, sessionOfAccount, sessionPage } from '../../../store/agent-sessions.ts';
import type { ApiDeps } from '../deps.ts';
import { pageLinks, parsePageQuery } from '../pagination.ts';
import { checkShape, FIELD_CODES, objectWith } from '../validate.ts';
import { TUNNEL_SESSION_ROUTES } from './declaration.ts';

// /tunnel_sessions (ngrok's path and shapes): the account's live agent sessions on every
// instance sharing the store, newest first; POST /tunnel_sessions/{id}/stop, which ends one
// wherever it lives (its stop event says so), and /restart and /update, which send the agent
// ngrok's Restart and Update commands (agent-commands.ts) and answer as the agent did.

const [LIST, GET, STOP, RESTART, UPDATE] = TUNNEL_SESSION_ROUTES;
const UPDATE_FIELDS = Object.keys(UPDATE.request!.properties as object);

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

/** ngrok's client repeats the path's id in bodies: the same id is taken, another refused. */
function checkEcho(echoed: unknown, id: string): void {
  if (echoed !== undefined && echoed !== id) {
    throw new AppError('ERR_INVALID_FIELD', `"id" ${JSON.stringify(echoed)} is not the path's id`, {
      field: 'id',
    });
  }
}

/** Refuses a body that says anything but the path's id. */
function checkNoBody(body: unknown, id: string): void {
  if (body !== undefined) checkEcho(objectWith(body, ['id']).id, id);
}

/** The Update command of a request body: `version` and `permit_major_version`, both optional. */
function updateOf(body: unknown, id: string): AgentCommand {
  const { id: echoed, ...fields } = objectWith(body ?? {}, ['id', ...UPDATE_FIELDS]);
  checkEcho(echoed, id);
  checkShape(fields, UPDATE.request!, '', FIELD_CODES);
  return {
    name: 'update',
    version: (fields.version as string | undefined) ?? '',
    permitMajorVersion: (fields.permit_major_version as boolean | undefined) ?? false,
  };
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
        checkNoBody(request.body, params.id);
        const stopped = (await registry?.stop(caller.accountId, params.id, caller)) ?? false;
        if (!stopped) throw notFound(params.id);
        return reply.code(204).send();
      },
    );
    /** Sends `command` to the session's agent; 204 once the agent accepted it. */
    const send = async (accountId: string, id: string, command: AgentCommand) => {
      const found = (await registry?.command(accountId, id, command)) ?? false;
      if (!found) throw notFound(id);
    };
    app.post<{ Params: { id: string } }>(
      RESTART.path.replace('{id}', ':id'),
      async (request, reply) => {
        checkNoBody(request.body, request.params.id);
        await send(request.caller.accountId, request.params.id, { name: 'restart' });
        return reply.code(204).send();
      },
    );
    app.post<{ Params: { id: string } }>(
      UPDATE.path.replace('{id}', ':id'),
      async (request, reply) => {
        const command = updateOf(request.body, request.params.id);
        await send(request.caller.accountId, request.params.id, command);
        return reply.code(204).send();
      },
    );
  };
}
