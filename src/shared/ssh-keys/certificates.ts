import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { AppError } from '../errors.ts';
import type { AuthoritySigner } from './authorities.ts';
import type { SshPublicKey } from './public-keys.ts';
import { string, uint32, uint64 } from './wire.ts';

// OpenSSH certificates (PROTOCOL.certkeys), written here because no kept library signs them
// with rsa-sha2-512 (sshpk signs RSA certificates with SHA-1, which OpenSSH refuses): the
// subject's key fields, a serial, the kind, a key id, principals, validity, critical options and
// extensions, the authority's key, and its signature over all of that. Request checks follow
// ngrok's API: validity defaults (from now; user certificates last 24 hours, host certificates a
// year), the two critical options OpenSSH defines, and user extensions defaulting to
// `permit-pty` and `permit-user-rc`.

/** User certificates log people in; host certificates vouch for a server. */
export type CertificateKind = 'user' | 'host';

/** Everything a certificate says, checked. */
export interface CertificateContents {
  kind: CertificateKind;
  subject: SshPublicKey;
  /** Shown by `ssh-keygen -L` and logged by sshd: the certificate's object id. */
  keyId: string;
  principals: string[];
  validAfter: Date;
  validUntil: Date;
  criticalOptions: Record<string, string>;
  extensions: Record<string, string>;
}

const KIND_CODE: Record<CertificateKind, number> = { user: 1, host: 2 };
/** How long a certificate lasts when `valid_until` is not given (ngrok's defaults). */
export const DEFAULT_LIFETIME_MS: Record<CertificateKind, number> = {
  user: 24 * 3600 * 1000,
  host: 365 * 24 * 3600 * 1000,
};
/** The user extensions when none are given. */
export const DEFAULT_EXTENSIONS: Readonly<Record<string, string>> = {
  'permit-pty': '',
  'permit-user-rc': '',
};
/** The only critical options OpenSSH defines; sshd refuses certificates with any other. */
export const CRITICAL_OPTIONS = ['force-command', 'source-address'] as const;
const MAX_PRINCIPALS = 256;
const MAX_NAME_BYTES = 255;
const MAX_VALUE_BYTES = 4096;
/** 9999-12-31T23:59:59Z: the end of what RFC 3339 can write. */
const MAX_TIME_MS = 253402300799000;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

function invalid(field: string, message: string): AppError {
  return new AppError('ERR_INVALID_FIELD', message, { field });
}

/** A whole-second instant from an RFC 3339 field, or `fallback` when it is absent. */
export function readTime(raw: unknown, field: string, fallback: Date): Date {
  if (raw === undefined || raw === null) return fallback;
  const ms = typeof raw === 'string' && RFC3339.test(raw) ? Date.parse(raw) : Number.NaN;
  if (!(ms >= 0 && ms <= MAX_TIME_MS)) {
    throw invalid(field, `"${field}" must be an RFC 3339 time, like 2030-01-31T12:00:00Z`);
  }
  return new Date(Math.floor(ms / 1000) * 1000);
}

/** RFC 3339 without fractions, as certificates hold whole seconds. */
export function formatTime(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** The validity a request asks for, defaulted and checked. */
export function readValidity(
  body: { valid_after?: unknown; valid_until?: unknown },
  kind: CertificateKind,
  now = new Date(),
): { validAfter: Date; validUntil: Date } {
  const validAfter = readTime(
    body.valid_after,
    'valid_after',
    new Date(Math.floor(now.getTime() / 1000) * 1000),
  );
  const fallback = new Date(
    Math.min(validAfter.getTime() + DEFAULT_LIFETIME_MS[kind], MAX_TIME_MS),
  );
  const validUntil = readTime(body.valid_until, 'valid_until', fallback);
  if (validUntil <= validAfter)
    throw invalid('valid_until', '"valid_until" must be later than "valid_after"');
  return { validAfter, validUntil };
}

function checkName(value: unknown, field: string, what: string): string {
  if (
    typeof value !== 'string' ||
    value === '' ||
    Buffer.byteLength(value) > MAX_NAME_BYTES ||
    /[\s,\p{Cc}]/u.test(value)
  ) {
    throw invalid(
      field,
      `"${field}": each ${what} must be 1-${MAX_NAME_BYTES} bytes without spaces, commas or control characters`,
    );
  }
  return value;
}

/** The principals list (usernames or host names); empty means any, as ngrok warns. */
export function readPrincipals(raw: unknown): string[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw) || raw.length > MAX_PRINCIPALS) {
    throw invalid('principals', `"principals" must be a list of at most ${MAX_PRINCIPALS} names`);
  }
  return [...new Set(raw.map((name) => checkName(name, 'principals', 'principal')))];
}

/** A string → string map, its names checked. */
function readMap(raw: unknown, field: string): Record<string, string> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw invalid(field, `"${field}" must be an object of string values`);
  }
  const map: Record<string, string> = {};
  for (const [name, value] of Object.entries(raw)) {
    checkName(name, field, 'name');
    if (typeof value !== 'string' || Buffer.byteLength(value) > MAX_VALUE_BYTES) {
      throw invalid(
        field,
        `"${field}.${name}" must be a string of at most ${MAX_VALUE_BYTES} bytes`,
      );
    }
    map[name] = value;
  }
  return map;
}

/** `source-address`: comma-separated addresses or CIDR ranges, as sshd parses it. */
function checkSourceAddress(value: string): void {
  for (const entry of value.split(',')) {
    const [address, bits, extra] = entry.split('/');
    const family = isIP(address);
    const max = family === 6 ? 128 : 32;
    const ok =
      family !== 0 &&
      extra === undefined &&
      (bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= max));
    if (!ok) {
      throw invalid(
        'critical_options',
        `"critical_options.source-address" entry "${entry.slice(0, 60)}" is not an address or CIDR range`,
      );
    }
  }
}

/** A user certificate's critical options: only the two OpenSSH defines, each well formed. */
export function readCriticalOptions(raw: unknown): Record<string, string> {
  if (raw === undefined || raw === null) return {};
  const options = readMap(raw, 'critical_options');
  for (const [name, value] of Object.entries(options)) {
    if (!(CRITICAL_OPTIONS as readonly string[]).includes(name)) {
      throw invalid(
        'critical_options',
        `"critical_options" may hold only ${CRITICAL_OPTIONS.join(' and ')}, not "${name}"`,
      );
    }
    if (value === '')
      throw invalid('critical_options', `"critical_options.${name}" must not be empty`);
    if (name === 'source-address') checkSourceAddress(value);
  }
  return options;
}

/** A user certificate's extensions; absent means `permit-pty` and `permit-user-rc`. */
export function readExtensions(raw: unknown): Record<string, string> {
  if (raw === undefined || raw === null) return { ...DEFAULT_EXTENSIONS };
  return readMap(raw, 'extensions');
}

/** Options and extensions: sorted by name; a non-empty value is itself a wire string. */
function encodeMap(map: Record<string, string>): Buffer {
  const names = Object.keys(map).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  return Buffer.concat(
    names.flatMap((name) => [string(name), string(map[name] === '' ? '' : string(map[name]))]),
  );
}

/** The certificate in authorized_keys format: `<type>-cert-v01@openssh.com <base64> <key id>`. */
export function signCertificate(contents: CertificateContents, signer: AuthoritySigner): string {
  const { subject } = contents;
  const certType = `${subject.algorithm}-cert-v01@openssh.com`;
  const keyFields = subject.blob.subarray(4 + subject.blob.readUInt32BE(0));
  const toSign = Buffer.concat([
    string(certType),
    string(randomBytes(32)),
    keyFields,
    uint64(randomBytes(8).readBigUInt64BE()),
    uint32(KIND_CODE[contents.kind]),
    string(contents.keyId),
    string(Buffer.concat(contents.principals.map((name) => string(name)))),
    uint64(BigInt(Math.floor(contents.validAfter.getTime() / 1000))),
    uint64(BigInt(Math.floor(contents.validUntil.getTime() / 1000))),
    string(encodeMap(contents.criticalOptions)),
    string(encodeMap(contents.extensions)),
    string(''),
    string(signer.publicBlob),
  ]);
  const blob = Buffer.concat([toSign, string(signer.sign(toSign))]);
  return `${certType} ${blob.toString('base64')} ${contents.keyId}`;
}
