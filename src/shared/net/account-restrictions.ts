import { objectsOfKind } from '../../store/account-objects.ts';
import type { Queryable } from '../../store/db.ts';
import { type CompiledRestriction, compileRestriction, type PolicyRule } from './ip-decision.ts';
import {
  type AccountRestrictions,
  createRestrictionCache,
  type RestrictionCache,
  type RestrictionType,
} from './restriction-cache.ts';

/** The rules of each of the account's IP policies, leaving out the object `without`. */
async function rulesByPolicy(db: Queryable, accountId: string, without: string | undefined) {
  const byPolicy = new Map<string, PolicyRule[]>();
  for (const rule of await objectsOfKind(db, accountId, 'ip_policy_rules')) {
    if (rule.id === without || rule.parent_id === null || rule.parent_id === without) continue;
    const rules = byPolicy.get(rule.parent_id) ?? [];
    rules.push({ cidr: rule.fields.cidr as string, action: rule.fields.action as 'allow' });
    byPolicy.set(rule.parent_id, rules);
  }
  return byPolicy;
}

/**
 * An account's IP restrictions by type, each with the rules of all its policies, as the store
 * (or a transaction) holds them. `without` leaves out one policy, rule or restriction (with a
 * policy, its rules): the state once a pending delete is done. A policy deleted earlier is still
 * named by its restrictions and holds no rules, as ngrok documents.
 */
export async function loadAccountRestrictions(
  db: Queryable,
  accountId: string,
  without?: string,
): Promise<AccountRestrictions> {
  const rules = await rulesByPolicy(db, accountId, without);
  const byType = new Map<RestrictionType, CompiledRestriction[]>();
  for (const row of await objectsOfKind(db, accountId, 'ip_restrictions')) {
    if (row.id === without) continue;
    const policies = row.fields.ip_policies as string[];
    const type = row.fields.type as RestrictionType;
    const restriction = compileRestriction(
      row.id,
      row.fields.enforced === true,
      policies.flatMap((policy) => rules.get(policy) ?? []),
    );
    byType.set(type, [...(byType.get(type) ?? []), restriction]);
  }
  return byType;
}

/**
 * The service's cache of every account's IP restrictions, read from `db`: `verdict` for the
 * REST API's hook, `ipAllowed(accountId, type, address)` for agent and endpoint listeners.
 */
export function createIpRestrictions(db: Queryable, ttlMs: number): RestrictionCache {
  return createRestrictionCache({
    ttlMs,
    load: (accountId) => loadAccountRestrictions(db, accountId),
  });
}
