// The names accounts claim: Agent Ingress domains and reserved domains, across the service
// (docs/decisions.md#name-claims). A claim's base is its domain without a leading `*.`. Two
// claims overlap when one base is the other or under it; claims of two accounts never may, so
// the older of two overlapping claims of different accounts holds and the newer is inert: it
// serves no DNS and allows no bind (only names stored before overlaps were refused can be so).

/** One claimed name as the store holds it. */
export interface DomainClaim {
  id: string;
  accountId: string;
  kind: 'agent_ingress' | 'reserved_domain';
  /** The domain as claimed: `a.com`, or `*.a.com` for a reserved wildcard. */
  domain: string;
  createdAt: Date;
}

/** The claim's name without its wildcard. */
export function baseOf(domain: string): string {
  return domain.startsWith('*.') ? domain.slice(2) : domain;
}

/** True when `name` is `domain` or a name under it. */
export function atOrUnder(name: string, domain: string): boolean {
  return name === domain || name.endsWith(`.${domain}`);
}

/** True when one of two names is the other or under it. */
export function overlap(a: string, b: string): boolean {
  return atOrUnder(a, b) || atOrUnder(b, a);
}

/**
 * The last two labels of a name: overlapping names always share them (neither is a single
 * label), so one lock on this key serializes every claim that could overlap a name.
 */
export function familyOf(name: string): string {
  return name.split('.').slice(-2).join('.');
}

/** True when the claim lets its account serve `hostname`. */
export function covers(claim: DomainClaim, hostname: string): boolean {
  const base = baseOf(claim.domain);
  if (claim.kind === 'agent_ingress') return atOrUnder(hostname, base);
  if (claim.domain.startsWith('*.')) return hostname.endsWith(`.${base}`);
  return hostname === base;
}

function older(a: DomainClaim, b: DomainClaim): DomainClaim {
  const at = a.createdAt.getTime() - b.createdAt.getTime();
  return at < 0 || (at === 0 && a.id < b.id) ? a : b;
}

/** The ids of the inert claims: each overlaps an older claim of another account. */
export function inertClaims(claims: readonly DomainClaim[]): Set<string> {
  const byBase = new Map<string, DomainClaim[]>();
  for (const claim of claims) {
    const base = baseOf(claim.domain);
    byBase.set(base, [...(byBase.get(base) ?? []), claim]);
  }
  const inert = new Set<string>();
  for (const claim of claims) {
    // Every overlapping pair is met once from its deeper (or equal) side: the claim's base and
    // the names above it.
    for (const name of selfAndAncestors(baseOf(claim.domain))) {
      for (const other of byBase.get(name) ?? []) {
        if (other.accountId === claim.accountId) continue;
        inert.add(older(claim, other) === claim ? other.id : claim.id);
      }
    }
  }
  return inert;
}

function parentOf(name: string): string {
  return name.slice(name.indexOf('.') + 1);
}

/** The name and every name above it of two labels or more, deepest first. */
export function selfAndAncestors(name: string): string[] {
  const names: string[] = [];
  for (let at = name; at.includes('.'); at = parentOf(at)) names.push(at);
  return names;
}
