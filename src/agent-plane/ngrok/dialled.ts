import type { Queryable } from '../../store/db.ts';
import { uploadedCertificateFor } from '../../store/uploaded-certificates.ts';

// Which account's agent ingress an agent dialled: the TLS server name it connected with (the
// host of its server_addr) is an Agent Ingress's domain or one of its region domains, or a
// reserved domain, or a name only an uploaded certificate covers (its account's, agent-tls.ts);
// agents of other accounts are refused there (ngrok: "connections using
// credentials from other accounts are rejected"). The service's own connect name belongs to no
// account: any account's agent may use it.

/** The name without its first label (`a.b.c` → `b.c`). */
function parent(name: string): string {
  return name.slice(name.indexOf('.') + 1);
}

/** The account owning the dialled name, or undefined when it is the service's own. */
export async function dialledAccount(
  db: Queryable,
  serverName: string,
): Promise<string | undefined> {
  const name = serverName.toLowerCase().replace(/\.$/, '');
  const ingress = await db.query<{ account_id: string }>(
    'SELECT account_id FROM agent_ingresses WHERE domain = ANY($1::text[]) LIMIT 1',
    [[name, parent(name)]],
  );
  if (ingress.rows.length > 0) return ingress.rows[0].account_id;
  const reserved = await db.query<{ account_id: string }>(
    `SELECT account_id FROM account_objects WHERE kind = 'reserved_domains'
       AND unique_key = ANY($1::text[]) LIMIT 1`,
    [[name, `*.${parent(name)}`]],
  );
  if (reserved.rows.length > 0) return reserved.rows[0].account_id;
  return (await uploadedCertificateFor(db, name))?.accountId;
}
