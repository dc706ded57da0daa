import { type DomainClaim, selfAndAncestors } from '../shared/domains/claims.ts';
import type { Queryable } from './db.ts';

// The claimed names of every account: Agent Ingress domains and reserved domains, in one shape.

/** The claims whose domain column passes `where` ($1 is its parameter). */
const claims = (ingressWhere: string, reservedWhere: string) => `
  SELECT id, account_id, 'agent_ingress' AS kind, domain, created_at
  FROM agent_ingresses WHERE ${ingressWhere}
  UNION ALL
  SELECT id, account_id, 'reserved_domain' AS kind, unique_key AS domain, created_at
  FROM account_objects
  WHERE kind = 'reserved_domains' AND unique_scope = '' AND ${reservedWhere}`;

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

async function read(db: Queryable, sql: string, params: unknown[] = []): Promise<DomainClaim[]> {
  const result = await db.query<ClaimRow>(sql, params);
  return result.rows.map(claimOf);
}

/** The claims whose base is one of `names` (`*.<name>` included); read by their unique keys. */
export function claimsAt(db: Queryable, names: readonly string[]): Promise<DomainClaim[]> {
  const domains = names.flatMap((name) => [name, `*.${name}`]);
  return read(db, claims('domain = ANY($1)', 'unique_key = ANY($1)'), [domains]);
}

/** The claims whose domain ends in `.<name>` (a `*.<name>` wildcard included). */
export function claimsUnder(db: Queryable, name: string): Promise<DomainClaim[]> {
  const under = (column: string) => `right(${column}, length($1) + 1) = '.' || $1`;
  return read(db, claims(under('domain'), under('unique_key')), [name]);
}

/** Every claim of the service. */
export function allClaims(db: Queryable): Promise<DomainClaim[]> {
  return read(db, claims('true', 'true'));
}

/** The claims at, above or under `name` (each once). */
export async function claimsOverlapping(db: Queryable, name: string): Promise<DomainClaim[]> {
  const found = [...(await claimsAt(db, selfAndAncestors(name))), ...(await claimsUnder(db, name))];
  return [...new Map(found.map((claim) => [claim.id, claim])).values()];
}
