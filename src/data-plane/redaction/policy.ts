// What a source's deliveries leave out of http_request_complete.v0 (docs/security.md#redacted,
// docs/decisions.md#redaction): end users' credentials, whatever edge sent the event. The key
// stays, the value becomes REDACTED, so a record still says that a credential was sent.

/** What a redacted header value list or query parameter value becomes. */
export const REDACTED = '[redacted]';

/** Headers that carry end users' credentials (RFC 9110 §11.6, RFC 6265), redacted by default. */
export const CREDENTIAL_HEADERS: readonly string[] = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
];

/**
 * Query parameters that carry tokens, redacted by default: RFC 6750 §2.3's access_token, the
 * other OAuth 2.0 / OIDC tokens and secrets (RFC 6749, OIDC Core), and AWS presigned URLs'
 * signature and session token. ngrok's docs name none of their own (jwt-validation refuses
 * tokens in the query); these are the names such URLs carry in practice.
 */
export const TOKEN_QUERY_PARAMS: readonly string[] = [
  'access_token',
  'id_token',
  'refresh_token',
  'client_secret',
  'x-amz-signature',
  'x-amz-security-token',
];

/** A header name a source may add: an RFC 9110 token, bounded. */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;
/** Header names one source may add. */
export const MAX_REDACT_HEADERS = 32;

/** Case-insensitive (ASCII) membership of a name, read from bytes or from a string. */
export interface NameSet {
  has(buf: Uint8Array, start: number, end: number): boolean;
  hasString(name: string): boolean;
}

/** One source's redaction: which header and query parameter values it replaces. */
export interface Redaction {
  headers: NameSet | null;
  queryParams: NameSet | null;
  /** Equal for equal redactions: a record is written once per field selection and key. */
  key: string;
}

// Only A-Z fold, as in `has`: String#toLowerCase would also fold U+212A (Kelvin) to `k`.
function asciiLower(name: string): string {
  return name.replace(/[A-Z]/g, (ch) => String.fromCharCode(ch.charCodeAt(0) | 0x20));
}

/** The names (lower-case ASCII) as a NameSet; null when there are none. */
function nameSet(names: readonly string[]): NameSet | null {
  if (names.length === 0) return null;
  const byLength: (Uint8Array[] | undefined)[] = [];
  for (const name of names) {
    const bytes = Uint8Array.from(name, (ch) => ch.charCodeAt(0));
    const same = byLength[bytes.length] ?? [];
    same.push(bytes);
    byLength[bytes.length] = same;
  }
  const lower = new Set(names);
  return {
    has(buf, start, end) {
      const candidates = byLength[end - start];
      if (candidates === undefined) return false;
      for (const name of candidates) {
        let i = 0;
        for (; i < name.length; i++) {
          let b = buf[start + i];
          if (b >= 0x41 && b <= 0x5a) b |= 0x20;
          if (b !== name[i]) break;
        }
        if (i === name.length) return true;
      }
      return false;
    },
    hasString: (name) => byLength[name.length] !== undefined && lower.has(asciiLower(name)),
  };
}

/** What a source says about redaction (its stored fields; omitted: the defaults). */
export interface RedactionSettings {
  /** Header names redacted on top of the credential headers. */
  redactHeaders?: readonly string[];
  /** true: keep CREDENTIAL_HEADERS and TOKEN_QUERY_PARAMS in clear (redactHeaders still apply). */
  keepCredentials?: boolean;
}

/** A source's redaction from its settings. */
export function redactionOf(settings: RedactionSettings): Redaction {
  const keep = settings.keepCredentials === true;
  const named = (settings.redactHeaders ?? []).map(asciiLower);
  const headers = [...new Set([...(keep ? [] : CREDENTIAL_HEADERS), ...named])].sort();
  const queryParams = keep ? [] : [...TOKEN_QUERY_PARAMS];
  return {
    headers: nameSet(headers),
    queryParams: nameSet(queryParams),
    key: `${headers.join(',')};${queryParams.join(',')}`,
  };
}

/** The redaction of a source that says nothing: credentials and token parameters redacted. */
export const DEFAULT_REDACTION: Redaction = redactionOf({});

/** Nothing redacted: for tests that compare the codecs themselves. */
export const NO_REDACTION: Redaction = { headers: null, queryParams: null, key: ';' };
