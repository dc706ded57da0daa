import type { Resource } from '../resource-types.ts';
import { CERT_POLICY_SHAPE, COMMON, describedBy, str } from '../resources.ts';

/** Agent Ingresses: the domains agents connect to. */
export const AGENT_INGRESSES: Resource = {
  path: 'agent_ingresses',
  title: 'Agent Ingress',
  idPrefix: 'agin',
  listKey: 'ingresses',
  audit: 'agent_ingress',
  example: ({ tag }) => ({ domain: `${tag}.example.org` }),
  // In the order answers have always shown them (the table of `cli api … -o table` follows it).
  fields: {
    id: COMMON.id,
    uri: COMMON.uri,
    ...describedBy('maxBytes'),
    domain: {
      schema: str,
      text: {},
      required: true,
      notUpdatable: 'create a new Agent Ingress',
      doc: 'the domain agents connect to; lower-cased, unique across the service',
    },
    ns_targets: {
      schema: { type: 'array', items: str },
      serverAssigned: true,
      doc: 'name servers',
    },
    region_domains: {
      schema: { type: 'array', items: str },
      serverAssigned: true,
      doc: 'one domain per region',
    },
    created_at: COMMON.created_at,
    certificate_management_policy: {
      schema: { ...CERT_POLICY_SHAPE, type: ['object', 'null'] },
      doc: 'automatic certificates; null turns them off',
    },
    certificate_management_status: {
      schema: { type: ['object', 'null'] },
      serverAssigned: true,
      doc: 'renewal time and the current provisioning job',
    },
  },
};
