import type { Queryable } from './db.ts';

// Uploaded TLS certificates (kind tls_certificates, issued_at null: not the service's own ACME
// ones) by the names they cover, for names the service knows no other way (the agent listener's
// fallback). Two accounts may upload certificates for one name: the first upload holds it, so a
// later one cannot take a name over.

/** An uploaded certificate and its owner. */
export interface UploadedCertificate {
  id: string;
  accountId: string;
  certificatePem: string;
  /** The sealed private key. */
  secret: string;
}

/** The name without its first label (`a.b.c` → `b.c`). */
function parent(name: string): string {
  return name.slice(name.indexOf('.') + 1);
}

/**
 * The earliest uploaded, unexpired certificate with a DNS name covering `name` (lower-case):
 * the name itself, or `*.<parent>` (a wildcard covers one label, as X.509 says).
 */
export async function uploadedCertificateFor(
  db: Queryable,
  name: string,
): Promise<UploadedCertificate | undefined> {
  const patterns = name.includes('.') ? [name, `*.${parent(name)}`] : [name];
  const result = await db.query<{
    id: string;
    account_id: string;
    pem: string;
    secret: string;
  }>(
    `SELECT id, account_id, fields->>'certificate_pem' AS pem, secret FROM account_objects
      WHERE kind = 'tls_certificates' AND secret IS NOT NULL
        AND jsonb_typeof(fields->'issued_at') IS DISTINCT FROM 'string'
        AND (fields->>'not_after')::timestamptz > now()
        AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(
              fields->'subject_alternative_names'->'dns_names') AS san
            WHERE lower(san) = ANY($1::text[]))
      ORDER BY created_at, id LIMIT 1`,
    [patterns],
  );
  const row = result.rows[0];
  return (
    row && { id: row.id, accountId: row.account_id, certificatePem: row.pem, secret: row.secret }
  );
}
