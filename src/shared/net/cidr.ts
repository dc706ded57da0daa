import ipaddr from 'ipaddr.js';
import { AppError } from '../errors.ts';

// CIDR ranges of IP policy rules and the addresses they are matched against, with ipaddr.js doing
// the bit work. Parsing is strict on purpose: a rule is a security boundary, so "10.1" (classful),
// "010.0.0.1" (octal to some parsers), zone ids and host bits are refused rather than guessed.

/** An IPv4 or IPv6 address, as ipaddr.js holds it. */
export type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** A parsed range: its canonical text and what `contains` matches against. */
export interface Cidr {
  /** Canonical form: dotted quad or RFC 5952 text, then `/prefix`. */
  text: string;
  kind: 'ipv4' | 'ipv6';
  network: Address;
  prefix: number;
}

const CIDR_SHAPE = /^([^/]+)(?:\/(0|[1-9][0-9]{0,2}))?$/;

function invalid(raw: string, why: string): AppError {
  return new AppError('ERR_INVALID_FIELD', `"cidr" ${JSON.stringify(raw)} ${why}`, {
    field: 'cidr',
  });
}

// `::a.b.c.d`: deprecated IPv4-compatible IPv6, which ipaddr.js would read as `::ffff:a.b.c.d`.
const IPV4_COMPATIBLE = /^::(\d+\.){3}\d+$/;

/**
 * A strictly written address (four-part decimal IPv4, or IPv6 without a zone and not in the
 * deprecated IPv4-compatible form), else undefined.
 */
function strictAddress(text: string): Address | undefined {
  if (text.includes(':')) {
    if (text.includes('%') || IPV4_COMPATIBLE.test(text) || !ipaddr.IPv6.isValid(text)) {
      return undefined;
    }
    return ipaddr.IPv6.parse(text);
  }
  return ipaddr.IPv4.isValidFourPartDecimal(text) ? ipaddr.IPv4.parse(text) : undefined;
}

/** IPv4-mapped IPv6 (`::ffff:a.b.c.d/p`, p ≥ 96) as the IPv4 range it means; others unchanged. */
function unmap(address: Address, prefix: number): [Address, number] {
  if (address.kind() === 'ipv6' && prefix >= 96) {
    const v6 = address as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) return [v6.toIPv4Address(), prefix - 96];
  }
  return [address, prefix];
}

function addressText(address: Address): string {
  return address.kind() === 'ipv6'
    ? (address as ipaddr.IPv6).toRFC5952String()
    : address.toString();
}

/** The first address of the range `address/prefix` (host bits cleared). */
function networkOf(address: Address, prefix: number): Address {
  const bytes = address.toByteArray();
  for (let i = 0; i < bytes.length; i++) {
    const keep = Math.max(0, Math.min(8, prefix - i * 8));
    bytes[i] &= (0xff << (8 - keep)) & 0xff;
  }
  return ipaddr.fromByteArray(bytes);
}

/**
 * Parses an IP policy rule's `cidr`: an IPv4 or IPv6 range, or a bare address (a /32 or /128).
 * Throws ERR_INVALID_FIELD when it is not one, or when host bits are set (the message gives the
 * network form, so a caller sees what was probably meant).
 */
export function parseCidr(raw: string): Cidr {
  const shape = CIDR_SHAPE.exec(raw);
  const parsed = shape ? strictAddress(shape[1]) : undefined;
  if (!shape || !parsed) {
    throw invalid(raw, 'is not an IP address or a range in CIDR notation (e.g. 203.0.113.0/24)');
  }
  const bits = parsed.kind() === 'ipv4' ? 32 : 128;
  const given = shape[2] === undefined ? bits : Number(shape[2]);
  if (given > bits) throw invalid(raw, `has a prefix longer than ${bits} bits`);
  const [address, prefix] = unmap(parsed, given);
  const network = networkOf(address, prefix);
  const text = `${addressText(network)}/${prefix}`;
  if (addressText(network) !== addressText(address)) {
    throw invalid(raw, `has host bits set; the network is ${text}`);
  }
  return { text, kind: network.kind(), network, prefix };
}

/** The canonical text of a rule's `cidr` (see parseCidr). */
export function normalizeCidr(raw: string): string {
  return parseCidr(raw).text;
}

/**
 * A caller's address as the socket reports it; IPv4-mapped IPv6 (`::ffff:127.0.0.2`, what a
 * dual-stack listener reports for IPv4 peers) becomes IPv4 so IPv4 rules match it. Undefined when
 * it is not an address (a Unix socket has none).
 */
export function parseCallerAddress(raw: string | undefined): Address | undefined {
  const address = raw === undefined ? undefined : strictAddress(raw.replace(/%.*$/, ''));
  return address ? unmap(address, 128)[0] : undefined;
}

/** True when `address` lies in `cidr`; an IPv4 address never lies in an IPv6 range, nor back. */
export function cidrContains(cidr: Cidr, address: Address): boolean {
  return address.kind() === cidr.kind && address.match(cidr.network, cidr.prefix);
}

/** The canonical text of an address, as messages and logs show it. */
export function formatAddress(address: Address): string {
  return addressText(address);
}
