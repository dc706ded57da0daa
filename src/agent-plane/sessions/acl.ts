import { AppError } from '../../shared/errors.ts';

// A credential's acl (the spec's Authentication rules, docs/decisions.md#acl): `bind:<domain>`
// rules, a domain that may start with `*.` to match every name under it, `bind:<host>:<port>`
// for one reserved TCP address (`eu.tcp.<SERVICE_DOMAIN>:23817`, the form the API shows the
// address in), or `*` alone, which allows everything. No acl (or an empty one) means no
// restriction. Shared by tunnel credentials and SSH public keys; the agent listener asks
// `aclAllows` before it binds a hostname or a TCP address.

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
/** `<host>:<port>`: a reserved TCP address, its port without leading zeros. */
const ADDRESS = /^(.+):([1-9]\d{0,4})$/;

/** True when `domain` is a lower-case DNS name, optionally starting with `*.`. */
function isBindDomain(domain: string): boolean {
  const name = domain.startsWith('*.') ? domain.slice(2) : domain;
  return name.length <= 253 && name.split('.').every((label) => LABEL.test(label));
}

/** True when `value` is a bind rule's value: a domain, `*.<domain>` or `<host>:<port>`. */
function isBindValue(value: string): boolean {
  const address = ADDRESS.exec(value);
  if (address === null) return isBindDomain(value);
  const [, host, port] = address;
  return !host.startsWith('*.') && isBindDomain(host) && Number(port) <= 65535;
}

/** Checks and normalizes (lower-cases) an acl; an invalid rule is a 400 naming it. */
export function parseAcl(rules: readonly string[], field = 'acl'): string[] {
  return rules.map((rule, index) => {
    const normalized = rule.trim().toLowerCase();
    if (normalized === '*') return normalized;
    const value = normalized.startsWith('bind:') ? normalized.slice(5) : undefined;
    if (value === undefined || !isBindValue(value)) {
      throw new AppError(
        'ERR_INVALID_FIELD',
        `"${field}[${index}]": "${rule}" is not a rule; write bind:<domain>, bind:*.<domain>, bind:<host>:<port> (a reserved TCP address) or *`,
        { field: `${field}[${index}]` },
      );
    }
    return `bind:${value}`;
  });
}

/**
 * True when `acl` lets its holder bind `hostname` (lower-case), or with `port` the TCP address
 * `hostname:port`: a domain rule covers every port of its host, an address rule only its own.
 */
export function aclAllows(acl: readonly string[], hostname: string, port?: number): boolean {
  if (acl.length === 0) return true;
  return acl.some((rule) => {
    if (rule === '*') return true;
    const value = rule.slice('bind:'.length);
    if (ADDRESS.test(value)) return port !== undefined && value === `${hostname}:${port}`;
    if (!value.startsWith('*.')) return hostname === value;
    return hostname.endsWith(value.slice(1)) && hostname.length > value.length - 1;
  });
}
