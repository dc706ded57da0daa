import type { Field, Resource } from '../resource-types.ts';
import { COMMON, describedBy, str } from '../resources.ts';
import { VALIDATE_POLICY } from './validate-policy.ts';

const REF = { type: 'object', properties: { id: str, uri: str }, required: ['id', 'uri'] };

/** Fields only agent endpoints have: set by the service, shown when known. */
function agentOnly(fields: Record<string, Pick<Field, 'schema' | 'doc'>>): Record<string, Field> {
  return Object.fromEntries(
    Object.entries(fields).map(([name, f]) => [
      name,
      { ...f, serverAssigned: true, sometimes: true },
    ]),
  );
}

/**
 * Endpoints, in ngrok's Endpoint shape: a cloud endpoint is a URL on a hostname the account
 * holds (or a TCP address it reserved) whose Traffic Policy the edge runs for every request or
 * connection to it (docs/traffic-policy.md); an agent endpoint is what a live agent session
 * serves, listed beside them and read-only (agent-endpoints.ts).
 */
export const ENDPOINTS: Resource = {
  path: 'endpoints',
  title: 'endpoint',
  idPrefix: 'ep',
  listKey: 'endpoints',
  audit: 'endpoint',
  example: ({ tag, held }) => ({
    type: 'cloud',
    url: `https://${tag}.${held ?? 'example.org'}`,
    traffic_policy:
      'on_http_request:\n  - actions:\n      - type: custom-response\n        config: {status_code: 200, body: ok}\n',
    description: tag,
  }),
  fields: {
    ...COMMON,
    updated_at: {
      schema: { ...str, format: 'date-time' },
      serverAssigned: true,
      doc: 'time of the last change',
    },
    ...describedBy('maxBytes'),
    type: {
      schema: { enum: ['cloud', 'agent'] },
      required: true,
      notUpdatable: 'create another endpoint',
      doc: '`cloud` (made here) or `agent` (what a live agent session serves: made by agents, read-only)',
    },
    url: {
      schema: { ...str, maxLength: 2048 },
      required: true,
      notUpdatable: 'create another endpoint',
      doc: 'https://<hostname> or http://<hostname> on a hostname the account holds, or tcp://<host>:<port> of one of its reserved addresses',
    },
    traffic_policy: {
      schema: { ...str, maxLength: 65536 },
      required: true,
      doc: 'the Traffic Policy document (YAML or JSON) the edge runs for this endpoint',
    },
    public_url: { schema: str, serverAssigned: true, doc: 'the URL, as ngrok names it too' },
    proto: { schema: str, serverAssigned: true, doc: '`https`, `http` or `tcp`' },
    hostport: { schema: str, serverAssigned: true, doc: 'host:port of the URL' },
    bindings: {
      schema: { type: 'array', items: str },
      serverAssigned: true,
      doc: '`public`: reachable from the internet',
    },
    ...agentOnly({
      region: { schema: str, doc: "agent endpoints: the session's region" },
      upstream_url: {
        schema: str,
        doc: "agent endpoints: where the agent forwards to (an ngrok agent's forwards_to; '' for ssh -R)",
      },
      tunnel: { schema: REF, doc: 'agent endpoints: its tunnel (GET /tunnels/{id})' },
      tunnel_session: { schema: REF, doc: "agent endpoints: its agent's session" },
      principal: {
        schema: REF,
        doc: 'agent endpoints: the credential its agent authenticated with',
      },
    }),
  },
  extraRoutes: [VALIDATE_POLICY],
};
