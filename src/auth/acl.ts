import { AppError } from '../errors.ts';

// The `acl` of a tunnel or SSH credential (SPEC.md, Authentication 4): rules `bind:<domain>`,
// the domain optionally starting with a `*.` wildcard for every domain under a suffix, or the
// rule `*` that permits everything. The agent issue enforces them with `aclPermits`.

const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
/** A DNS name's most bytes in text form. */
const DNS_NAME_BYTES = 253;
/** Rules per credential: enough for any real list, small enough to scan on every bind. */
export const ACL_MAX_RULES = 100;

function invalid(index: number, rule: string, why: string): AppError {
  return new AppError(
    'ERR_INVALID_FIELD',
    `"acl" rule ${index} ${JSON.stringify(rule.slice(0, 300))} is not valid: ${why}`,
    { field: 'acl', index },
  );
}

function domainProblem(domain: string): string | undefined {
  if (domain.length > DNS_NAME_BYTES) return `the domain is longer than ${DNS_NAME_BYTES} bytes`;
  const labels = domain.split('.');
  if (labels.length < 2) return 'the domain needs at least two labels, like example.com';
  const bad = labels.find((label) => !LABEL.test(label));
  if (bad !== undefined) {
    return `label "${bad.slice(0, 63)}" may hold only 1-63 letters, digits and inner hyphens`;
  }
  return undefined;
}

/** One rule, lower-cased, or an error saying what is wrong with it. */
function normalizeRule(raw: unknown, index: number): string {
  if (typeof raw !== 'string') {
    throw new AppError('ERR_INVALID_FIELD', `"acl" rule ${index} must be a string`, {
      field: 'acl',
      index,
    });
  }
  const rule = raw.trim().toLowerCase();
  if (rule === '*') return rule;
  if (!rule.startsWith('bind:')) throw invalid(index, raw, 'rules are "bind:<domain>" or "*"');
  const target = rule.slice('bind:'.length);
  const domain = target.startsWith('*.') ? target.slice(2) : target;
  if (domain.includes('*'))
    throw invalid(index, raw, 'a wildcard may only lead: "bind:*.example.com"');
  const problem = domainProblem(domain);
  if (problem !== undefined) throw invalid(index, raw, problem);
  return `bind:${target}`;
}

/** The checked, normalized rule list of a request's `acl` (undefined: no restriction). */
export function normalizeAcl(raw: unknown): string[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) {
    throw new AppError('ERR_INVALID_FIELD', '"acl" must be a list of rules', { field: 'acl' });
  }
  if (raw.length > ACL_MAX_RULES) {
    throw new AppError('ERR_INVALID_FIELD', `"acl" may hold at most ${ACL_MAX_RULES} rules`, {
      field: 'acl',
    });
  }
  return [...new Set(raw.map(normalizeRule))];
}

/** Whether an acl lets a credential bind `domain` (empty acl or `*`: everything). */
export function aclPermits(acl: readonly string[], domain: string): boolean {
  if (acl.length === 0 || acl.includes('*')) return true;
  const name = domain.toLowerCase();
  return acl.some((rule) => {
    const target = rule.slice('bind:'.length);
    if (!target.startsWith('*.')) return target === name;
    return name.endsWith(target.slice(1)) || name === target;
  });
}
