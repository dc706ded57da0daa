import { isIP } from 'node:net';
import type { Config } from '../../config/load.ts';
import { atOrUnder, overlap } from './claims.ts';

// The service's own names (docs/decisions.md#name-claims): SERVICE_DOMAIN, the names it answers
// itself under it (CNAME targets `<random>.cname.`, DNS-01 targets `<random>.acme.`, TCP
// addresses `<region>.tcp.`), its name servers and the hosts of its own URLs. No account claims
// them, nor a name above or below them; under SERVICE_DOMAIN an account may reserve any other
// name (a reserved domain, not a wildcard: the service's subdomains), and nothing else.

export type ServiceNamesConfig = Pick<
  Config,
  'serviceDomain' | 'nameServers' | 'publicUrl' | 'internalUrl'
>;

/** Labels under SERVICE_DOMAIN whose names the service answers itself. */
const OWN_LABELS = ['cname', 'acme', 'tcp'];

/** A URL's host when it is a DNS name of two labels or more. */
function urlHost(url: string): string[] {
  if (url === '') return [];
  const host = new URL(url).hostname;
  return isIP(host) === 0 && host.includes('.') ? [host] : [];
}

/** The names no account may overlap. */
function ownNames(config: ServiceNamesConfig): string[] {
  return [
    ...OWN_LABELS.map((label) => `${label}.${config.serviceDomain}`),
    ...config.nameServers,
    ...urlHost(config.publicUrl),
    ...urlHost(config.internalUrl),
  ];
}

/**
 * Why `name` (a claim's base, or a hostname to bind) is the service's, or undefined when it is
 * not; `subdomain` says whether a name under SERVICE_DOMAIN is asked for as a reserved name.
 */
export function serviceNameRefusal(
  config: ServiceNamesConfig,
  name: string,
  subdomain: boolean,
): string | undefined {
  const domain = config.serviceDomain;
  if (ownNames(config).some((own) => overlap(name, own))) {
    return `"${name}" is a name of the service itself, or above or under one`;
  }
  if (atOrUnder(domain, name)) return `"${name}" is, or is above, the service's domain ${domain}`;
  if (atOrUnder(name, domain) && !subdomain) {
    return `names under ${domain} are the service's: reserve one as a reserved domain`;
  }
  return undefined;
}
