import { createSecureContext, type SecureContext } from 'node:tls';
import type { Keyring } from '../../shared/secrets.ts';
import type { Queryable } from '../../store/db.ts';

// Which certificate the edge's HTTPS listener presents for a TLS server name (SNI). Candidates,
// best first: the uploaded certificate of a reserved domain (exact, then wildcard), its automatic
// one, then the automatic certificate of the Agent Ingress whose domain, region domain or
// `*.<region>.<domain>` the name is. The first whose SANs cover the name wins. Choices are cached
// per name for `ttlMs` (other instances' changes), secure contexts per certificate id; `invalidate`
// forgets both when this instance commits a change. Private keys stay in memory, never logged.

export interface SniCertificates {
  /** The secure context for a server name, or undefined when no certificate covers it. */
  contextFor(serverName: string): Promise<SecureContext | undefined>;
  /** Forgets every choice and context: a certificate or a domain changed. */
  invalidate(): void;
}

/** Bounds the names remembered (a scan of random names must not grow memory without end). */
const MAX_NAMES = 10_000;

/** The name without a trailing dot, lower-cased; undefined when it is no DNS name. */
function normalName(serverName: string): string | undefined {
  const name = serverName.toLowerCase().replace(/\.$/, '');
  return /^[a-z0-9_-]+(\.[a-z0-9_-]+)+$/.test(name) ? name : undefined;
}

/** The name without its first label (`a.b.c` → `b.c`). */
function parent(name: string): string {
  return name.slice(name.indexOf('.') + 1);
}

/** True when a SAN (`a.b.c` or `*.b.c`, one label only) covers `name`. */
export function sanCovers(san: string, name: string): boolean {
  const pattern = san.toLowerCase();
  if (!pattern.startsWith('*.')) return pattern === name;
  return name.includes('.') && parent(name) === pattern.slice(2);
}

/** Certificate ids that may serve `name`, best first. */
async function candidates(db: Queryable, name: string): Promise<string[]> {
  const up = parent(name);
  const reserved = await db.query<{ unique_key: string; fields: Record<string, unknown> }>(
    `SELECT unique_key, fields FROM account_objects
     WHERE kind = 'reserved_domains' AND unique_key = ANY($1::text[])`,
    [[name, `*.${up}`]],
  );
  // The exact reserved domain before a wildcard one.
  const exactFirst = (row: { unique_key: string }) => (row.unique_key === name ? 0 : 1);
  const domains = reserved.rows.sort((a, b) => exactFirst(a) - exactFirst(b));
  const ids = domains.flatMap((row) => [row.fields.certificate, row.fields.managed_certificate_id]);
  // An ingress domain is the name, its parent (a region domain) or grandparent (`*.<region>`).
  const ingresses = await db.query<{ certificate_id: string }>(
    `SELECT certificate_id FROM agent_ingresses
     WHERE domain = ANY($1::text[]) AND certificate_id IS NOT NULL ORDER BY length(domain) DESC`,
    [[name, up, parent(up)]],
  );
  ids.push(...ingresses.rows.map((row) => row.certificate_id));
  return ids.filter((id): id is string => typeof id === 'string' && id !== '');
}

interface StoredCertificate {
  id: string;
  fields: { certificate_pem: string; subject_alternative_names: { dns_names: string[] } };
  secret: string | null;
}

async function loadCertificate(db: Queryable, id: string): Promise<StoredCertificate | undefined> {
  const result = await db.query<StoredCertificate>(
    `SELECT id, fields, secret FROM account_objects WHERE kind = 'tls_certificates' AND id = $1`,
    [id],
  );
  return result.rows[0];
}

/** The stored certificate that serves `name`, if any. */
async function chooseCertificate(db: Queryable, name: string) {
  for (const id of await candidates(db, name)) {
    const row = await loadCertificate(db, id);
    if (row === undefined || row.secret === null) continue;
    const sans = row.fields.subject_alternative_names?.dns_names ?? [];
    if (sans.some((san) => sanCovers(san, name))) return row;
  }
  return undefined;
}

export function createSniCertificates(deps: {
  db: Queryable;
  keyring: Keyring;
  ttlMs: number;
}): SniCertificates {
  const { db, keyring, ttlMs } = deps;
  const chosen = new Map<string, { at: number; context: Promise<SecureContext | undefined> }>();
  const contexts = new Map<string, SecureContext>();

  async function lookUp(name: string): Promise<SecureContext | undefined> {
    const row = await chooseCertificate(db, name);
    if (row === undefined) return undefined;
    let context = contexts.get(row.id);
    if (context === undefined) {
      const key = keyring.open(row.secret as string);
      context = createSecureContext({ cert: row.fields.certificate_pem, key });
      contexts.set(row.id, context);
    }
    return context;
  }

  return {
    contextFor(serverName) {
      const name = normalName(serverName);
      if (name === undefined) return Promise.resolve(undefined);
      const known = chosen.get(name);
      if (known !== undefined && Date.now() - known.at < ttlMs) return known.context;
      if (chosen.size >= MAX_NAMES) chosen.clear();
      const context = lookUp(name);
      chosen.set(name, { at: Date.now(), context });
      // A failed look-up (store down) is not remembered: the next handshake asks again.
      context.catch(() => {
        if (chosen.get(name)?.context === context) chosen.delete(name);
      });
      return context;
    },
    invalidate() {
      chosen.clear();
      contexts.clear();
    },
  };
}
