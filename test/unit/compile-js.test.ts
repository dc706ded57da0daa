import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { TrafficEventType } from '../../src/catalogue/index.ts';
import { patchEvaluation } from '../../src/data-plane/filter/cel-semantics.ts';
import { compileToJs, jsFilter } from '../../src/data-plane/filter/compile-js.ts';
import { filterEnvironment } from '../../src/data-plane/filter/filter-environment.ts';
import { compileFilter, FILTER_LIMITS } from '../../src/data-plane/filter/index.ts';
import {
  compileRegex,
  RE2_GLOBAL_SIGNATURE,
  RE2_SIGNATURE,
  re2Matcher,
  regexLiterals,
  useRe2ForMatches,
} from '../../src/data-plane/filter/re2-matches.ts';
import type { EventJson } from '../../src/data-plane/wire-json/to-json.ts';
import { fuzzParams } from '../helpers/fuzz.ts';

// jsFilter (the checked AST as generated JS) must answer exactly as compileFilter's cel-js
// evaluator for every expression of its subset and every event, odd ones included; outside the
// subset it must return undefined so the evaluator is kept. FUZZ_SEED=<n> replays a run.
//
// The reference is compileFilter(...).matches AND the evaluator built here the way compileFilter
// builds it: once compileFilter prefers the generated JS, its matches is no longer an independent
// reference, the evaluator below still is.

const HTTP = 'http_request_complete.v0';
const TCP = 'tcp_connection_closed.v0';

const event: EventJson = {
  conn: {
    client_ip: '10.1.2.3',
    server_ip: '192.0.2.10',
    server_name: 'api.example.com',
    server_port: 443,
  },
};

/** jsFilter's answer, asserting it compiled. */
function js(expression: string, ev: EventJson = event, type = HTTP): boolean {
  const f = jsFilter(type, expression);
  if (f === undefined) throw new Error(`jsFilter does not compile ${expression}`);
  return f(ev);
}

/**
 * The cel-js evaluator of an expression compileFilter accepts, built as compileFilter builds it
 * (step 3: `matches` rerouted to RE2, context from toContext, an error counts as no match).
 */
function evaluator(type: string, expression: string): (e: EventJson) => boolean {
  const fe = filterEnvironment(type as TrafficEventType);
  const literals = regexLiterals(fe.env.parse(expression).ast);
  const regexes = new Map(literals.map(({ pattern }) => [pattern, compileRegex(pattern)]));
  const matcher = re2Matcher(regexes);
  const env = fe.env
    .clone()
    .registerFunction(RE2_SIGNATURE, matcher)
    .registerFunction(RE2_GLOBAL_SIGNATURE, matcher);
  const program = env.parse(expression);
  useRe2ForMatches(program.ast);
  if (!program.check().valid) throw new Error(`the evaluator does not check ${expression}`);
  patchEvaluation(program.ast);
  return (e) => {
    try {
      return program(fe.toContext(e)) === true;
    } catch {
      return false;
    }
  };
}

/** The evaluator's answer (the reference), which compileFilter's must equal. */
function cel(expression: string, ev: EventJson = event, type = HTTP): boolean {
  const want = evaluator(type, expression)(ev);
  expect(compileFilter(type, expression).matches(ev), expression).toBe(want);
  return want;
}

// ---- CEL source for generated values ---------------------------------------------------------

/** A CEL string literal for any well-formed string (\u / \U escapes outside printable ASCII). */
function celString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (cp >= 0x20 && cp < 0x7f) out += ch;
    else if (cp <= 0xffff) out += `\\u${cp.toString(16).padStart(4, '0')}`;
    else out += `\\U${cp.toString(16).padStart(8, '0')}`;
  }
  return `${out}"`;
}

const STRING_FIELDS = ['client_ip', 'server_ip', 'server_name'];
const prefix = fc.constantFrom('conn.', 'ev.conn.');
const stringField = fc.tuple(prefix, fc.constantFrom(...STRING_FIELDS)).map(([p, f]) => `${p}${f}`);
const portField = prefix.map((p) => `${p}server_port`);

// Strings that overlap the event values below, so comparisons and methods are not always false.
const SAMPLE_STRINGS = [
  '',
  '10.',
  '10.1.',
  '10.1.2.3',
  '192.0.2.10',
  'api.',
  'api.example.com',
  '.example.com',
  'example',
  'é',
  '😀',
  'ü.example',
  'a"b\\c',
];
const stringValue = fc.oneof(
  fc.constantFrom(...SAMPLE_STRINGS),
  fc.string({ unit: 'grapheme', maxLength: 6 }),
);
const stringLiteral = stringValue.map(celString);

const intLiteral = fc.oneof(
  fc.constantFrom(
    '0',
    '80',
    '443',
    '8443',
    '65535',
    '-1',
    '-443',
    '0x1BB',
    '2147483647',
    '-2147483648',
    '9007199254740993',
    '9223372036854775807',
    '-9223372036854775808',
    '--5',
  ),
  fc.integer({ min: -70_000, max: 70_000 }).map(String),
);
const uintLiteral = fc.constantFrom('0u', '443u', '65535u', '18446744073709551615u');
const doubleLiteral = fc.constantFrom('443.0', '442.5', '-0.5', '0.0', '-0.0', '1e10', '6.5e4');

const PATTERNS = [
  '^(api|shop)\\.',
  'example',
  '^$',
  '(?i)^API',
  '^[0-9]+\\.',
  '\\d{1,3}$',
  '^10\\.',
  '.',
  'é|😀',
  '^\\p{L}+$',
  '(a+)+$',
];
const pattern = fc.constantFrom(...PATTERNS).map(celString);

interface Exprs {
  bool: string;
  str: string;
  int: string;
}

// Typed expressions of the subset, parenthesized at every level. Depth is bounded well inside
// FILTER_LIMITS.maxDepth; an expression that still breaks a limit is checked for agreement too.
const expressions = fc.letrec<Exprs>((tie) => {
  const bool = tie('bool') as fc.Arbitrary<string>;
  const str = tie('str') as fc.Arbitrary<string>;
  const int = tie('int') as fc.Arbitrary<string>;
  const numeric = fc.oneof(int, doubleLiteral);
  return {
    str: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      stringField,
      stringField,
      stringLiteral,
      fc.tuple(bool, str, str).map(([c, a, b]) => `(${c} ? ${a} : ${b})`),
    ),
    int: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      portField,
      portField,
      intLiteral,
      str.map((s) => `size(${s})`),
      str.map((s) => `${s}.size()`),
      fc.array(int, { maxLength: 3 }).map((a) => `size([${a.join(', ')}])`),
      fc.tuple(bool, int, int).map(([c, a, b]) => `(${c} ? ${a} : ${b})`),
    ),
    bool: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      fc.constantFrom(
        'true',
        'false',
        '(null == null)',
        '(null != null)',
        '(1u < 2u)',
        '(true < false)',
      ),
      fc
        .tuple(str, fc.constantFrom('==', '!=', '<', '<=', '>', '>='), str)
        .map(([a, op, b]) => `(${a} ${op} ${b})`),
      fc
        .tuple(int, fc.constantFrom('==', '!=', '<', '<=', '>', '>='), int)
        .map(([a, op, b]) => `(${a} ${op} ${b})`),
      fc
        .tuple(numeric, fc.constantFrom('<', '<=', '>', '>='), numeric)
        .map(([a, op, b]) => `(${a} ${op} ${b})`),
      fc
        .tuple(int, fc.constantFrom('<', '>=', '>', '<='), uintLiteral)
        .map(([a, op, b]) => `(${a} ${op} ${b})`),
      fc
        .tuple(bool, fc.constantFrom('==', '!=', '<', '>='), bool)
        .map(([a, op, b]) => `(${a} ${op} ${b})`),
      fc.tuple(bool, fc.constantFrom('&&', '||'), bool).map(([a, op, b]) => `(${a} ${op} ${b})`),
      bool.map((b) => `!${b}`),
      fc.tuple(bool, bool, bool).map(([c, a, b]) => `(${c} ? ${a} : ${b})`),
      fc
        .tuple(str, fc.array(str, { maxLength: 12 }))
        .map(([s, list]) => `(${s} in [${list.join(', ')}])`),
      // Long literal lists take the Set path.
      fc
        .tuple(str, fc.array(stringLiteral, { minLength: 9, maxLength: 14 }))
        .map(([s, list]) => `(${s} in [${list.join(', ')}])`),
      fc
        .tuple(int, fc.array(int, { maxLength: 5 }))
        .map(([i, list]) => `(${i} in [${list.join(', ')}])`),
      fc
        .tuple(str, fc.constantFrom('startsWith', 'endsWith', 'contains'), str)
        .map(([r, m, a]) => `${r}.${m}(${a})`),
      fc.tuple(str, pattern).map(([r, p]) => `${r}.matches(${p})`),
      fc.tuple(str, pattern).map(([r, p]) => `matches(${r}, ${p})`),
      // Presence of a leaf: proto3 says set when not its default.
      fc
        .tuple(prefix, fc.constantFrom(...STRING_FIELDS, 'server_port'))
        .map(([p, f]) => `has(${p}${f})`),
    ),
  };
});

// ---- generated events -------------------------------------------------------------------------

const stringLeaf = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...SAMPLE_STRINGS) },
  { weight: 2, arbitrary: fc.ipV4() },
  { weight: 2, arbitrary: fc.domain() },
  // 'binary' includes lone surrogates.
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 8 }) },
  { weight: 1, arbitrary: fc.constantFrom(null, 0, 1, true, ['a'], { a: 1 }, 10n) },
);
const portLeaf = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom(0, 80, 443, 8443, 65535, -1, -443, 2 ** 31 - 1, -(2 ** 31)),
  },
  { weight: 2, arbitrary: fc.integer() },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      -0,
      0.5,
      442.5,
      443.9,
      -1.5,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      1e20,
      2 ** 53,
      2 ** 53 + 2,
      Number.MAX_SAFE_INTEGER,
      -Number.MAX_SAFE_INTEGER,
      Number.MAX_VALUE,
    ),
  },
  { weight: 1, arbitrary: fc.double() },
  // Never in trafficToJson output, but the evaluator takes a bigint as is.
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      443n,
      80n,
      0n,
      -1n,
      2n ** 63n - 1n,
      -(2n ** 63n),
      2n ** 53n + 1n,
      10n ** 20n,
      10n ** 30n,
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom('443', null, true, {}, undefined) },
);
const connGroup = fc.record(
  {
    client_ip: stringLeaf,
    server_ip: stringLeaf,
    server_name: stringLeaf,
    server_port: portLeaf,
  },
  { requiredKeys: [] },
);
const events = fc.oneof(
  { weight: 10, arbitrary: connGroup.map((conn) => ({ conn }) as EventJson) },
  {
    weight: 1,
    arbitrary: fc.constantFrom<unknown>(
      {},
      { conn: null },
      { conn: 'x' },
      { conn: 443 },
      { conn: [] },
      { other: { server_port: 443 } },
      null,
      undefined,
      'conn',
    ) as fc.Arbitrary<EventJson>,
  },
);

/** Agreement on one expression and many events; outside the limits both must refuse. */
function agree(type: string, expression: string, evs: EventJson[]): void {
  let compiled: ReturnType<typeof compileFilter>;
  try {
    compiled = compileFilter(type, expression);
  } catch {
    expect(jsFilter(type, expression), expression).toBeUndefined();
    return;
  }
  const reference = evaluator(type, expression);
  const fast = jsFilter(type, expression);
  expect(fast, `jsFilter should compile ${expression}`).toBeDefined();
  for (const e of evs) {
    const want = reference(e);
    const got = fast!(e);
    const theirs = compiled.matches(e);
    if (got !== want || theirs !== want) {
      throw new Error(
        `${expression} on ${show(e)}: jsFilter ${got}, compileFilter ${theirs}, evaluator ${want}`,
      );
    }
  }
}

function show(e: unknown): string {
  return JSON.stringify(e, (_, v) =>
    typeof v === 'bigint'
      ? `${v}n`
      : typeof v === 'number' && !Number.isFinite(v)
        ? String(v)
        : Object.is(v, -0)
          ? '-0'
          : v,
  );
}

describe('jsFilter: same answers as the cel-js evaluator (property)', () => {
  it('for random expressions of the subset and random events', () => {
    fc.assert(
      fc.property(
        expressions.bool,
        fc.constantFrom(HTTP, TCP),
        fc.array(events, { minLength: 1, maxLength: 24 }),
        (expression, type, evs) => agree(type, expression, evs),
      ),
      fuzzParams(1500),
    );
  });

  it('for simple filters of one field on many events', () => {
    // Literals equal to (or next to) the generated port values, bigint and huge ones included.
    const portLiteral = fc.constantFrom(
      '0',
      '80',
      '443',
      '-1',
      '65535',
      '9007199254740992',
      '9007199254740993',
      '100000000000000000000',
      '9223372036854775807',
      '-9223372036854775808',
    );
    const simple = fc.oneof(
      fc
        .tuple(portField, fc.constantFrom('==', '!=', '<', '<=', '>', '>='), portLiteral)
        .map(([f, op, v]) => `${f} ${op} ${v}`),
      fc
        .tuple(portField, fc.array(portLiteral, { minLength: 1, maxLength: 4 }))
        .map(([f, list]) => `${f} in [${list.join(', ')}]`),
      fc
        .tuple(portField, fc.constantFrom('==', '!=', '<', '<=', '>', '>='), intLiteral)
        .map(([f, op, v]) => `${f} ${op} ${v}`),
      fc
        .tuple(portField, fc.constantFrom('<', '<=', '>', '>='), doubleLiteral)
        .map(([f, op, v]) => `${f} ${op} ${v}`),
      fc
        .tuple(stringField, fc.constantFrom('startsWith', 'endsWith', 'contains'), stringLiteral)
        .map(([f, m, v]) => `${f}.${m}(${v})`),
      fc.tuple(stringField, pattern).map(([f, p]) => `${f}.matches(${p})`),
    );
    fc.assert(
      fc.property(simple, fc.array(events, { minLength: 20, maxLength: 60 }), (expression, evs) =>
        agree(HTTP, expression, evs),
      ),
      fuzzParams(500),
    );
  });
});

/** has() as CEL over proto3 reads the event JSON: a group when any of its values is set. */
function present(v: unknown): boolean {
  if (typeof v === 'string') return v.length > 0;
  if (typeof v === 'number' || typeof v === 'bigint') return Number(v) !== 0;
  if (typeof v === 'boolean') return v;
  if (Array.isArray(v)) return v.length > 0;
  if (v !== null && typeof v === 'object') return Object.values(v).some(present);
  return false;
}

describe('has(): presence, the same on both paths (property)', () => {
  it('of a group and of its leaves, against the proto3 rule', () => {
    const filters: [string, (e: EventJson) => boolean][] = [
      ['has(ev.conn)', (e) => present(e?.conn)],
      ['!has(ev.conn)', (e) => !present(e?.conn)],
      [
        'has(ev.conn) && !has(conn.server_name)',
        (e) =>
          present(e?.conn) &&
          !present(e?.conn && (e.conn as { server_name?: unknown }).server_name),
      ],
    ];
    const strict = fc.record(
      {
        client_ip: fc.constantFrom('', '10.0.0.1'),
        server_ip: fc.constantFrom('', '192.0.2.1'),
        server_name: fc.constantFrom('', 'api.example.com', '😀'),
        server_port: fc.constantFrom(0, 443, -1),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(
        fc.constantFrom(...filters),
        fc.array(strict, { maxLength: 20 }),
        ([expression, oracle], conns) => {
          const generated = compileFilter(HTTP, expression);
          const library = compileFilter(HTTP, expression, { generated: false });
          for (const conn of [...conns, undefined]) {
            const e = (conn === undefined ? {} : { conn }) as EventJson;
            const want = oracle(e);
            expect(generated.matches(e), `${expression} on ${show(e)}`).toBe(want);
            expect(library.matches(e), `${expression} on ${show(e)}`).toBe(want);
          }
        },
      ),
      fuzzParams(300),
    );
  });

  it('of each leaf: false at its default, true otherwise, on both paths', () => {
    const cases: [string, EventJson, boolean][] = [
      ['has(conn.server_name)', {}, false],
      ['has(conn.server_name)', { conn: { server_name: '' } }, false],
      ['has(conn.server_name)', { conn: { server_name: 'a' } }, true],
      ['has(ev.conn.server_port)', { conn: { server_port: 0 } }, false],
      ['has(ev.conn.server_port)', { conn: { server_port: 443 } }, true],
      ['has(ev.conn)', { conn: { server_port: 0, server_name: '' } }, false],
      ['has(ev.conn)', { conn: { client_ip: '10.0.0.1' } }, true],
    ];
    for (const [expression, e, want] of cases) {
      expect(compileFilter(HTTP, expression).matches(e), `${expression} on ${show(e)}`).toBe(want);
      expect(compileFilter(HTTP, expression, { generated: false }).matches(e)).toBe(want);
    }
  });
});

describe('jsFilter: operators', () => {
  it.each([
    ['conn.server_port == 443', true],
    ['conn.server_port != 443', false],
    ['conn.server_port < 443', false],
    ['conn.server_port <= 443', true],
    ['conn.server_port > 442', true],
    ['conn.server_port >= 444', false],
    ['conn.server_port < 443.5', true], // int vs double: the checker accepts it for < <= > >=
    ['conn.server_port > 442.9', true],
    ['conn.server_port < 443u', false],
    ['-1 < conn.server_port', true],
    ['conn.server_port < 9223372036854775807', true],
    ['conn.server_port > -9223372036854775808', true],
    ['conn.server_name == "api.example.com"', true],
    ['ev.conn.server_name != "api.example.com"', false],
    ['conn.server_name < "b"', true],
    ['"b" <= conn.server_name', false],
    ['conn.server_name.startsWith("api.")', true],
    ['conn.server_name.endsWith(".example.org")', false],
    ['conn.client_ip.contains(".2.")', true],
    ['conn.server_name.matches("^api\\\\.example\\\\.(com|org)$")', true],
    ['conn.server_name.matches("^example")', false],
    ['conn.server_name.matches("(?i)^API")', true], // RE2 syntax
    ['conn.server_port in [80, 443]', true],
    ['conn.server_port in []', false],
    ['conn.server_ip in ["198.51.100.1"]', false],
    ['conn.client_ip in [conn.server_ip, conn.client_ip]', true],
    ['conn.server_port == 80 || conn.server_ip == "192.0.2.10"', true],
    ['conn.server_port == 443 && conn.server_ip == "192.0.2.11"', false],
    ['!(conn.server_port == 80)', true],
    ['conn.server_port == 443 ? conn.server_name == "x" : true', false],
    ['(conn.server_port == 80 ? "a" : conn.server_name) == "api.example.com"', true],
    ['size(conn.server_name) == 15', true],
    ['conn.client_ip.size() == 8', true],
    ['size(["a", conn.server_name]) == 2', true],
    ['true', true],
    ['null == null', true],
    ['1u < 2u', true],
    ['1.5 > 1', true],
    ['(true < false) == false', true],
    ['--5 == 5', true],
  ])('%s ⇒ %s', (expression, expected) => {
    expect(js(expression)).toBe(expected);
    expect(cel(expression)).toBe(expected);
  });

  it('counts code points as size() does, lone surrogates included', () => {
    for (const name of ['', 'é', '😀', 'a😀b', '\ud800', '\udc00\ud800', '\ud83d\ude00\ud83d']) {
      const ev = { conn: { server_name: name } };
      const expression = `size(conn.server_name) == ${[...name].length}`;
      expect(js(expression, ev)).toBe(true);
      expect(cel(expression, ev)).toBe(true);
    }
  });

  it('looks a long literal list up as the evaluator does', () => {
    const names = Array.from({ length: 20 }, (_, i) => `h${i}.example.com`);
    const expression = `conn.server_name in ${JSON.stringify(names)}`;
    for (const name of [...names, 'api.example.com', '']) {
      const ev = { conn: { server_name: name } };
      expect(js(expression, ev)).toBe(cel(expression, ev));
    }
  });

  it('reads missing and odd values as the evaluator does', () => {
    const cases: [string, unknown][] = [
      ['conn.server_name == ""', {}],
      ['conn.server_port == 0', { conn: null }],
      ['conn.server_port == 0', null],
      ['conn.server_port == 0', { conn: { server_port: '443' } }],
      ['conn.server_port == 0', { conn: { server_port: Number.NaN } }],
      ['conn.server_port == 442', { conn: { server_port: 442.9 } }],
      ['conn.server_port == -1', { conn: { server_port: -1.5 } }],
      ['conn.server_port == 443', { conn: { server_port: 443n } }],
      ['conn.server_port > 9007199254740992', { conn: { server_port: 2n ** 53n + 1n } }],
      ['conn.server_port < 9007199254740993.0', { conn: { server_port: 2n ** 53n + 1n } }],
      ['conn.server_port in [9223372036854775807]', { conn: { server_port: 2n ** 63n - 1n } }],
      ['conn.server_port > 9223372036854775807', { conn: { server_port: 1e20 } }],
      ['conn.server_name == ""', { conn: { server_name: 42 } }],
    ];
    for (const [expression, ev] of cases) {
      const want = cel(expression, ev as EventJson);
      expect(js(expression, ev as EventJson), `${expression} on ${show(ev)}`).toBe(want);
    }
  });

  it('answers false when an int field is infinite, whatever the expression reads', () => {
    // The evaluator's context conversion throws (BigInt(Infinity)), which counts as no match.
    for (const port of [Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      const ev = { conn: { server_name: 'x', server_port: port } };
      for (const expression of ['conn.server_name == "x"', 'true', 'conn.server_port > 0']) {
        expect(cel(expression, ev)).toBe(false);
        expect(js(expression, ev)).toBe(false);
      }
    }
  });

  it('keeps literals out of the generated code as code', () => {
    const nasty = '"); throw new Error("injected"); ("\u2028\u2029\\';
    const expression = `conn.server_name == ${celString(nasty)}`;
    expect(js(expression, { conn: { server_name: nasty } })).toBe(true);
    expect(js(expression)).toBe(false);
  });

  it('works for tcp_connection_closed', () => {
    const conn = { client_ip: '10.0.0.1', server_ip: '', server_name: 'db', server_port: 5432 };
    expect(js('conn.server_port == 5432 && conn.server_name == "db"', { conn }, TCP)).toBe(true);
  });
});

describe('jsFilter: falls back (undefined) outside its subset', () => {
  it.each([
    ['conn.server_port + 1 == 444', 'arithmetic (may overflow)'],
    ['conn.server_port * 2 > 0', 'arithmetic'],
    ['-conn.server_port < 0', 'negation of a field'],
    ['conn.server_name + "x" == "y"', 'string concatenation'],
    ['conn.server_name.matches(conn.client_ip)', 'dynamic pattern'],
    ['conn.server_name.matches("^" + conn.client_ip)', 'dynamic pattern'],
    ['has(ev.conn)', 'has() of a group'],
    ['matches(conn.server_name, conn.client_ip)', 'dynamic pattern, global form'],
    ['[conn.server_name].exists(s, s == "x")', 'comprehension'],
    ['string(conn.server_port) == "443"', 'conversion'],
    ['int(conn.server_name) == 1', 'conversion'],
    ['dyn(conn.server_port) == 443.0', 'dyn'],
    ['conn.server_name.lowerAscii() == "x"', 'unsupported method'],
    ['conn.server_name in {"api.example.com": true}', 'map'],
    ['b"x" == b"x"', 'bytes'],
    ['[1] == [1]', 'list equality'],
    ['conn.server_name.split(".").size() > 1', 'unsupported method'],
  ])('%s (%s)', (expression) => {
    expect(() => compileFilter(HTTP, expression)).not.toThrow();
    expect(jsFilter(HTTP, expression)).toBeUndefined();
  });

  it.each([
    ['conn.server_port ==', 'syntax error'],
    ['conn.server_port == "x"', 'type error'],
    ['conn.server_port', 'not bool'],
    ['conn.nope == 1', 'unknown field'],
    ['ev.http.request.method == "get"', 'not filterable'],
    ['conn.server_name.matches("a(b")', 'invalid regex'],
    ['conn.server_name.re2Matches("a")', 'private helper'],
    ['conn.server_port == 9223372036854775808', 'int literal beyond int64'],
  ])('%s (%s: compileFilter rejects it)', (expression) => {
    expect(() => compileFilter(HTTP, expression)).toThrow();
    expect(jsFilter(HTTP, expression)).toBeUndefined();
  });

  it('leaves the blank filter, long expressions and other event types to compileFilter', () => {
    expect(jsFilter(HTTP, '')).toBeUndefined();
    expect(jsFilter(HTTP, '  \n')).toBeUndefined();
    expect(
      jsFilter(HTTP, `conn.server_port == 443${' '.repeat(FILTER_LIMITS.maxLength)}`),
    ).toBeUndefined();
    expect(jsFilter('api_key_created.v0', 'true')).toBeUndefined();
    expect(jsFilter('nope.v0', 'true')).toBeUndefined();
  });

  it("compileToJs takes compileFilter's checked AST, or its evaluation AST (re2Matches)", () => {
    const expression = 'conn.server_name.matches("^api\\\\.") && conn.server_port == 443';
    const fe = filterEnvironment(HTTP);
    const checked = fe.env.parse(expression);
    expect(checked.check().valid).toBe(true);
    const regexes = new Map([['^api\\.', compileRegex('^api\\.')]]);
    const fromChecked = compileToJs(checked.ast, { type: HTTP, regexes });
    const program = fe.env.clone().registerFunction(RE2_SIGNATURE, re2Matcher(regexes));
    const evaluation = program.parse(expression);
    useRe2ForMatches(evaluation.ast);
    expect(evaluation.check().valid).toBe(true);
    const fromEvaluation = compileToJs(evaluation.ast, { type: HTTP }); // compiles the pattern
    for (const f of [fromChecked, fromEvaluation]) {
      expect(f).toBeDefined();
      expect(f!(event)).toBe(true);
      expect(f!({ conn: { server_name: 'shop.example.com', server_port: 443 } })).toBe(false);
    }
  });

  it('compileToJs refuses an AST that was not type-checked', () => {
    const ast = filterEnvironment(HTTP).env.parse('conn.server_port == 443').ast;
    expect(compileToJs(ast, { type: HTTP })).toBeUndefined();
  });
});
