import type { Queryable } from './db.ts';

// Transaction-scoped PostgreSQL advisory locks: held until the transaction ends, across every
// instance sharing the store, for changes whose check reads rows another change may be writing.

// First keys of the two-key locks, one space each: "ad" (addresses), "ip" (IP restrictions) and
// "dn" (domain names).
const ADDR_ALLOCATION = 0x6164;
const IP_CHANGES = 0x6970;
const DOMAIN_CLAIMS = 0x646e;

/** Serializes reserved-address allocation: two instances never pick the same free port. */
export async function lockAddrAllocation(tx: Queryable): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock($1, 0)', [ADDR_ALLOCATION]);
}

/**
 * Serializes an account's IP policy, rule and restriction changes' lockout checks, so two
 * changes that are each harmless cannot together lock the caller out.
 */
export async function lockAccountIpChanges(tx: Queryable, accountId: string): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [IP_CHANGES, accountId]);
}

/**
 * Serializes the claims of names that could overlap (those of one family: familyOf in
 * src/shared/domains/claims.ts), so two claims that each overlap nothing yet cannot both be stored.
 */
export async function lockDomainFamily(tx: Queryable, family: string): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [DOMAIN_CLAIMS, family]);
}
