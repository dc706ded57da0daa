import { type Address, type Cidr, cidrContains, parseCidr } from './cidr.ts';

// Whether IP restrictions let an address through, with ngrok's semantics: an address is allowed
// by a restriction only if it matches at least one `allow` rule and no `deny` rule of the
// restriction's policies (so deny wins, and a restriction whose policies hold no allow rule
// refuses everyone). Every enforced restriction of a type must allow the address; one that is not
// enforced never refuses, it only names itself as a warning.

/** What a rule does to the addresses its range holds. */
export type RuleAction = 'allow' | 'deny';

/** One IP policy rule, as stored (its `cidr` already canonical). */
export interface PolicyRule {
  cidr: string;
  action: RuleAction;
}

/** A restriction with the rules of all its policies parsed, ready to match addresses. */
export interface CompiledRestriction {
  id: string;
  enforced: boolean;
  allow: Cidr[];
  deny: Cidr[];
}

/** The outcome for one address. */
export interface Verdict {
  allowed: boolean;
  /** The enforced restriction that refused the address, when one did. */
  refusedBy?: string;
  /** Restrictions not enforced that would have refused the address (log a warning for each). */
  warnings: string[];
}

/**
 * Parses the rules of a restriction's policies once (a policy deleted since counts as holding no
 * rules, as ngrok documents). Rules are trusted to be canonical; parseCidr throws if one is not.
 */
export function compileRestriction(
  id: string,
  enforced: boolean,
  rules: readonly PolicyRule[],
): CompiledRestriction {
  const allow: Cidr[] = [];
  const deny: Cidr[] = [];
  for (const rule of rules) (rule.action === 'deny' ? deny : allow).push(parseCidr(rule.cidr));
  return { id, enforced, allow, deny };
}

/** True when some allow rule holds the address and no deny rule does. */
export function restrictionAllows(
  restriction: CompiledRestriction,
  address: Address | undefined,
): boolean {
  if (address === undefined) return false;
  const holds = (cidr: Cidr) => cidrContains(cidr, address);
  return restriction.allow.some(holds) && !restriction.deny.some(holds);
}

/** The verdict of all restrictions of one type on an address; none at all allows everyone. */
export function decide(
  restrictions: readonly CompiledRestriction[],
  address: Address | undefined,
): Verdict {
  const warnings: string[] = [];
  for (const restriction of restrictions) {
    if (restrictionAllows(restriction, address)) continue;
    if (restriction.enforced) return { allowed: false, refusedBy: restriction.id, warnings };
    warnings.push(restriction.id);
  }
  return { allowed: true, warnings };
}
