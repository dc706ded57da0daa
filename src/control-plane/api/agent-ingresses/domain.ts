import { AppError } from '../../../shared/errors.ts';

const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

function invalid(domain: string, why: string): AppError {
  return new AppError(
    'ERR_INVALID_DOMAIN',
    `"domain" ${JSON.stringify(domain)} is not valid: ${why}`,
    {
      field: 'domain',
    },
  );
}

/** The most bytes a DNS name may have in text form (RFC 1035: 255 on the wire). */
const DNS_NAME_BYTES = 253;

/** Rejects a domain whose longest region domain `<region>.<domain>` would not fit in DNS. */
function checkRegionDomains(raw: string, domain: string, regions: readonly string[]): void {
  const region = regions.reduce((a, b) => (b.length > a.length ? b : a), '');
  if (region === '') return;
  const bytes = region.length + 1 + domain.length;
  if (bytes > DNS_NAME_BYTES) {
    throw invalid(
      raw,
      `region domain ${region}.<domain> would be ${bytes} bytes; DNS names are at most ${DNS_NAME_BYTES}`,
    );
  }
}

/**
 * Lower-cases and checks a customer base domain (docs/decisions.md#domains): a DNS name of at most 253 bytes,
 * at least two labels of 1-63 letters, digits or inner hyphens, no wildcard, no trailing dot,
 * not an IP address, and short enough that `<region>.<domain>` fits in 253 bytes for every
 * configured region. Internationalized names must be sent in their xn-- (punycode) form.
 */
export function normalizeDomain(raw: string, regions: readonly string[]): string {
  const domain = raw.toLowerCase();
  if (domain === '') throw invalid(raw, 'it is empty');
  if (Buffer.byteLength(domain, 'utf8') > DNS_NAME_BYTES) {
    throw invalid(raw, `it is longer than ${DNS_NAME_BYTES} bytes`);
  }
  if (domain.endsWith('.')) throw invalid(raw, 'it must not end with a dot');
  if (domain.includes('*')) throw invalid(raw, 'wildcards are not allowed');
  if (/[^ -~]/.test(domain)) {
    throw invalid(raw, 'use the xn-- (punycode) form of internationalized names');
  }
  const labels = domain.split('.');
  if (labels.length < 2) throw invalid(raw, 'it needs at least two labels, like example.com');
  for (const label of labels) {
    if (label.length === 0) throw invalid(raw, 'it has an empty label');
    if (label.length > 63)
      throw invalid(raw, `label "${label.slice(0, 20)}…" is longer than 63 characters`);
    if (!LABEL.test(label)) {
      throw invalid(raw, `label "${label}" may hold only letters, digits and inner hyphens`);
    }
  }
  if (/^\d+$/.test(labels.at(-1)!)) throw invalid(raw, 'it is an IP address, not a domain name');
  checkRegionDomains(raw, domain, regions);
  return domain;
}
