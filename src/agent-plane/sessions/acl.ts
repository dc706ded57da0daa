import { AppError } from '../../shared/errors.ts';

// A credential's acl (the spec's Authentication rules, docs/decisions.md): `bind:<domain>` rules, a domain that may start
// with `*.` to match every name under it, or `*` alone, which allows everything. No acl (or an
// empty one) means no restriction. Shared by tunnel credentials and SSH public keys; the agent
// listener asks `aclAllows` before it binds a hostname.

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** True when `domain` is a lower-case DNS name, optionally starting with `*.`. */
function isBindDomain(domain: string): boolean {
  const name = domain.startsWith('*.') ? domain.slice(2) : domain;
  return name.length <= 253 && name.split('.').every((label) => LABEL.test(label));
}

/** Checks and normalizes (lower-cases) an acl; an invalid rule is a 400 naming it. */
export function parseAcl(rules: readonly string[], field = 'acl'): string[] {
  return rules.map((rule, index) => {
    const normalized = rule.trim().toLowerCase();
    if (normalized === '*') return normalized;
    const domain = normalized.startsWith('bind:') ? normalized.slice(5) : undefined;
    if (domain === undefined || !isBindDomain(domain)) {
      throw new AppError(
        'ERR_INVALID_FIELD',
        `"${field}[${index}]": "${rule}" is not a rule; write bind:<domain>, bind:*.<domain> or *`,
        { field: `${field}[${index}]` },
      );
    }
    return `bind:${domain}`;
  });
}

/** True when `acl` lets its holder bind `hostname` (lower-case). */
export function aclAllows(acl: readonly string[], hostname: string): boolean {
  if (acl.length === 0) return true;
  return acl.some((rule) => {
    if (rule === '*') return true;
    const domain = rule.slice('bind:'.length);
    if (!domain.startsWith('*.')) return hostname === domain;
    return hostname.endsWith(domain.slice(1)) && hostname.length > domain.length - 1;
  });
}
