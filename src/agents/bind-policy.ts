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

/** Bind addresses that name no host: `-R <port>:…` sends one of them. */
const ANY_ADDRESS = new Set(['', 'localhost', '0.0.0.0', '*', '::', '127.0.0.1']);

/**
 * A TCP bind (`-R <port>:…`, or `-R <reserved host>:<port>:…`): the port must be one of the
 * account's reserved addresses, which the credential's acl must allow (its host, as a domain).
 * The reserved address, or why it may not be bound.
 */
export async function tcpBind(
  db: Queryable,
  credential: AgentCredential,
  bindAddr: string,
  port: number,
): Promise<{ host: string; addr: string } | { refusal: string }> {
  const rows = await db.query<{ addr: string }>(
    `SELECT fields->>'addr' AS addr FROM account_objects
     WHERE account_id = $1 AND kind = 'reserved_addrs' AND fields->>'addr' LIKE $2`,
    [credential.accountId, `%:${port}`],
  );
  const wanted = bindAddr.toLowerCase();
  const addr = rows.rows
    .map((row) => row.addr)
    .find((a) => ANY_ADDRESS.has(wanted) || a === `${wanted}:${port}`);
  if (addr === undefined) {
    return {
      refusal: `port ${port} is not a reserved address of this account: reserve one (POST /reserved_addrs) and bind its port`,
    };
  }
  const host = addr.slice(0, addr.lastIndexOf(':'));
  if (!aclAllows(credential.acl, host)) {
    return { refusal: `the credential's acl does not allow binding "${addr}"` };
  }
  return { host, addr };
}
