import type { ExtraRoute } from '../resource-types.ts';

// Plain schemas here: resources.ts lists these routes, so importing its values would be a cycle.
const str = { type: 'string' } as const;
const ref = { type: 'object', properties: { id: str, uri: str }, required: ['id', 'uri'] };

/** What an agent serves, as ngrok's Tunnel shows it. */
const TUNNEL = {
  type: 'object',
  properties: {
    id: { ...str, description: 'tn_…, the same suffix as its tunnel session ts_…' },
    public_url: {
      ...str,
      description: 'https://<hostname>, http://<hostname> or tcp://<host:port>',
    },
    started_at: { ...str, format: 'date-time' },
    metadata: str,
    proto: { ...str, description: '`http`, `https` or `tcp`' },
    region: str,
    tunnel_session: ref,
    endpoint: ref,
    forwards_to: {
      ...str,
      description: "where an ngrok agent forwards to (its ForwardsTo); '' for ssh -R",
    },
  },
};

/** /tunnels: made by agents, read-only (one per live tunnel session). */
export const TUNNEL_ROUTES: readonly ExtraRoute[] = [
  {
    name: 'tunnels.list',
    method: 'GET',
    path: '/tunnels',
    summary: 'List what agents (ngrok agents and ssh -R) serve now, newest first',
    status: 200,
    query: { limit: 'page size, 1-100', before_id: 'the page after this id' },
    response: {
      type: 'object',
      properties: {
        tunnels: { type: 'array', items: TUNNEL },
        uri: str,
        next_page_uri: { type: ['string', 'null'] },
      },
    },
  },
  {
    name: 'tunnels.get',
    method: 'GET',
    path: '/tunnels/{id}',
    summary: 'Get what an agent serves',
    status: 200,
    response: TUNNEL,
  },
];
