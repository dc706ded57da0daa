import { endpointNameOf } from '../../../agent-plane/sessions/internal-endpoints.ts';
import type { SessionRow } from '../../../store/agent-sessions.ts';

// What agents serve, in ngrok's shapes, made from the session registry's rows (one session, one
// endpoint): the Tunnel of GET /tunnels here, the agent Endpoint in ../endpoints/. Their ids are
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
  return `${row.proto}://${endpointNameOf(row.endpoint)}`;
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
