import type { Resource } from '../resource-types.ts';
import { COMMON, describedBy, ref, str } from '../resources.ts';

/** IP policy rules: one CIDR range each, allowed or denied, in one policy. */
export const IP_POLICY_RULES: Resource = {
  path: 'ip_policy_rules',
  title: 'IP policy rule',
  idPrefix: 'ipr',
  listKey: 'ip_policy_rules',
  audit: 'ip_policy_rule',
  example: ({ tag, idOf }) => ({
    description: tag,
    cidr: '203.0.113.0/24',
    action: 'allow',
    ip_policy_id: idOf('ip_policies'),
  }),
  fields: {
    ...COMMON,
    ...describedBy('maxBytes'),
    cidr: {
      schema: { ...str, description: 'e.g. 203.0.113.0/24, 2001:db8::/32 or 198.51.100.7' },
      // Long enough for any IPv6 range; a bound, so a refusal never echoes a huge value.
      text: { maxBytes: 64 },
      required: true,
      doc: 'an IPv4 or IPv6 range in CIDR notation (a bare address is a /32 or /128); stored in canonical form; host bits must be zero',
    },
    ip_policy_id: {
      schema: str,
      writeOnly: true,
      required: true,
      ref: { path: 'ip_policies', shownAs: 'ip_policy' },
      notUpdatable: 'create the rule in the other policy and delete this one',
      doc: 'the IP policy the rule belongs to',
    },
    ip_policy: { schema: ref, serverAssigned: true, doc: 'the IP policy the rule belongs to' },
    action: {
      schema: { enum: ['allow', 'deny'] },
      required: true,
      notUpdatable: 'create a rule with the other action and delete this one',
      doc: 'allow or deny; an address is allowed when an allow rule holds it and no deny rule does',
    },
  },
};
