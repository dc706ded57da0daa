import type { Queryable } from './db.ts';

/** How certificates are managed for an ingress; null when management is off. */
export interface CertPolicy {
  authority: 'letsencrypt';
  private_key_type: 'rsa' | 'ecdsa';
}

/** An Agent Ingress as stored. ns_targets and region_domains are derived from configuration. */
export interface AgentIngressRow {
  id: string;
  account_id: string;
  description: string;
  metadata: string;
  domain: string;
  cert_policy: CertPolicy | null;
  created_at: Date;
  /** The automatic certificate (a tls_certificate) and when it renews; set by the runner. */
  certificate_id?: string | null;
  renews_at?: Date | null;
}

/** Inserts an ingress row; a taken domain raises the store's unique violation. */
export async function insertAgentIngress(db: Queryable, row: AgentIngressRow): Promise<void> {
  await db.query(
    `INSERT INTO agent_ingresses (id, account_id, description, metadata, domain, cert_policy, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [
      row.id,
      row.account_id,
      row.description,
      row.metadata,
      row.domain,
      row.cert_policy === null ? null : JSON.stringify(row.cert_policy),
      row.created_at,
    ],
  );
}

/** Writes description, metadata and policy of an existing row (locked by the caller's select). */
export async function updateAgentIngress(db: Queryable, row: AgentIngressRow): Promise<void> {
  await db.query(
    `UPDATE agent_ingresses SET description = $3, metadata = $4, cert_policy = $5
     WHERE account_id = $1 AND id = $2`,
    [
      row.account_id,
      row.id,
      row.description,
      row.metadata,
      row.cert_policy === null ? null : JSON.stringify(row.cert_policy),
    ],
  );
}
