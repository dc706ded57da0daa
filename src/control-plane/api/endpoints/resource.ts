import type { Resource } from '../resource-types.ts';
import { COMMON, describedBy, str } from '../resources.ts';
import { VALIDATE_POLICY } from './validate-policy.ts';

/**
 * Endpoints, in ngrok's Endpoint shape: a cloud endpoint is a URL on a hostname the account
 * holds (or a TCP address it reserved) whose Traffic Policy the edge runs for every request or
 * connection to it (docs/traffic-policy.md).
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
      schema: { enum: ['cloud'] },
      required: true,
      notUpdatable: 'create another endpoint',
      doc: "`cloud` (agent endpoints are the agents' sessions: GET /tunnel_sessions)",
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
  },
  extraRoutes: [VALIDATE_POLICY],
};
