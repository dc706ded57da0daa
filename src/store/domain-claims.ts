import type { DomainClaim } from '../domains/claims.ts';
import type { Queryable } from './db.ts';

// The claimed names of every account: Agent Ingress domains and reserved domains, in one shape.

const CLAIMS = `
  SELECT id, account_id, 'agent_ingress' AS kind, domain, created_at FROM agent_ingresses
  UNION ALL
  SELECT id, account_id, 'reserved_domain' AS kind, fields->>'domain' AS domain, created_at
  FROM account_objects WHERE kind = 'reserved_domains'`;

interface ClaimRow {
  id: string;
  account_id: string;
  kind: DomainClaim['kind'];
  domain: string;
  created_at: Date;
}

const claimOf = (row: ClaimRow): DomainClaim => ({
  id: row.id,
  accountId: row.account_id,
  kind: row.kind,
  domain: row.domain,
  createdAt: new Date(row.created_at),
});

/** Every claim whose domain is `family` or under it (familyOf in src/domains/claims.ts). */
export async function claimsInFamily(db: Queryable, family: string): Promise<DomainClaim[]> {
  const result = await db.query<ClaimRow>(
    `SELECT * FROM (${CLAIMS}) c WHERE domain = $1 OR right(domain, length($1) + 1) = '.' || $1`,
    [family],
  );
  return result.rows.map(claimOf);
}

/** Every claim of the service. */
export async function allClaims(db: Queryable): Promise<DomainClaim[]> {
  const result = await db.query<ClaimRow>(CLAIMS);
  return result.rows.map(claimOf);
}
