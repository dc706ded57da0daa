import type { Config } from '../../config/load.ts';
import type { Queryable } from '../../store/db.ts';
import type { CompiledPolicy } from '../policy/index.ts';
import type { AgentCredential } from '../sessions/authenticate.ts';
import {
  assignedTcpAddress,
  bindRefusal,
  sessionRegion,
  tcpBind,
} from '../sessions/bind-policy.ts';
import { bindPolicy } from './bind-policy-options.ts';
import { type BindRequest, NGROK_ERRORS, NgrokRefusal } from './messages.ts';

// Bind: which endpoint an ngrok agent asks for, checked by the same rules as an SSH bind
// (bind-policy.ts: names the account's claims cover and no other account's encloses, allowed by
// the credential's acl; a TCP endpoint on one of the account's reserved addresses). The URL is
// answered as ngrok does. Endpoint options become the endpoint's policy (bind-policy-options.ts)
// or are refused by name, never ignored. TCP without an address gets a port of TCP_ADDR_PORTS for
// the session (ngrok's random address), in the region of the name the agent dialled. A `tls`
// endpoint is named as an HTTPS one is, by the same rules; the edge passes its connections
// through by SNI.

/** A granted bind. */
export interface Binding {
  proto: 'http' | 'https' | 'tcp' | 'tls';
  /** The registry's endpoint: the hostname, or the reserved address `host:port`. */
  endpoint: string;
  url: string;
  region: string;
  /** For TCP: where the endpoint listens. */
  tcp?: { host: string; port: number };
  /** For TCP: the port was assigned for the session (no Addr), not a reserved address's. */
  assigned?: boolean;
  /** The endpoint's Traffic Policy (bind-policy-options.ts), when its Bind asks for one. */
  policy?: CompiledPolicy;
}

/** The refusal of a bind policy's reason, with ngrok's code where it has one. */
function policyRefusal(reason: string): NgrokRefusal {
  if (/another account/.test(reason)) {
    return new NgrokRefusal(reason, NGROK_ERRORS.domainOfAnotherAccount);
  }
  if (/not a domain of this account/.test(reason)) {
    return new NgrokRefusal(reason, NGROK_ERRORS.domainNotReserved);
  }
  if (/not a reserved address/.test(reason)) {
    return new NgrokRefusal(reason, NGROK_ERRORS.addressNotReserved);
  }
  return new NgrokRefusal(reason);
}

/** The hostname an HTTP bind asks for: Domain (Rust, JS), Hostname, or URL's host (Go). */
function requestedHost(opts: Record<string, unknown>): string {
  for (const key of ['Domain', 'Hostname']) {
    if (typeof opts[key] === 'string' && opts[key] !== '')
      return (opts[key] as string).toLowerCase();
  }
  if (typeof opts.URL === 'string' && opts.URL !== '') {
    const url = URL.parse(opts.URL.includes('://') ? opts.URL : `https://${opts.URL}`);
    return url?.hostname.toLowerCase() ?? '';
  }
  return '';
}

/** Checks `request` for `credential`; the binding, or an NgrokRefusal. */
export async function checkBind(
  db: Queryable,
  config: Config,
  credential: AgentCredential,
  request: BindRequest,
  /**
   * The TLS server name the agent dialled (its region is where assigned addresses go), and the
   * port this tunnel was last assigned (a reconnect's, tried first).
   */
  hints: { dialled?: string; lastPort?: number } = {},
): Promise<Binding> {
  const proto = request.Proto ?? '';
  const opts = request.Opts ?? {};
  const policy = bindPolicy(opts, proto);
  if (proto === 'http' || proto === 'https' || proto === 'tls') {
    return { ...(await hostnameBind(db, config, credential, proto, opts)), policy };
  }
  if (proto === 'tcp') return tcpEndpointBind(db, config, credential, opts, hints);
  throw new NgrokRefusal(`"${proto}" is not an endpoint protocol: use http, https, tcp or tls`);
}

/** An endpoint named by its hostname: HTTP(S), or TLS (passed through by SNI). */
async function hostnameBind(
  db: Queryable,
  config: Config,
  credential: AgentCredential,
  proto: 'http' | 'https' | 'tls',
  opts: Record<string, unknown>,
): Promise<Binding> {
  const hostname = requestedHost(opts);
  if (hostname === '') {
    throw new NgrokRefusal(
      'name the endpoint\'s domain (forward({ domain: "app.<your ingress domain>" }) or --url): this server assigns no random names',
      NGROK_ERRORS.domainNotReserved,
    );
  }
  const refusal = await bindRefusal(db, config, credential, hostname);
  if (refusal !== undefined) throw policyRefusal(refusal);
  const region = await sessionRegion(db, credential.accountId, hostname, config.regions);
  return { proto, endpoint: hostname, url: `${proto}://${hostname}`, region };
}

async function tcpEndpointBind(
  db: Queryable,
  config: Config,
  credential: AgentCredential,
  opts: Record<string, unknown>,
  hints: { dialled?: string; lastPort?: number },
): Promise<Binding> {
  const addr = typeof opts.Addr === 'string' ? opts.Addr.replace(/^tcp:\/\//, '') : '';
  if (addr === '') return assignedTcpBind(db, config, credential, hints);
  const match = /^(.*):(\d{1,5})$/.exec(addr);
  if (match === null) {
    throw new NgrokRefusal(
      `"${addr}" is not a TCP address: name a reserved one as <host>:<port>, or none for a port assigned to the session`,
      NGROK_ERRORS.addressNotReserved,
    );
  }
  const bound = await tcpBind(db, credential, match[1], Number(match[2]));
  if ('refusal' in bound) throw policyRefusal(bound.refusal);
  const region = await sessionRegion(db, credential.accountId, bound.addr, config.regions);
  return {
    proto: 'tcp',
    endpoint: bound.addr,
    url: `tcp://${bound.addr}`,
    region,
    tcp: { host: bound.host, port: Number(match[2]) },
  };
}

/** TCP without an address: a port of TCP_ADDR_PORTS, held while the session lives. */
async function assignedTcpBind(
  db: Queryable,
  config: Config,
  credential: AgentCredential,
  { dialled = '', lastPort }: { dialled?: string; lastPort?: number },
): Promise<Binding> {
  const label = dialled.split('.')[0].toLowerCase();
  const region = config.regions.includes(label)
    ? label
    : await sessionRegion(db, credential.accountId, dialled, config.regions);
  const assigned = await assignedTcpAddress(db, config, credential, region, lastPort);
  if ('refusal' in assigned) throw new NgrokRefusal(assigned.refusal);
  return {
    proto: 'tcp',
    endpoint: assigned.addr,
    url: `tcp://${assigned.addr}`,
    region,
    tcp: { host: assigned.host, port: assigned.port },
    assigned: true,
  };
}
