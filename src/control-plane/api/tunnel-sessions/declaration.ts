import type { ExtraRoute } from '../resource-types.ts';

// Plain schemas here: resources.ts lists these routes, so importing its values would be a cycle.
const str = { type: 'string' } as const;
const ref = { type: 'object', properties: { id: str, uri: str }, required: ['id', 'uri'] };

/** A live agent session, as ngrok's TunnelSession shows it. */
const TUNNEL_SESSION = {
  type: 'object',
  properties: {
    id: str,
    uri: str,
    agent_version: {
      ...str,
      description: "the ngrok agent's version, or an SSH client's version string",
    },
    credential: ref,
    ip: { ...str, description: 'the address the agent connects from' },
    metadata: {
      ...str,
      description: "an ngrok agent's metadata; for an SSH session, the hostname it serves",
    },
    os: str,
    region: str,
    started_at: { ...str, format: 'date-time' },
    transport: { ...str, description: '`ssh` (ssh -R) or `ngrok` (ngrok agents and SDKs)' },
  },
};

/** /tunnel_sessions: no resource of its own (sessions are made by agents, not by the API). */
export const TUNNEL_SESSION_ROUTES: readonly ExtraRoute[] = [
  {
    name: 'tunnel_sessions.list',
    method: 'GET',
    path: '/tunnel_sessions',
    summary: 'List the live agent sessions, newest first',
    status: 200,
    query: { limit: 'page size, 1-100', before_id: 'the page after this id' },
    response: {
      type: 'object',
      properties: {
        tunnel_sessions: { type: 'array', items: TUNNEL_SESSION },
        uri: str,
        next_page_uri: { type: ['string', 'null'] },
      },
    },
  },
  {
    name: 'tunnel_sessions.get',
    method: 'GET',
    path: '/tunnel_sessions/{id}',
    summary: 'Get a live agent session',
    status: 200,
    response: TUNNEL_SESSION,
  },
  {
    name: 'tunnel_sessions.stop',
    method: 'POST',
    path: '/tunnel_sessions/{id}/stop',
    summary: 'End an agent session (its agent_session_stop.v0 says so)',
    status: 204,
  },
  {
    name: 'tunnel_sessions.restart',
    method: 'POST',
    path: '/tunnel_sessions/{id}/restart',
    summary:
      "Tell the session's ngrok agent to restart (its handler decides how); 409 ERR_AGENT_COMMAND_UNSUPPORTED for ssh -R or an agent without a handler",
    status: 204,
  },
  {
    name: 'tunnel_sessions.update',
    method: 'POST',
    path: '/tunnel_sessions/{id}/update',
    summary:
      "Tell the session's ngrok agent to update itself; 409 ERR_AGENT_COMMAND_UNSUPPORTED for ssh -R or an agent without a handler",
    status: 204,
    request: {
      type: 'object',
      properties: {
        version: { ...str, maxLength: 64, description: "the version to update to; '' the latest" },
        permit_major_version: {
          type: 'boolean',
          description: 'whether a new major version may be installed (default false)',
        },
      },
      additionalProperties: false,
    },
  },
];
