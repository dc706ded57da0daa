import { Resolver } from 'node:dns/promises';

/** The answer of a delegation check: delegated, or what the parent publishes instead. */
export type Delegation = { delegated: true } | { delegated: false; found: string[] };

/** Errors that say the domain has no NS records at all (as opposed to a resolver failing). */
const NO_RECORDS = new Set(['ENOTFOUND', 'ENODATA']);

function canonical(name: string): string {
  return name.toLowerCase().replace(/\.$/, '');
}

/**
 * Checks that `domain`'s NS records, as the resolver (DELEGATION_RESOLVER, or the system's)
 * finds them, are exactly the service's name servers. A resolver failure (timeout, SERVFAIL,
 * refused) throws: it is temporary, not a missing delegation.
 */
export async function checkDelegation(
  domain: string,
  nameServers: string[],
  resolverAddress: string | undefined,
): Promise<Delegation> {
  const resolver = new Resolver({ timeout: 3_000, tries: 2 });
  if (resolverAddress !== undefined) resolver.setServers([resolverAddress]);
  let found: string[];
  try {
    found = (await resolver.resolveNs(domain)).map(canonical).sort();
  } catch (error) {
    if (NO_RECORDS.has((error as NodeJS.ErrnoException).code ?? '')) {
      return { delegated: false, found: [] };
    }
    throw error;
  }
  const wanted = nameServers.map(canonical).sort();
  const same = found.length === wanted.length && found.every((name, i) => name === wanted[i]);
  return same ? { delegated: true } : { delegated: false, found };
}
