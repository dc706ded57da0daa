import { baseOf, covers, inertClaims, selfAndAncestors } from '../../shared/domains/claims.ts';
import { type ServiceNamesConfig, serviceNameRefusal } from '../../shared/domains/service-names.ts';
import type { PortRange } from '../../shared/net/port-choice.ts';
import { choosePort } from '../../shared/net/port-choice.ts';
import type { Queryable } from '../../store/db.ts';
import { claimsAt, claimsUnder } from '../../store/domain-claims.ts';
import { heldPorts, takenPorts } from '../../store/reserved-addrs.ts';
import { aclAllows } from './acl.ts';
import type { AgentCredential } from './authenticate.ts';
import { isInternalHostname } from './internal-endpoints.ts';

// Which hostnames an agent may bind (docs/decisions.md#name-claims): names of its account (an
// Agent Ingress domain, its region domains or any name under it; a reserved domain, or a name
// under a `*.` reserved wildcard) that no other account's claim encloses, never the service's
// own names, and among them only those its credential's acl allows. One function for every
// agent protocol.

const HOSTNAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9-]{1,63}$/;

/**
 * Whose `hostname` is: no other account's live claim may enclose it, and one of this account's
 * must cover it. Whether an enclosing claim is live depends on the claims above it (enclosing
 * too) and under it (under the topmost enclosing one).
 */
async function holderOf(
  db: Queryable,
  accountId: string,
  hostname: string,
): Promise<'this account' | 'another account' | 'nobody'> {
  const enclosing = await claimsAt(db, selfAndAncestors(hostname));
  if (enclosing.length === 0) return 'nobody';
  const top = enclosing
    .map((claim) => baseOf(claim.domain))
    .reduce((a, b) => (a.length < b.length ? a : b));
  const inert = inertClaims([...enclosing, ...(await claimsUnder(db, top))]);
  const live = enclosing.filter((claim) => !inert.has(claim.id));
  if (live.some((claim) => claim.accountId !== accountId)) return 'another account';
  return live.some((claim) => covers(claim, hostname)) ? 'this account' : 'nobody';
}

/**
 * Why the account may not serve `hostname` (an agent's bind, a cloud endpoint's URL), or
 * undefined when it holds the name.
 */
export async function hostnameRefusal(
  db: Queryable,
  config: ServiceNamesConfig,
  accountId: string,
  hostname: string,
): Promise<string | undefined> {
  if (!HOSTNAME.test(hostname)) return `"${hostname}" is not a hostname`;
  const own = serviceNameRefusal(config, hostname, true);
  if (own !== undefined) return own;
  const holder = await holderOf(db, accountId, hostname);
  if (holder === 'another account') return `"${hostname}" is a name of another account`;
  if (holder === 'nobody') {
    return `"${hostname}" is not a domain of this account: create an Agent Ingress or reserve the domain first`;
  }
  return undefined;
}

/** Why `credential` may not bind `hostname`, or undefined when it may. */
export async function bindRefusal(
  db: Queryable,
  config: ServiceNamesConfig,
  credential: AgentCredential,
  hostname: string,
): Promise<string | undefined> {
  if (!HOSTNAME.test(hostname)) {
    return `"${hostname}" is not a hostname: use ssh -R <hostname>:80:localhost:<port>`;
  }
  // An internal name is the account's own (internal-endpoints.ts): no claim covers one.
  if (!isInternalHostname(hostname)) {
    const refusal = await hostnameRefusal(db, config, credential.accountId, hostname);
    if (refusal !== undefined) return refusal;
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
 * account's reserved addresses, which the credential's acl must allow (the address itself, or
 * its host as a domain). The reserved address, or why it may not be bound.
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
  if (!aclAllows(credential.acl, host, port)) {
    return { refusal: `the credential's acl does not allow binding "${addr}"` };
  }
  return { host, addr };
}

/**
 * A TCP address for a session that names none (ngrok's random TCP address): a random port of
 * TCP_ADDR_PORTS in `region` that no account reserved and no live session holds (`preferred`
 * when it is such a port: a reconnecting tunnel's last one); the session's
 * claim in the registry then holds it across instances until the session ends. The credential's
 * acl must allow the region's host. The address, or why none is given.
 */
export async function assignedTcpAddress(
  db: Queryable,
  config: { serviceDomain: string; tcpAddrPorts: PortRange },
  credential: AgentCredential,
  region: string,
  preferred?: number,
): Promise<{ host: string; addr: string; port: number } | { refusal: string }> {
  const host = `${region}.tcp.${config.serviceDomain}`;
  if (!aclAllows(credential.acl, host)) {
    return { refusal: `the credential's acl does not allow binding a port of "${host}"` };
  }
  const taken = [...(await takenPorts(db, host)), ...(await heldPorts(db, host))];
  const { first, last } = config.tcpAddrPorts;
  const free = (p: number | undefined) => p !== undefined && p >= first && p <= last;
  const port =
    free(preferred) && !taken.includes(preferred!)
      ? preferred
      : choosePort(config.tcpAddrPorts, taken, Math.random());
  if (port === undefined) {
    return {
      refusal: `no TCP address is free in region ${region}: every port of ${first}-${last} (TCP_ADDR_PORTS) is reserved or in use; retry later or bind a reserved address`,
    };
  }
  return { host, addr: `${host}:${port}`, port };
}

/**
 * The region a session serves: the region label of the region domain the hostname is, or is
 * under (`<region>.<ingress domain>`), or of a TCP address (`<region>.tcp.<service domain>`);
 * otherwise the catalogue's default region `us` (the first configured one if `us` is not).
 */
export async function sessionRegion(
  db: Queryable,
  accountId: string,
  hostname: string,
  regions: readonly string[],
): Promise<string> {
  const fallback = regions.includes('us') ? 'us' : (regions[0] ?? '');
  const host = hostname.replace(/:\d+$/, '');
  const first = host.split('.')[0];
  if (host.split('.')[1] === 'tcp' && regions.includes(first)) return first;
  const ingresses = await db.query<{ domain: string }>(
    'SELECT domain FROM agent_ingresses WHERE account_id = $1',
    [accountId],
  );
  for (const { domain } of ingresses.rows) {
    if (!host.endsWith(`.${domain}`)) continue;
    const region = host
      .slice(0, -domain.length - 1)
      .split('.')
      .at(-1)!;
    if (regions.includes(region)) return region;
  }
  return fallback;
}
