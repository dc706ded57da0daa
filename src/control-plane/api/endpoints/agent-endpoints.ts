import {
  endpointNameOf,
  isInternalHostname,
} from '../../../agent-plane/sessions/internal-endpoints.ts';
import { AppError } from '../../../shared/errors.ts';
import { isId } from '../../../shared/ids.ts';
import { type SessionRow, sessionOfAccount, sessionPage } from '../../../store/agent-sessions.ts';
import type { Storage, StoredObject } from '../objects/family.ts';
import { accountObjects } from '../objects/storage.ts';
import type { JsonObject } from '../resource-types.ts';
import { relatedId, servedUrl, sessionIdOf } from '../tunnels/present.ts';

// Agent endpoints beside cloud ones, as ngrok lists them: each live agent session (ngrok SDK or
// ssh -R, on any instance sharing the store) is an endpoint of `type: "agent"` with the id
// ep_<its session's suffix>. They are made and ended by agents: read here, never written (the
// family refuses changes to them before the storage would be asked).

/** The port a URL's scheme implies, when its endpoint names none. */
const DEFAULT_PORTS: Record<string, number> = { http: 80, https: 443 };

/** A session as the endpoint the family's routes present; `session`, `principal` become refs. */
function agentEndpoint(row: SessionRow): StoredObject {
  const url = servedUrl(row);
  const name = endpointNameOf(row.endpoint);
  const startedAt = new Date(row.started_at);
  return {
    id: relatedId(row.id, 'ep'),
    account_id: row.account_id,
    kind: 'endpoints',
    parent_id: null,
    unique_scope: null,
    unique_key: null,
    description: '',
    metadata: '',
    fields: {
      type: 'agent',
      url,
      public_url: url,
      proto: row.proto,
      hostport: name.includes(':') ? name : `${name}:${DEFAULT_PORTS[row.proto] ?? 443}`,
      bindings: [isInternalHostname(name) ? 'internal' : 'public'],
      updated_at: startedAt.toISOString(),
      region: row.region,
      upstream_url: row.forwards_to,
      session: row.id,
      principal: { path: row.credential_kind, id: row.credential_id },
    },
    secret: null,
    created_at: startedAt,
  };
}

/** Whether `object` is an agent endpoint. */
export const isAgentEndpoint = (object: StoredObject) => object.fields.type === 'agent';

/** The references an agent endpoint shows, as `{id, uri}` under `publicUrl`. */
export function agentRefs(object: StoredObject, publicUrl: string): JsonObject {
  if (!isAgentEndpoint(object)) return {};
  const ref = (path: string, id: string) => ({ id, uri: `${publicUrl}/${path}/${id}` });
  const session = object.fields.session as string;
  const principal = object.fields.principal as { path: string; id: string };
  return {
    tunnel: ref('tunnels', relatedId(session, 'tn')),
    tunnel_session: ref('tunnel_sessions', session),
    principal: ref(principal.path, principal.id),
  };
}

/** The refusal of a change to an agent endpoint. */
export function readOnly(object: StoredObject, change: 'updated' | 'deleted'): AppError {
  return new AppError(
    'ERR_AGENT_ENDPOINT_READ_ONLY',
    `endpoint ${object.id} is an agent endpoint: it cannot be ${change} through the API; it lives as long as its agent's session (POST /tunnel_sessions/${object.fields.session as string}/stop ends it)`,
    { id: object.id, tunnel_session: object.fields.session },
  );
}

/** Cloud endpoints in account_objects, agent endpoints from the session registry, by id. */
export function endpointStorage(): Storage {
  const cloud = accountObjects('endpoints');
  return {
    ...cloud,
    async get(db, accountId, id, lock) {
      const found = await cloud.get(db, accountId, id, lock);
      if (found !== undefined || !isId(id, 'ep')) return found;
      const session = await sessionOfAccount(db, accountId, sessionIdOf(id));
      return session && agentEndpoint(session);
    },
    /** Both kinds newest first: a page of each, merged, cut at `limit`. */
    async page(db, accountId, limit, beforeId) {
      const [clouds, agents] = await Promise.all([
        cloud.page(db, accountId, limit, beforeId),
        sessionPage(db, accountId, { limit, beforeId: beforeId && sessionIdOf(beforeId) }),
      ]);
      const merged = [...clouds.rows, ...agents.rows.map(agentEndpoint)].sort((a, b) =>
        a.id < b.id ? 1 : -1,
      );
      const more = merged.length > limit || clouds.more || agents.more;
      return { rows: merged.slice(0, limit), more };
    },
  };
}
