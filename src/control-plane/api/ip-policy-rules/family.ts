import { normalizeCidr } from '../../../shared/net/cidr.ts';
import { refuseLockout } from '../ip-restrictions/enforce.ts';
import type { Family } from '../objects/family.ts';
import { IP_POLICY_RULES } from './resource.ts';

/**
 * IP policy rules: a range in canonical form and its action, in one policy (the parent). Any
 * change that would make an enforced `api` restriction refuse the caller is refused.
 */
export const IP_POLICY_RULES_FAMILY: Family = {
  resource: IP_POLICY_RULES,
  create(body) {
    return {
      fields: { cidr: normalizeCidr(body.cidr as string), action: body.action },
      parentId: body.ip_policy_id as string,
    };
  },
  update(_current, body) {
    return body.cidr === undefined ? {} : { fields: { cidr: normalizeCidr(body.cidr as string) } };
  },
  afterChange: (_stored, _previous, ctx) => refuseLockout(ctx),
  beforeDelete: (current, ctx) => refuseLockout(ctx, current.id),
};
