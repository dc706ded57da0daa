import { type NameSet, REDACTED } from './policy.ts';

// Token query parameters in http.request.url.query and .raw. Names are compared as sent
// (case-insensitively, not percent-decoded: a browser or client library writes `access_token`
// as it is). The writer asks `queryHasName` of the wire bytes first, so a URL without such a
// parameter (nearly all of them) is copied as it is and never decoded here.

const AMPERSAND = 0x26;
const EQUALS = 0x3d;
const QUESTION = 0x3f;
const HASH = 0x23;

/**
 * Whether the query in bytes [start, end) names one of `names` with a value: `raw` is a whole
 * URL (its query between the first `?` and a `#`), otherwise the query itself.
 */
export function queryHasName(
  names: NameSet,
  buf: Uint8Array,
  start: number,
  end: number,
  raw: boolean,
): boolean {
  let pos = start;
  if (raw) {
    while (pos < end && buf[pos] !== QUESTION) pos++;
    if (pos === end) return false;
    pos++;
  }
  let from = pos;
  let named = false; // the current parameter's `=` was seen
  for (; pos < end; pos++) {
    const b = buf[pos];
    if (b === AMPERSAND) {
      from = pos + 1;
      named = false;
    } else if (b === HASH && raw) {
      return false;
    } else if (b === EQUALS && !named) {
      if (names.has(buf, from, pos)) return true;
      named = true;
    }
  }
  return false;
}

/** A query string (no `?`) with the values of `names` replaced by REDACTED. */
export function redactQuery(query: string, names: NameSet): string {
  if (query === '') return query;
  return query
    .split('&')
    .map((param) => {
      const eq = param.indexOf('=');
      return eq > 0 && names.hasString(param.slice(0, eq))
        ? `${param.slice(0, eq + 1)}${REDACTED}`
        : param;
    })
    .join('&');
}

/** A URL with the values of `names` in its query replaced by REDACTED. */
export function redactUrl(url: string, names: NameSet): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const hash = url.indexOf('#', q);
  const end = hash < 0 ? url.length : hash;
  return url.slice(0, q + 1) + redactQuery(url.slice(q + 1, end), names) + url.slice(end);
}
