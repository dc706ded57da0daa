import type { Config } from '../../config/load.ts';
import { lockDomainFamily } from '../../store/advisory-locks.ts';
import type { Queryable } from '../../store/db.ts';
import { claimsOverlapping } from '../../store/domain-claims.ts';
import { AppError } from '../errors.ts';
import { baseOf, type DomainClaim, familyOf } from './claims.ts';
import { isPublicSuffix } from './public-suffix.ts';
import { serviceNameRefusal } from './service-names.ts';

// Who may claim a name (docs/decisions.md#name-claims), checked in the transaction that stores
// the claim, under a lock on its family: every instance sharing the store sees the same claims.

/** The 409 for a domain an ingress or a reserved domain holds already. */
export function domainTaken(domain: string): AppError {
  return new AppError('ERR_DOMAIN_TAKEN', `the domain "${domain}" is already in use`, {
    field: 'domain',
  });
}

/** A new claim: the account and the domain as it will be stored (checked for form already). */
export type NewClaim = Pick<DomainClaim, 'accountId' | 'kind' | 'domain'>;

/**
 * Refuses a claim of a public suffix (400), of the service's own names (409), or of a name at,
 * above or under another account's claim (409, naming neither the account nor its name); the
 * same account may nest its own names. Call inside the transaction that stores the claim.
 */
export async function checkClaim(
  tx: Queryable,
  config: Pick<Config, 'serviceDomain' | 'nameServers' | 'publicUrl' | 'internalUrl'>,
  claim: NewClaim,
): Promise<void> {
  const base = baseOf(claim.domain);
  if (isPublicSuffix(base)) {
    throw new AppError(
      'ERR_INVALID_DOMAIN',
      `"domain" ${JSON.stringify(claim.domain)} is not valid: "${base}" is a public suffix (publicsuffix.org), which no single owner holds; claim a name under it`,
      { field: 'domain' },
    );
  }
  const subdomain = claim.kind === 'reserved_domain' && base === claim.domain;
  const own = serviceNameRefusal(config, base, subdomain);
  if (own !== undefined) throw new AppError('ERR_DOMAIN_TAKEN', own, { field: 'domain' });
  await lockDomainFamily(tx, familyOf(base));
  for (const held of await claimsOverlapping(tx, base)) {
    // The same name of the same kind: the store's unique key answers, as it always has.
    if (held.domain === claim.domain && held.kind === claim.kind) continue;
    if (held.accountId !== claim.accountId) {
      throw new AppError(
        'ERR_DOMAIN_TAKEN',
        `the domain "${claim.domain}" is, or is above or under, a domain another account holds`,
        { field: 'domain' },
      );
    }
    if (held.domain === claim.domain) throw domainTaken(claim.domain);
  }
}
