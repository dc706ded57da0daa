import type { SessionRow } from '../../../store/agent-sessions.ts';

// What agents serve, in ngrok's shapes, made from the session registry's rows (one session, one
// endpoint): the Tunnel of GET /tunnels and the agent Endpoint of GET /endpoints. Their ids are
// the session's with ngrok's prefixes (ts_X is served by tunnel tn_X, endpoint ep_X), so each
// names the others without a table of its own.

/** A session's id with `prefix` for its tunnel (`tn`) or endpoint (`ep`). */
export function relatedId(sessionId: string, prefix: 'tn' | 'ep'): string {
  return `${prefix}_${sessionId.slice('ts_'.length)}`;
}

/** The session id behind tunnel or endpoint `id`. */
export function sessionIdOf(id: string): string {
  return `ts_${id.slice(id.indexOf('_') + 1)}`;
}

/** The URL a session serves: `https://app.example.com`, `tcp://1.tcp.example.com:20001`. */
export function servedUrl(row: SessionRow): string {
  return `${row.proto}://${row.endpoint}`;
}

const ref = (base: string, path: string, id: string) => ({ id, uri: `${base}/${path}/${id}` });

/** ngrok's Tunnel. */
export function presentTunnel(row: SessionRow, base: string) {
  return {
    id: relatedId(row.id, 'tn'),
    public_url: servedUrl(row),
    started_at: new Date(row.started_at).toISOString(),
    metadata: row.metadata,
    proto: row.proto,
    region: row.region,
    tunnel_session: ref(base, 'tunnel_sessions', row.id),
    endpoint: ref(base, 'endpoints', relatedId(row.id, 'ep')),
    forwards_to: row.forwards_to,
  };
}

/** The port a URL's scheme implies, when its endpoint names none. */
const DEFAULT_PORTS: Record<string, number> = { http: 80, https: 443 };

/** ngrok's Endpoint of `type: "agent"`. */
export function presentAgentEndpoint(row: SessionRow, base: string) {
  const url = servedUrl(row);
  const startedAt = new Date(row.started_at).toISOString();
  return {
    id: relatedId(row.id, 'ep'),
    uri: `${base}/endpoints/${relatedId(row.id, 'ep')}`,
    type: 'agent',
    url,
    public_url: url,
    proto: row.proto,
    hostport: row.endpoint.includes(':')
      ? row.endpoint
      : `${row.endpoint}:${DEFAULT_PORTS[row.proto] ?? 443}`,
    region: row.region,
    bindings: ['public'],
    upstream_url: row.forwards_to,
    tunnel: ref(base, 'tunnels', relatedId(row.id, 'tn')),
    tunnel_session: ref(base, 'tunnel_sessions', row.id),
    principal: ref(base, row.credential_kind, row.credential_id),
    created_at: startedAt,
    updated_at: startedAt,
  };
}
