import { parseCallerAddress } from './cidr.ts';
import { type CompiledRestriction, decide, type Verdict } from './ip-decision.ts';

// Each account's IP restrictions, compiled, held in memory so checking a request costs no query.
// A change of a policy, rule or restriction through this instance invalidates the account at
// once; other instances see it when their entry expires (ttlMs), so a change takes at most that
// long to apply everywhere.

/** What traffic a restriction governs (ngrok's four types). */
export type RestrictionType = 'api' | 'agent' | 'endpoints' | 'dashboard';

/**
 * ip_policy.decision of traffic events: `invalid` when the account has no IP restriction of the
 * type (the module did not run), else `allow` or `block` by its enforced restrictions.
 */
export type IpDecision = 'allow' | 'block' | 'invalid';

/** One account's restrictions, by type. */
export type AccountRestrictions = ReadonlyMap<RestrictionType, readonly CompiledRestriction[]>;

/** How the cache reads and times its entries. */
export interface RestrictionCacheOptions {
  /** Reads and compiles an account's restrictions from the store. */
  load(accountId: string): Promise<AccountRestrictions>;
  /** How long an entry lives before it is read again. */
  ttlMs: number;
  /** Most accounts held at once; beyond, the oldest entry goes. */
  maxAccounts?: number;
  now?: () => number;
}

/** The cache, and the checks made through it. */
export interface RestrictionCache {
  /** The verdict of the account's restrictions of `type` on a caller's address. */
  verdict(accountId: string, type: RestrictionType, address: string | undefined): Promise<Verdict>;
  /** True when the account's enforced restrictions of `type` let `address` through. */
  ipAllowed(accountId: string, type: RestrictionType, address: string): Promise<boolean>;
  /** ip_policy.decision of a traffic event: `invalid` when the account has none of `type`. */
  ipDecision(accountId: string, type: RestrictionType, address: string): Promise<IpDecision>;
  /** Forgets the account's entry (after a change to its policies, rules or restrictions). */
  invalidate(accountId: string): void;
}

interface Entry {
  restrictions: Promise<AccountRestrictions>;
  expires: number;
}

/** A cache over `load`; concurrent requests of one account share one load. */
export function createRestrictionCache(options: RestrictionCacheOptions): RestrictionCache {
  const { load, ttlMs, maxAccounts = 10_000, now = Date.now } = options;
  const entries = new Map<string, Entry>();

  function restrictionsOf(accountId: string): Promise<AccountRestrictions> {
    const cached = entries.get(accountId);
    if (cached && cached.expires > now()) return cached.restrictions;
    entries.delete(accountId);
    if (entries.size >= maxAccounts) entries.delete(entries.keys().next().value as string);
    const restrictions = load(accountId);
    const entry = { restrictions, expires: now() + ttlMs };
    entries.set(accountId, entry);
    // A failed load is not kept: the next request tries again.
    restrictions.catch(() => {
      if (entries.get(accountId) === entry) entries.delete(accountId);
    });
    return restrictions;
  }

  /** The verdict, or undefined when the account has no restriction of `type`. */
  async function verdictIfAny(
    accountId: string,
    type: RestrictionType,
    address: string | undefined,
  ): Promise<Verdict | undefined> {
    const ofType = (await restrictionsOf(accountId)).get(type) ?? [];
    if (ofType.length === 0) return undefined;
    return decide(ofType, parseCallerAddress(address));
  }

  async function verdict(
    accountId: string,
    type: RestrictionType,
    address: string | undefined,
  ): Promise<Verdict> {
    return (await verdictIfAny(accountId, type, address)) ?? { allowed: true, warnings: [] };
  }

  return {
    verdict,
    ipAllowed: async (accountId, type, address) =>
      (await verdict(accountId, type, address)).allowed,
    async ipDecision(accountId, type, address) {
      const found = await verdictIfAny(accountId, type, address);
      if (found === undefined) return 'invalid';
      return found.allowed ? 'allow' : 'block';
    },
    invalidate: (accountId) => {
      entries.delete(accountId);
    },
  };
}
