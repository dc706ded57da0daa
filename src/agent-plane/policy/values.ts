import { appendValue, type HeaderMap, type PolicyValues } from './exchange.ts';
import { userAgentValues } from './user-agent.ts';

// The variables of one connection or request (variables.ts declares their shape), filled from
// what the edge saw. The string groups (`req.url`, `req.user_agent`, `req.content_type`) carry
// their text under `_string`.

/** The connection and endpoint facts every phase reads. */
export interface ConnectionFacts {
  clientIp: string;
  clientPort: number;
  serverIp: string;
  serverPort: number;
  startMs: number;
  tls?: { version: string; cipherSuite: string };
  endpoint: { id: string; url: string; protocol: 'http' | 'https' | 'tcp' };
}

/** The most values each memo keeps; when full it forgets all (bounded whatever the traffic). */
const MEMO_SIZE = 1024;

/**
 * A memo of a pure function of two strings for the values of requests: the same endpoint, URL
 * or User-Agent repeats from request to request. Keyed by the strings themselves (no joined key
 * to hash per request). Its results are shared, so frozen.
 */
function memo<T extends object>(compute: (a: string, b: string) => T): (a: string, b: string) => T {
  const cache = new Map<string, Map<string, T>>();
  let size = 0;
  return (a, b) => {
    let inner = cache.get(a);
    let value = inner?.get(b);
    if (value === undefined) {
      if (size >= MEMO_SIZE) {
        cache.clear();
        size = 0;
        inner = undefined;
      }
      if (inner === undefined) {
        inner = new Map();
        cache.set(a, inner);
      }
      value = deepFreeze(compute(a, b));
      inner.set(b, value);
      size++;
    }
    return value;
  };
}

function deepFreeze<T extends object>(o: T): T {
  for (const v of Object.values(o)) if (v !== null && typeof v === 'object') deepFreeze(v);
  return Object.freeze(o);
}

/** An ISO timestamp of `ms`, the last one kept: many requests share a millisecond. */
function isoClock(): (ms: number) => string {
  let lastMs = Number.NaN;
  let lastIso = '';
  return (ms) => {
    if (ms !== lastMs) {
      lastMs = ms;
      lastIso = new Date(ms).toISOString();
    }
    return lastIso;
  };
}

const nowIso = isoClock();
const startIso = isoClock();

const endpointMemo = memo((url: string, id: string) =>
  computeEndpointValues({
    id,
    url,
    protocol: new URL(url).protocol === 'https:' ? 'https' : 'http',
  }),
);

/** The `endpoint.*` variables of an endpoint (shared and frozen, but for TCP's). */
export function endpointValues(e: ConnectionFacts['endpoint']) {
  const values = endpointMemo(e.url, e.id);
  return values.protocol === e.protocol ? values : computeEndpointValues(e);
}

function computeEndpointValues(e: ConnectionFacts['endpoint']) {
  const url = new URL(e.url);
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  return {
    id: e.id,
    url: e.url,
    protocol: e.protocol,
    host: url.hostname,
    port,
    addr: `${url.hostname}:${port}`,
  };
}

/** The variables of a connection before any request (on_tcp_connect). */
export function connectionValues(facts: ConnectionFacts): PolicyValues {
  return {
    conn: {
      client_ip: facts.clientIp,
      client_port: facts.clientPort,
      server_ip: facts.serverIp,
      server_port: facts.serverPort,
      server_region: '',
      bytes_in: 0,
      bytes_out: 0,
      ts: { start: startIso(facts.startMs) },
      tls: facts.tls ? { version: facts.tls.version, cipher_suite: facts.tls.cipherSuite } : {},
    },
    endpoint: endpointValues(facts.endpoint),
    time: { now: nowIso(Date.now()) },
    actions: { ngrok: {} },
    vars: {},
  };
}

/** Node's header dict as lower-case names to lists of values. */
export function headerMap(headers: NodeJS.Dict<string | string[] | number>): HeaderMap {
  const out: HeaderMap = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    out[name.toLowerCase()] = Array.isArray(value) ? value.map(String) : [String(value)];
  }
  return out;
}

const NO_CONTENT_TYPE = Object.freeze({ _string: '', raw: '', parameters: Object.freeze({}) });

function contentType(raw: string) {
  if (raw === '') return NO_CONTENT_TYPE;
  const [type, ...params] = raw.split(';');
  const parameters: Record<string, string> = {};
  for (const p of params) {
    const eq = p.indexOf('=');
    if (eq > 0)
      parameters[p.slice(0, eq).trim().toLowerCase()] = p
        .slice(eq + 1)
        .trim()
        .replace(/^"|"$/g, '');
  }
  return { _string: type.trim().toLowerCase(), raw, parameters };
}

const urlMemos = {
  http: memo((host, target) => computeUrlValues('http', host, target)),
  https: memo((host, target) => computeUrlValues('https', host, target)),
};

/** `req.url.*` of a target on `scheme://host` (shared, frozen). */
export function urlValues(scheme: string, host: string, target: string) {
  if (scheme === 'http' || scheme === 'https') return urlMemos[scheme](host, target);
  return computeUrlValues(scheme, host, target);
}

function computeUrlValues(scheme: string, host: string, target: string) {
  const url = new URL(target, `${scheme}://${host}`);
  const query_params: Record<string, string[]> = {};
  for (const [k, v] of url.searchParams) appendValue(query_params, k, v);
  const text = `${url.protocol}//${url.host}${url.pathname}${url.search}`;
  return {
    _string: text,
    raw: `${scheme}://${host}${target}`,
    scheme,
    host: url.hostname,
    authority: url.host,
    port: url.port === '' ? 0 : Number(url.port),
    path: url.pathname,
    raw_path: target.split('?')[0],
    query: url.search.slice(1),
    query_params,
    uri: `${url.pathname}${url.search}`,
    user_password: '',
  };
}

const userAgentMemo = memo((ua: string) => userAgentValues(ua));

const NO_ENCODINGS: readonly string[] = Object.freeze([]);

/** A Content-Encoding field's codings, in order. */
function encodings(values: string[] | undefined): string[] {
  if (values === undefined) return NO_ENCODINGS as string[];
  return values.flatMap((v) => v.split(',').map((s) => s.trim()));
}

/** What the edge read of a request's head. */
export interface RequestFacts {
  method: string;
  scheme: 'http' | 'https';
  host: string;
  target: string;
  httpVersion: string;
  headers: HeaderMap;
}

/** Adds `req` to a connection's variables. */
export function withRequest(values: PolicyValues, req: RequestFacts): PolicyValues {
  const header = (name: string) => req.headers[name]?.[0] ?? '';
  const length = header('content-length');
  values.req = {
    method: req.method,
    version: `HTTP/${req.httpVersion}`,
    host: req.host,
    headers: req.headers,
    location: header('location'),
    content_length: length === '' ? 0 : Number(length) || 0,
    content_encoding: encodings(req.headers['content-encoding']),
    content_type: contentType(header('content-type')),
    url: urlValues(req.scheme, req.host, req.target),
    user_agent: userAgentMemo(header('user-agent'), ''),
    ts: { header_received: nowIso(Date.now()) },
  };
  values.time = { now: nowIso(Date.now()) };
  return values;
}

/** Adds `res` (the upstream's answer head) to a request's variables. */
export function withResponse(
  values: PolicyValues,
  res: { statusCode: number; headers: HeaderMap },
): PolicyValues {
  const header = (name: string) => res.headers[name]?.[0] ?? '';
  const length = header('content-length');
  values.res = {
    status_code: res.statusCode,
    headers: res.headers,
    location: header('location'),
    content_length: length === '' ? 0 : Number(length) || 0,
    content_encoding: encodings(res.headers['content-encoding']),
    content_type: contentType(header('content-type')),
  };
  return values;
}
