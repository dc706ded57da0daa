import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import type { Environment } from '@marcbachmann/cel-js';
import { cidrContains, parseCallerAddress, parseCidr } from '../../shared/net/cidr.ts';

// The macros of ngrok's Traffic Policy (ngrok docs: traffic-policy/macros) that people use in
// expressions, registered on the policy's CEL environment. Those that read the request or the
// response (hasReqHeader, getQueryParam, …) read the values of the evaluation under way, which
// `withValues` sets: cel-js passes a function its arguments only, and evaluation is synchronous.
// Namespaced ones (`base64.encode`) are methods of a namespace variable, as cel-js has no
// qualified function names.

/** The values an evaluation reads (exchange.ts's shape). */
type Values = {
  req?: { headers?: Record<string, string[]>; url?: { query_params?: Record<string, string[]> } };
  res?: { headers?: Record<string, string[]> };
};

let current: Values | undefined;

/** Runs `fn(values, arg)` (an evaluation) with `values` as what the request macros read. */
export function withValues<T, A = undefined>(
  values: unknown,
  fn: (values: unknown, arg: A) => T,
  arg?: A,
): T {
  const previous = current;
  current = values as Values;
  try {
    return fn(values, arg as A);
  } finally {
    current = previous;
  }
}

const header = (map: Record<string, string[]> | undefined, name: string) =>
  map?.[name.toLowerCase()] ?? [];

function inCidrRange(ip: string, cidr: string): boolean {
  const address = parseCallerAddress(ip);
  if (address === undefined) return false;
  return cidrContains(parseCidr(cidr), address);
}

const PRIVATE_RANGES = new Set([
  'private',
  'loopback',
  'linkLocal',
  'uniqueLocal',
  'carrierGradeNat',
]);

function isPrivateIp(ip: string): boolean {
  const address = parseCallerAddress(ip);
  return address !== undefined && PRIVATE_RANGES.has(address.range());
}

function hash(algorithm: string) {
  return (_ns: unknown, s: string) => createHash(algorithm).update(s).digest('hex');
}

function isUrl(s: string): boolean {
  try {
    const url = new URL(s);
    return url.protocol !== '' && url.host !== '';
  } catch {
    return false;
  }
}

function isJson(s: string): boolean {
  try {
    JSON.parse(s);
    return true;
  } catch {
    return false;
  }
}

/** JSON text → CEL values (integers as int, as CEL's JSON conversion gives doubles otherwise). */
export function toCel(v: unknown): unknown {
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : v;
  if (Array.isArray(v)) return v.map(toCel);
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, toCel(x)]));
  }
  return v;
}

/** CEL values → JSON (int as a number when it fits). */
export function fromCel(v: unknown): unknown {
  if (typeof v === 'bigint') return Number.isSafeInteger(Number(v)) ? Number(v) : String(v);
  if (v instanceof Date) return v.toISOString();
  if (v instanceof Uint8Array) return Buffer.from(v).toString('base64');
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [String(k), fromCel(x)]));
  if (Array.isArray(v)) return v.map(fromCel);
  if (v !== null && typeof v === 'object') {
    const plain = v as { valueOf(): unknown };
    if (plain.valueOf() !== v) return fromCel(plain.valueOf());
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fromCel(x)]));
  }
  return v;
}

function cookie(raw: string[] | undefined, name: string): string | undefined {
  for (const line of raw ?? []) {
    for (const part of line.split(';')) {
      const eq = part.indexOf('=');
      if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
    }
  }
  return undefined;
}

/** A namespace (`base64`, `hash`, …): a type with no fields whose methods are the macros. */
function namespace(env: Environment, name: string, typeName: string): object {
  const ns = new (class {})();
  env.registerType(typeName, { ctor: ns.constructor as new () => object, fields: {} });
  env.registerVariable(name, typeName);
  return ns;
}

/** Registers the macros on the policy environment; the namespace values to bind. */
export function registerMacros(env: Environment): Record<string, unknown> {
  env.registerFunction('inCidrRange(string, string): bool', inCidrRange);
  env.registerFunction('inCidrRanges(string, list<string>): bool', (ip: string, cidrs: string[]) =>
    cidrs.some((c) => inCidrRange(ip, c)),
  );
  env.registerFunction('string.isPrivateIp(): bool', isPrivateIp);
  env.registerFunction(
    'hasReqHeader(string): bool',
    (n: string) => header(current?.req?.headers, n).length > 0,
  );
  env.registerFunction('getReqHeader(string): list<string>', (n: string) =>
    header(current?.req?.headers, n),
  );
  env.registerFunction(
    'hasResHeader(string): bool',
    (n: string) => header(current?.res?.headers, n).length > 0,
  );
  env.registerFunction('getResHeader(string): list<string>', (n: string) =>
    header(current?.res?.headers, n),
  );
  const params = () => current?.req?.url?.query_params ?? {};
  env.registerFunction(
    'hasQueryParam(string): bool',
    (n: string) => (params()[n] ?? []).length > 0,
  );
  env.registerFunction('getQueryParam(string): list<string>', (n: string) => params()[n] ?? []);
  env.registerFunction(
    'hasReqCookie(string): bool',
    (n: string) => cookie(current?.req?.headers?.cookie, n) !== undefined,
  );
  env.registerFunction('getReqCookie(string): map<string, string>', (n: string) => {
    const value = cookie(current?.req?.headers?.cookie, n);
    return value === undefined ? {} : { name: n, value };
  });
  env.registerFunction('string.lower(): string', (s: string) => s.toLowerCase());
  env.registerFunction('string.upper(): string', (s: string) => s.toUpperCase());
  env.registerFunction(
    'string.replace(string, string): string',
    (s: string, a: string, b: string) => s.replaceAll(a, b),
  );
  env.registerFunction('string.charAt(int): string', (s: string, i: bigint) => s.charAt(Number(i)));
  env.registerFunction('string.reverse(): string', (s: string) => [...s].reverse().join(''));
  env.registerFunction('string.encodeBase64(): string', (s: string) =>
    Buffer.from(s).toString('base64'),
  );
  env.registerFunction('string.decodeBase64(): string', (s: string) =>
    Buffer.from(s, 'base64').toString(),
  );
  env.registerFunction('string.escapeUrl(): string', (s: string) => encodeURIComponent(s));
  env.registerFunction('string.unescapeUrl(): string', (s: string) => decodeURIComponent(s));
  env.registerFunction('string.isJson(): bool', isJson);
  env.registerFunction('string.isURL(): bool', isUrl);
  env.registerFunction('string.decodeJson(): dyn', (s: string) => toCel(JSON.parse(s)));
  for (const algorithm of ['md5', 'sha1', 'sha256', 'sha512']) {
    env.registerFunction(`string.${algorithm}(): string`, (s: string) =>
      createHash(algorithm).update(s).digest('hex'),
    );
  }
  env.registerFunction('string.crc32(): string', (s: string) => crc32(s).toString(16));
  const base64 = namespace(env, 'base64', 'Base64Namespace');
  env.registerFunction('Base64Namespace.encode(bytes): string', (_: unknown, b: Uint8Array) =>
    Buffer.from(b).toString('base64'),
  );
  env.registerFunction(
    'Base64Namespace.decode(string): bytes',
    (_: unknown, s: string) => new Uint8Array(Buffer.from(s, 'base64')),
  );
  const hashes = namespace(env, 'hash', 'HashNamespace');
  for (const algorithm of ['md5', 'sha1', 'sha256', 'sha512']) {
    env.registerFunction(`HashNamespace.${algorithm}(string): string`, hash(algorithm));
  }
  env.registerFunction('HashNamespace.crc32(string): string', (_: unknown, s: string) =>
    crc32(s).toString(16),
  );
  const url = namespace(env, 'url', 'UrlNamespace');
  env.registerFunction('UrlNamespace.escape(string): string', (_: unknown, s: string) =>
    encodeURIComponent(s),
  );
  env.registerFunction('UrlNamespace.unescape(string): string', (_: unknown, s: string) =>
    decodeURIComponent(s),
  );
  const json = namespace(env, 'json', 'JsonNamespace');
  env.registerFunction('JsonNamespace.encode(dyn): string', (_: unknown, v: unknown) =>
    JSON.stringify(fromCel(v)),
  );
  env.registerFunction('JsonNamespace.decode(string): dyn', (_: unknown, s: string) =>
    toCel(JSON.parse(s)),
  );
  const basicAuth = namespace(env, 'basic_auth', 'BasicAuthNamespace');
  env.registerFunction(
    'BasicAuthNamespace.encode(string, string): string',
    (_: unknown, u: string, p: string) => Buffer.from(`${u}:${p}`).toString('base64'),
  );
  const strings = namespace(env, 'strings', 'StringsNamespace');
  env.registerFunction('StringsNamespace.quote(string): string', (_: unknown, s: string) =>
    JSON.stringify(s),
  );
  return { base64, hash: hashes, url, json, basic_auth: basicAuth, strings };
}

/** The macros, by name, for the docs and tests. */
export const MACROS = Object.freeze([
  'inCidrRange',
  'inCidrRanges',
  'string.isPrivateIp',
  'hasReqHeader',
  'getReqHeader',
  'hasResHeader',
  'getResHeader',
  'hasQueryParam',
  'getQueryParam',
  'hasReqCookie',
  'getReqCookie',
  'string.lower',
  'string.upper',
  'string.replace',
  'string.charAt',
  'string.reverse',
  'string.encodeBase64',
  'string.decodeBase64',
  'string.escapeUrl',
  'string.unescapeUrl',
  'string.isJson',
  'string.isURL',
  'string.decodeJson',
  'string.md5',
  'string.sha1',
  'string.sha256',
  'string.sha512',
  'string.crc32',
  'base64.encode',
  'base64.decode',
  'hash.md5',
  'hash.sha1',
  'hash.sha256',
  'hash.sha512',
  'hash.crc32',
  'url.escape',
  'url.unescape',
  'json.encode',
  'json.decode',
  'basic_auth.encode',
  'strings.quote',
]);
