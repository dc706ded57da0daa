import fc from 'fast-check';
import { expect } from 'vitest';
import type { Service } from '../../src/service.ts';
import { TEST_BOOTSTRAP_KEY } from '../helpers/service.ts';

// Shared pieces of the property-based bad-input tests: a raw HTTP client (bodies as bytes, so
// invalid UTF-8 and hand-written JSON reach the server as they are), the DESIGN.md §4 error-body
// check, row counts for "a 4xx leaves nothing behind", and generators of hostile JSON values.

export { fuzzParams } from '../helpers/fuzz.ts';

/** The env every fuzzed service gets: no rate limit in the way of a few thousand requests. */
export const FUZZ_ENV = {
  RATE_LIMIT_PER_SECOND: '1000000',
  RATE_LIMIT_BURST: '1000000',
};

/** How long one request may take before the test calls it a hang. */
export const REQUEST_TIMEOUT_MS = 20_000;

/** A raw answer: status, content type, text, and the JSON body when the text is JSON. */
export interface RawResponse {
  status: number;
  contentType: string;
  text: string;
  json: any;
}

/**
 * Sends every traffic event of the bootstrap key's account to a new file destination at `path`
 * (inside the account's directory), and waits until the pipeline routes by it.
 */
export async function routeTrafficToFile(service: Service, path: string): Promise<void> {
  const destination = await rawRequest(
    service.url,
    'POST',
    '/event_destinations',
    JSON.stringify({ target: { file: { path } } }),
  );
  expect(destination.status, destination.text).toBe(201);
  const subscription = await rawRequest(
    service.url,
    'POST',
    '/event_subscriptions',
    JSON.stringify({
      sources: [{ type: 'http_request_complete.v0' }, { type: 'tcp_connection_closed.v0' }],
      destination_ids: [destination.json.id],
    }),
  );
  expect(subscription.status, subscription.text).toBe(201);
  await service.pipeline.reload();
}

/** Sends `body` exactly as given (string or bytes) with the bootstrap key unless told otherwise. */
export async function rawRequest(
  baseUrl: string,
  method: string,
  path: string,
  body?: string | Uint8Array,
  headers: Record<string, string> = {},
): Promise<RawResponse> {
  const init: RequestInit = {
    method,
    headers: {
      authorization: `Bearer ${TEST_BOOTSTRAP_KEY}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
  };
  if (body !== undefined) init.body = body as unknown as RequestInit['body'];
  // A request the service never answers is a failure of its own, named, not a test timeout.
  init.signal = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
  let response: Response;
  let text: string;
  try {
    response = await fetch(`${baseUrl}${path}`, init);
    text = await response.text();
  } catch (error) {
    const shown = typeof body === 'string' ? body.slice(0, 200) : `<${body?.length} bytes>`;
    throw new Error(`${method} ${path} ${JSON.stringify(shown)}: no answer (${error})`);
  }
  let json: any;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return {
    status: response.status,
    contentType: response.headers.get('content-type') ?? '',
    text,
    json,
  };
}

/** Text that gives away the server's internals: a stack frame, a source path, an engine error. */
// Linear on purpose: answers can echo a megabyte of input, and an unbounded `[\w/-]+` before
// `\.ts:` backtracked quadratically over a 1 MB run of letters (the test then hung).
const LEAKS =
  /\n\s+at |\bat [\w.<>]{1,100} \(|\.(?:ts|js|mjs|cjs):\d+|node_modules|SQLSTATE|syntax error at or near|invalid byte sequence|TypeError:|RangeError:|ReferenceError:/;

/**
 * The invariant of every REST answer to a client's mistake: never 5xx; a 4xx carries the DESIGN.md
 * §4 body (error_code, status_code equal to the HTTP status, msg, details.operation_id) and no
 * stack trace or engine message. `what` names the request in assertion messages.
 */
export function expectClientAnswer(response: RawResponse, what: string): void {
  const shown = `${what} → ${response.status} ${response.text.slice(0, 300)}`;
  expect(response.status, shown).toBeLessThan(500);
  if (response.status < 400) return;
  expect(response.contentType, shown).toMatch(/^application\/json/);
  const body = response.json ?? {};
  expect(String(body.error_code), shown).toMatch(/^ERR_[A-Z_]+$/);
  expect(body.status_code, shown).toBe(response.status);
  expect(typeof body.msg, shown).toBe('string');
  expect(String(body.details?.operation_id), shown).toMatch(/^op_[0-9a-z]{26}$/);
  expect(response.text, `${shown}: leaks internals`).not.toMatch(LEAKS);
}

/** Every table a REST change can write, counted in one statement. */
const TABLES = [
  'accounts',
  'api_keys',
  'agent_ingresses',
  'jobs',
  'audit_outbox',
  'event_destinations',
  'event_subscriptions',
  'event_sources',
  'event_subscription_destinations',
  'account_objects',
] as const;

export type RowCounts = Record<(typeof TABLES)[number], number>;

const COUNT_SQL = `SELECT ${TABLES.map((t) => `(SELECT count(*)::int FROM ${t}) AS ${t}`).join(', ')}`;

/** The number of rows in every table a REST change writes. */
export async function countRows(service: Service): Promise<RowCounts> {
  const result = await service.db.query<Record<string, number | string>>(COUNT_SQL);
  const row = result.rows[0];
  return Object.fromEntries(TABLES.map((t) => [t, Number(row[t])])) as RowCounts;
}

/** Asserts the service still answers its liveness probe. */
export async function expectAlive(service: Service): Promise<void> {
  const response = await fetch(`${service.url}/healthz`);
  expect(response.status).toBe(200);
}

/** Strings that break stores, parsers and byte limits: NUL, lone surrogates, BOM, long UTF-8. */
export const nastyString: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    'a\u0000b',
    '\ud800',
    'x\udc00y',
    '\udbff\udfff',
    '\ufeff',
    '\u202e',
    '\\',
    '"',
    "'; DROP TABLE api_keys; --",
    '%s%n',
    '../../etc/passwd',
    '__proto__',
    'constructor',
    'x'.repeat(255),
    'x'.repeat(256),
    'é'.repeat(128),
    '€'.repeat(85),
    '€'.repeat(86),
    '😀'.repeat(64),
    '😀'.repeat(1024),
    'x'.repeat(4096),
    'x'.repeat(4097),
  ),
  fc.string({ unit: 'binary', maxLength: 300 }),
  fc.string({ unit: 'grapheme', maxLength: 80 }),
  fc.string({ unit: 'binary-ascii', maxLength: 80 }),
);

/** Any JSON value of a type a field does not expect, numbers at the edges included. */
export const wrongValue: fc.Arbitrary<unknown> = fc.oneof(
  nastyString,
  fc.constantFrom(null, true, false, 0, -1, -0, 1e308, -1e308, 2 ** 53 + 2, 0.5, 1e-320),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 5 }),
  fc.dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 5 }),
);

/** Every path (list of keys) to a value inside a JSON object, the root's children first. */
function paths(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  if (value === null || typeof value !== 'object') return [];
  const out: (string | number)[][] = [];
  const entries = Array.isArray(value)
    ? value.map((v, i) => [i, v] as const)
    : Object.entries(value);
  for (const [key, child] of entries) {
    const path = [...prefix, key];
    out.push(path, ...paths(child, path));
  }
  return out;
}

/**
 * A valid-looking body with one thing wrong: a value replaced by a wrong one, a key removed, or
 * an unknown key added (at the root or inside a nested object).
 */
export function mutated(valid: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<unknown> {
  return fc
    .tuple(
      valid,
      wrongValue,
      fc.nat(),
      fc.constantFrom('replace', 'delete', 'add'),
      fc.string({ maxLength: 10 }),
    )
    .map(([body, wrong, pick, how, key]) => {
      const copy = structuredClone(body) as Record<string, unknown>;
      const all = paths(copy);
      if (all.length === 0 || how === 'add') {
        const objects = [[], ...all].filter((p) => {
          const v = p.reduce<any>((o, k) => o?.[k], copy);
          return v !== null && typeof v === 'object' && !Array.isArray(v);
        });
        const at = objects[pick % objects.length].reduce<any>((o, k) => o[k], copy);
        at[`x_${key}`] = wrong;
        return copy;
      }
      const path = all[pick % all.length];
      const parent = path.slice(0, -1).reduce<any>((o, k) => o[k], copy);
      const last = path.at(-1)!;
      if (how === 'delete') {
        if (Array.isArray(parent)) parent.splice(Number(last), 1);
        else delete parent[last];
      } else {
        parent[last] = wrong;
      }
      return copy;
    });
}

/** Raw JSON-ish text of hostile shapes, with the field it targets; `fields` are real ones. */
export function hostileText(fields: readonly string[]): fc.Arbitrary<string | Uint8Array> {
  const field = fc.constantFrom(...fields);
  const deep = fc
    .tuple(
      field,
      fc.constantFrom(1_000, 5_000, 100_000),
      fc.constantFrom('[', '{"a":'),
      fc.boolean(),
    )
    .map(([f, depth, open, closed]) => {
      const close = open === '[' ? ']' : '}';
      const inner = `${open.repeat(depth)}${open === '[' ? '' : '1'}${closed ? close.repeat(depth) : ''}`;
      return `{"${f}": ${inner}}`;
    });
  const deepRoot = fc
    .constantFrom(1_000, 100_000)
    .map((depth) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`);
  const literal = fc
    .tuple(
      field,
      fc.constantFrom(
        'NaN',
        'Infinity',
        '-Infinity',
        '-1',
        '1e309',
        '-1e309',
        '1e-400',
        '0x10',
        '01',
        '.5',
        '+1',
        '-0',
        '1E400',
        'undefined',
        'true',
        'null',
        '"\\ud800"',
        '"\\u0000"',
        '"\\x00"',
        "'single'",
        '[1,]',
        '{"a":1,}',
      ),
    )
    .map(([f, lit]) => `{"${f}": ${lit}}`);
  const huge = fc
    .tuple(
      field,
      fc.constantFrom(255, 256, 4097, 500_000, 1_048_000, 1_048_560, 1_048_576, 1_100_000),
    )
    .map(([f, n]) => `{"${f}": "${'x'.repeat(n)}"}`);
  const invalidUtf8 = fc
    .tuple(
      field,
      fc.constantFrom(
        [0xff],
        [0xc3, 0x28],
        [0xed, 0xa0, 0x80],
        [0xf4, 0x90, 0x80, 0x80],
        [0xc0, 0xaf],
        [0xe2, 0x82],
        [0x80],
        [0xfe, 0xfe, 0xff, 0xff],
      ),
      fc.boolean(),
    )
    .map(([f, bytes, inKey]) => {
      const head = Buffer.from(inKey ? '{"' : `{"${f}": "`);
      const tail = Buffer.from(inKey ? `${f}": "x"}` : '"}');
      return new Uint8Array(Buffer.concat([head, Buffer.from(bytes), tail]));
    });
  const garbage = fc.constantFrom(
    '',
    ' ',
    'null',
    'true',
    '0',
    '[]',
    '[{}]',
    '"string"',
    '{',
    '}',
    '{"a"}',
    '\ufeff{}',
    '{"__proto__": {"x": 1}}',
    '{"constructor": {"prototype": {"x": 1}}}',
    '{"a": 1} {"b": 2}',
    '{"description": "a", "description": 5}',
    '\u0000',
  );
  return fc.oneof(
    deep,
    deepRoot,
    literal,
    huge,
    invalidUtf8,
    garbage,
    fc.string({ maxLength: 40 }),
  );
}
