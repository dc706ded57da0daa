import { AppError } from '../../../shared/errors.ts';
import type { Family } from '../objects/family.ts';
import type { JsonObject } from '../resource-types.ts';
import { refuseLockout } from './enforce.ts';
import { IP_RESTRICTIONS } from './resource.ts';

/** Refuses an empty or repeating `ip_policy_ids` (the layer has checked each names a policy). */
function checkPolicyIds(body: JsonObject): void {
  const ids = body.ip_policy_ids as string[] | undefined;
  if (ids === undefined) return;
  if (ids.length === 0) {
    throw new AppError('ERR_INVALID_FIELD', '"ip_policy_ids" must name at least one IP policy', {
      field: 'ip_policy_ids',
    });
  }
  const twice = ids.find((id, i) => ids.indexOf(id) !== i);
  if (twice !== undefined) {
    throw new AppError('ERR_INVALID_FIELD', `"ip_policy_ids" names "${twice}" twice`, {
      field: 'ip_policy_ids',
    });
  }
}

/**
 * IP restrictions: a type, whether enforced, and the policies that decide. An `api` one applies
 * to this REST API at once (src/control-plane/api/ip-restrictions/enforce.ts); a change that would make it
 * refuse the caller's own address is refused instead.
 */
export const IP_RESTRICTIONS_FAMILY: Family = {
  resource: IP_RESTRICTIONS,
  create(body) {
    checkPolicyIds(body);
    return { fields: { enforced: body.enforced === true, type: body.type } };
  },
  update(_current, body) {
    checkPolicyIds(body);
    return body.enforced === undefined ? {} : { fields: { enforced: body.enforced } };
  },
  afterChange: (_stored, _previous, ctx) => refuseLockout(ctx),
};
