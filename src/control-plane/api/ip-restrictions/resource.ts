import type { Resource } from '../resource-types.ts';
import { COMMON, describedBy, ref, str } from '../resources.ts';

/** The traffic an IP restriction governs (ngrok's four types). */
export const RESTRICTION_TYPES = ['dashboard', 'api', 'agent', 'endpoints'] as const;

/** IP restrictions: which addresses may use the API, start agents, reach endpoints. */
export const IP_RESTRICTIONS: Resource = {
  path: 'ip_restrictions',
  title: 'IP restriction',
  idPrefix: 'ipx',
  listKey: 'ip_restrictions',
  audit: 'ip_restriction',
  example: ({ tag, idOf }) => ({
    description: tag,
    type: 'dashboard',
    ip_policy_ids: [idOf('ip_policies')],
  }),
  fields: {
    ...COMMON,
    ...describedBy('maxBytes'),
    enforced: {
      schema: { type: 'boolean' },
      doc: 'true: refuse addresses the policies do not allow; false (default): only log a warning',
    },
    type: {
      schema: { enum: [...RESTRICTION_TYPES] },
      required: true,
      notUpdatable: 'create a restriction of the other type',
      doc: 'api (this REST API), agent, endpoints or dashboard',
    },
    ip_policy_ids: {
      schema: { type: 'array', items: str, minItems: 1 },
      writeOnly: true,
      required: true,
      ref: { path: 'ip_policies', shownAs: 'ip_policies' },
      doc: 'the IP policies whose rules decide (at least one); a later update replaces the list',
    },
    ip_policies: {
      schema: { type: 'array', items: ref },
      serverAssigned: true,
      doc: 'the IP policies applied; one deleted since counts as having no rules',
    },
  },
};
