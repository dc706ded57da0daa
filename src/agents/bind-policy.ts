import { aclAllows } from '../auth/acl.ts';
import type { Queryable } from '../store/db.ts';
import type { AgentCredential } from './authenticate.ts';

// Which hostnames an agent may bind: names of its account (an Agent Ingress domain, its region
// domains or any name under it; a reserved domain, or a name under a `*.` reserved wildcard),
// and among them only those its credential's acl allows.

const HOSTNAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9-]{1,63}$/;

/** True when `name` is `domain` or a name under it. */
function within(name: string, domain: string): boolean {
  return name === domain || name.endsWith(`.${domain}`);
}

/** True when `hostname` belongs to the account (see above). */
async function accountOwns(db: Queryable, accountId: string, hostname: string): Promise<boolean> {
  const ingresses = await db.query<{ domain: string }>(
    'SELECT domain FROM agent_ingresses WHERE account_id = $1',
    [accountId],
  );
  if (ingresses.rows.some(({ domain }) => within(hostname, domain))) return true;
  const reserved = await db.query<{ domain: string }>(
    `SELECT fields->>'domain' AS domain FROM account_objects
     WHERE account_id = $1 AND kind = 'reserved_domains'`,
    [accountId],
  );
  return reserved.rows.some(({ domain }) =>
    domain.startsWith('*.') ? hostname.endsWith(domain.slice(1)) : hostname === domain,
  );
}

/** Why `credential` may not bind `hostname`, or undefined when it may. */
export async function bindRefusal(
  db: Queryable,
  credential: AgentCredential,
  hostname: string,
): Promise<string | undefined> {
  if (!HOSTNAME.test(hostname)) {
    return `"${hostname}" is not a hostname: use ssh -R <hostname>:80:localhost:<port>`;
  }
  if (!(await accountOwns(db, credential.accountId, hostname))) {
    return `"${hostname}" is not a domain of this account: create an Agent Ingress or reserve the domain first`;
  }
  if (!aclAllows(credential.acl, hostname)) {
    return `the credential's acl does not allow binding "${hostname}"`;
  }
  return undefined;
}
