import { newId } from '../../../shared/ids.ts';
import { childObjects, deleteObject } from '../../../store/account-objects.ts';
import { appendToOutbox } from '../../../store/outbox.ts';
import { IP_POLICY_RULES } from '../ip-policy-rules/resource.ts';
import { refuseLockout } from '../ip-restrictions/enforce.ts';
import type { Family, FamilyContext, StoredObject } from '../objects/family.ts';
import { presentObject } from '../objects/present.ts';
import { auditEvent } from '../resources.ts';
import { IP_POLICIES } from './resource.ts';

/** Deletes a rule of a policy being deleted, with its own ip_policy_rule_deleted event. */
async function deleteRule(rule: StoredObject, ctx: FamilyContext): Promise<void> {
  const { publicUrl } = ctx.config;
  await deleteObject(ctx.tx, rule.id);
  await appendToOutbox(ctx.tx, {
    event_id: newId('ev'),
    event_type: auditEvent(IP_POLICY_RULES, 'deleted'),
    event_timestamp: new Date().toISOString(),
    account_id: ctx.accountId,
    principal: { id: ctx.caller.keyId, uri: `${publicUrl}/api_keys/${ctx.caller.keyId}` },
    object: presentObject(IP_POLICY_RULES, rule, publicUrl),
  });
}

/**
 * IP policies hold nothing of their own but a description: their rules name them. Deleting one
 * deletes its rules (a rule belongs to exactly one policy); restrictions keep naming it and count
 * it as a policy with no rules, as ngrok documents, unless that would lock the caller out.
 */
export const IP_POLICIES_FAMILY: Family = {
  resource: IP_POLICIES,
  create: () => ({ fields: {} }),
  async beforeDelete(current, ctx) {
    await refuseLockout(ctx, current.id);
    for (const rule of await childObjects(ctx.tx, current.id)) await deleteRule(rule, ctx);
  },
};
