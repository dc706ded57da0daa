import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStorable } from '../../src/control-plane/api/validate.ts';
import {
  compileFilter,
  compileProjection,
  FILTER_LIMITS,
  FieldSelectionError,
  FilterError,
  MAX_SELECTED_FIELDS,
  selectableNames,
} from '../../src/data-plane/filter/index.ts';
import type { EventJson } from '../../src/data-plane/wire-json/to-json.ts';
import type { Service } from '../../src/service.ts';
import { startTestService } from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';
import {
  countRows,
  expectAlive,
  expectClientAnswer,
  FUZZ_ENV,
  fuzzParams,
  type RawResponse,
  rawRequest,
} from './fuzz-helpers.ts';

// Property-based bad input for subscription filters and field selections: random CEL-ish text
// and generated expressions through POST /event_subscriptions (201 or 400 ERR_INVALID_FILTER,
// never 5xx, and the same verdict as compileFilter); expressions over each structural limit (400
// naming it); regexes that backtrack exponentially elsewhere (right answers on long input, via
// compileFilter directly); random `fields` (201 or 400 ERR_INVALID_FIELDS) and the bound on
// their number. FUZZ_SEED=<n> replays a run.

const RUNS = { tokens: 400, binary: 200, generated: 400, limits: 200, regex: 500, fields: 300 };

const HTTP = 'http_request_complete.v0';
const TCP = 'tcp_connection_closed.v0';

/** What the API should answer for a filter, from compileFilter itself (the API's checker). */
function localVerdict(
  type: string,
  filter: string,
): { ok: true } | { ok: false; error: FilterError } {
  try {
    compileFilter(type, filter);
    return { ok: true };
  } catch (error) {
    expect(error).toBeInstanceOf(FilterError);
    return { ok: false, error: error as FilterError };
  }
}

/** An event's JSON with the filterable connection tuple set from generated values. */
const conn = fc.record({
  client_ip: fc.oneof(fc.ipV4(), fc.string({ maxLength: 20 })),
  server_ip: fc.oneof(fc.ipV4(), fc.string({ maxLength: 20 })),
  server_name: fc.oneof(fc.domain(), fc.string({ unit: 'binary', maxLength: 30 })),
  server_port: fc.oneof(fc.integer({ min: 0, max: 65535 }), fc.integer()),
});
const eventJson = conn.map((c) => ({ conn: c }) as EventJson);

// ---- generated expressions -----------------------------------------------------------------

const stringLiteral = fc
  .string({ unit: 'grapheme-ascii', maxLength: 8 })
  .map((s) => JSON.stringify(s));
const intLiteral = fc.oneof(
  fc.integer({ min: -1000, max: 70000 }).map(String),
  fc.constantFrom(
    '9223372036854775807',
    '-9223372036854775808',
    '9223372036854775808',
    '0x1F',
    '1u',
  ),
);
const regexLiteral = fc
  .constantFrom(
    '^api\\\\.',
    '(a+)+$',
    '(a|aa)*b',
    '^(\\\\d{1,3}\\\\.){3}\\\\d{1,3}$',
    '[',
    '(?=x)',
    '\\\\1',
    'a{1001}',
    '(?i)EXAMPLE',
    '\\\\pL+',
    '.*',
  )
  .map((p) => `"${p}"`);

const { bool } = fc.letrec<{ bool: string; int: string; str: string }>((tie) => ({
  int: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom('conn.server_port', 'ev.conn.server_port'),
    intLiteral,
    fc
      .tuple(tie('int'), fc.constantFrom('+', '-', '*', '/', '%'), tie('int'))
      .map((p) => p.join(' ')),
    tie('str').map((s) => `size(${s})`),
    fc.tuple(tie('str'), tie('str')).map(([a, b]) => `${a}.indexOf(${b})`),
    fc.constantFrom('conn.bogus', 'http.response.status_code', 'ev.http.request.body_length'),
  ),
  str: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom(
      'conn.server_name',
      'conn.client_ip',
      'ev.conn.server_ip',
      'conn["server_name"]',
    ),
    stringLiteral,
    fc.tuple(tie('str'), tie('str')).map(([a, b]) => `${a} + ${b}`),
    tie('str').map((s) => `${s}.lowerAscii()`),
    fc.tuple(tie('str'), tie('int')).map(([s, i]) => `${s}.substring(${i})`),
    tie('int').map((i) => `string(${i})`),
    fc.constantFrom('http.request.method', 'conn.nope', 'ev.tls.version'),
  ),
  bool: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom('true', 'false', 'has(ev.conn.server_name)'),
    fc
      .tuple(tie('int'), fc.constantFrom('==', '!=', '<', '<=', '>', '>='), tie('int'))
      .map((p) => p.join(' ')),
    fc.tuple(tie('str'), fc.constantFrom('==', '!='), tie('str')).map((p) => p.join(' ')),
    fc
      .tuple(tie('str'), fc.constantFrom('startsWith', 'endsWith', 'contains'), tie('str'))
      .map(([s, f, t]) => `${s}.${f}(${t})`),
    fc.tuple(tie('str'), fc.oneof(regexLiteral, tie('str'))).map(([s, p]) => `${s}.matches(${p})`),
    tie('bool').map((b) => `!(${b})`),
    fc.tuple(tie('bool'), fc.constantFrom('&&', '||'), tie('bool')).map((p) => `(${p.join(' ')})`),
    fc.tuple(tie('bool'), tie('bool'), tie('bool')).map(([c, a, b]) => `(${c} ? ${a} : ${b})`),
    fc
      .tuple(tie('int'), fc.array(intLiteral, { maxLength: 4 }))
      .map(([i, l]) => `${i} in [${l.join(', ')}]`),
    fc
      .tuple(
        fc.array(stringLiteral, { maxLength: 3 }),
        tie('str'),
        fc.constantFrom('exists', 'all', 'exists_one'),
      )
      .map(([l, s, m]) => `[${l.join(', ')}].${m}(x, ${s}.endsWith(x))`),
    fc.tuple(tie('str'), tie('int')).map(([s, i]) => `${s} == ${i}`), // a type error
    tie('int'), // not a bool
  ),
}));

describe('subscription filters and fields under fuzz (pglite)', () => {
  let store: TestStore;
  let service: Service;

  /** Posts one source; checks the answer is a 201 or a clean 4xx, and a 4xx leaves no rows. */
  async function postSource(source: Record<string, unknown>): Promise<RawResponse> {
    const before = await countRows(service);
    const response = await rawRequest(
      service.url,
      'POST',
      '/event_subscriptions',
      JSON.stringify({ sources: [source] }),
    );
    const what = `POST /event_subscriptions ${JSON.stringify(source).slice(0, 200)}`;
    expectClientAnswer(response, what);
    expect([201, 400], what).toContain(response.status);
    if (response.status === 400) expect(await countRows(service), what).toEqual(before);
    return response;
  }

  /** Posts a filter and checks the API agrees with compileFilter, down to the reason. */
  async function checkFilter(type: string, filter: string): Promise<RawResponse> {
    const response = await postSource({ type, filter });
    const what = `${type} ${JSON.stringify(filter.slice(0, 200))} → ${response.text.slice(0, 300)}`;
    if (!isStorable(filter)) {
      expect(response.json?.error_code, what).toBe('ERR_INVALID_FIELD');
      return response;
    }
    const local = localVerdict(type, filter);
    if (local.ok) {
      expect(response.status, what).toBe(201);
    } else {
      expect(response.json.error_code, what).toBe('ERR_INVALID_FILTER');
      expect(response.json.details.reason, what).toBe(local.error.code);
      expect(response.json.msg, what).toBe(local.error.message);
      const position = response.json.details.position;
      if (position !== undefined) {
        expect(position.offset, what).toBeGreaterThanOrEqual(0);
        expect(position.offset, what).toBeLessThanOrEqual(filter.length);
      }
    }
    return response;
  }

  beforeAll(async () => {
    store = await pgliteStore();
    service = await startTestService(store, FUZZ_ENV);
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  it('answers CEL-ish token soup with 201 or 400 ERR_INVALID_FILTER, as compileFilter does', async () => {
    const token = fc.constantFrom(
      'conn',
      'ev',
      '.',
      'server_port',
      'server_name',
      'client_ip',
      'server_ip',
      'http',
      'request',
      'bogus',
      'size',
      'matches',
      'startsWith',
      'exists',
      'map',
      'filter',
      'all',
      'cel',
      'bind',
      'has',
      'true',
      'false',
      'null',
      'in',
      'x',
      '0',
      '443',
      '-1',
      '9223372036854775808',
      '1.5',
      '1e309',
      '"a"',
      "'b'",
      '"""x"""',
      'r"\\d"',
      'b"x"',
      '"\\u0000"',
      '"\\x"',
      '"unterminated',
      '==',
      '!=',
      '<',
      '<=',
      '&&',
      '||',
      '!',
      '?',
      ':',
      '+',
      '-',
      '*',
      '/',
      '%',
      '(',
      ')',
      '[',
      ']',
      '{',
      '}',
      ',',
      '.?',
      ' ',
      '\n',
      '\t',
      '😀',
      '\u00a0',
      '//',
      '#',
      '$',
      '@',
      '`',
      '\\',
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(HTTP, TCP),
        fc.array(token, { maxLength: 30 }).map((t) => t.join('')),
        async (type, filter) => {
          await checkFilter(type, filter);
        },
      ),
      fuzzParams(RUNS.tokens),
    );
    await expectAlive(service);
  });

  it('answers random text (any code point) with 201 or a clean 400', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(HTTP, TCP, 'api_key_created.v0'),
        fc.string({ unit: 'binary', maxLength: 120 }),
        async (type, filter) => {
          const response = await postSource({ type, filter });
          if (type !== 'api_key_created.v0') return;
          // Audit kinds take no filter: only the empty one is accepted.
          expect(response.status === 201, response.text).toBe(filter === '');
        },
      ),
      fuzzParams(RUNS.binary),
    );
    await expectAlive(service);
  });

  it('answers generated expressions as compileFilter does; accepted ones evaluate to a bool', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(HTTP, TCP),
        bool,
        fc.array(eventJson, { minLength: 1, maxLength: 3 }),
        async (type, filter, events) => {
          const response = await checkFilter(type, filter);
          if (response.status !== 201) return;
          // What a worker does per event: never throws, always a boolean.
          const compiled = compileFilter(type, filter);
          for (const event of events) expect(typeof compiled.matches(event)).toBe('boolean');
        },
      ),
      fuzzParams(RUNS.generated),
    );
    await expectAlive(service);
  });

  it('refuses expressions over each structural limit with 400 naming the limit', async () => {
    const valid = 'conn.server_port == 443';
    const overLimit = fc.oneof(
      // Longer than maxLength, valid or not.
      fc.integer({ min: FILTER_LIMITS.maxLength + 1, max: 20_000 }).map((n) => ({
        filter: `${valid}${' '.repeat(n - valid.length)}`,
        names: String(FILTER_LIMITS.maxLength),
      })),
      fc.integer({ min: FILTER_LIMITS.maxLength + 1, max: 20_000 }).map((n) => ({
        filter: '('.repeat(n),
        names: String(FILTER_LIMITS.maxLength),
      })),
      // Deeper than maxDepth, in every way an expression nests.
      fc
        .tuple(
          fc.integer({ min: FILTER_LIMITS.maxDepth + 1, max: 600 }),
          fc.constantFrom('paren', 'not', 'neg', 'list', 'ternary', 'call', 'member', 'map'),
        )
        .map(([depth, how]) => {
          const nest: Record<string, () => string> = {
            paren: () => `${'('.repeat(depth)}true${')'.repeat(depth)}`,
            // Unary chains are not counted against maxDepth by cel-js; maxAstNodes stops them.
            not: () => `${'!'.repeat(depth + 512)}true`,
            neg: () => `${'-'.repeat(depth + 512)}1 == 1`,
            list: () => `size(${'['.repeat(depth)}${']'.repeat(depth)}) == 1`,
            ternary: () =>
              `${'true ? ('.repeat(depth)}true${')'.repeat(depth).replaceAll(')', ' : false)')}`,
            call: () => `${'size('.repeat(depth)}"x"${')'.repeat(depth)} == 1`,
            member: () => `conn.server_name${'.lowerAscii()'.repeat(depth)} == ""`,
            map: () => `${'{"a": '.repeat(depth)}1${'}'.repeat(depth)} == {}`,
          };
          return {
            filter: nest[how]().slice(0, FILTER_LIMITS.maxLength),
            names: new RegExp(
              `max(Depth|AstNodes) \\((${FILTER_LIMITS.maxDepth}|${FILTER_LIMITS.maxAstNodes})\\)`,
            ),
          };
        }),
      // More AST nodes than maxAstNodes in a flat expression.
      fc.integer({ min: 260, max: 340 }).map((n) => ({
        filter: Array(n).fill('true').join('&&'),
        names: String(FILTER_LIMITS.maxAstNodes),
      })),
      // A list literal longer than maxListElements.
      fc.integer({ min: FILTER_LIMITS.maxListElements + 1, max: 600 }).map((n) => ({
        filter: `conn.server_port in [${Array(n).fill('1').join(',')}]`,
        names: String(FILTER_LIMITS.maxListElements),
      })),
      // Comprehensions inside comprehensions (nested or chained): their costs multiply.
      fc
        .tuple(
          fc.integer({ min: 2, max: 8 }),
          fc.constantFrom('map', 'exists', 'all', 'filter', 'exists_one', 'bind', 'chain'),
        )
        .map(([depth, how]) => {
          const list = '[0,1,2,3,4,5,6,7,8,9]';
          let filter: string;
          if (how === 'bind') {
            // Each binding doubles the one before: 2^depth copies of the server name.
            filter = `v${depth - 1}`;
            for (let i = depth - 1; i >= 0; i--) {
              const init =
                i === 0 ? 'conn.server_name + conn.server_name' : `v${i - 1} + v${i - 1}`;
              filter = `cel.bind(v${i}, ${init}, ${filter})`;
            }
            filter = `size(${filter}) > 0`;
          } else if (how === 'chain') {
            filter = `size(${list}${'.map(x, x + x)'.repeat(depth)}) > 0`;
          } else {
            const body = how === 'map' || how === 'filter' ? 'v0 > 0' : 'v0 >= 0';
            filter = body;
            for (let i = depth - 1; i >= 0; i--) {
              filter =
                i === 0 ? `${list}.${how}(v${i}, ${filter})` : `${list}.exists(v${i}, ${filter})`;
            }
            if (how === 'map' || how === 'filter') filter = `size(${filter}) > 0`;
          }
          return { filter, names: `at most ${FILTER_LIMITS.maxComprehensionDepth}` };
        }),
      // A regex whose RE2 program is over maxRegexProgramSize.
      fc.integer({ min: 5, max: 12 }).map((n) => ({
        filter: `conn.server_name.matches("${'[a-z]{1000}'.repeat(n)}")`,
        names: String(FILTER_LIMITS.maxRegexProgramSize),
      })),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(HTTP, TCP), overLimit, async (type, { filter, names }) => {
        const response = await checkFilter(type, filter);
        const what = `${filter.slice(0, 100)} → ${response.text.slice(0, 300)}`;
        expect(response.status, what).toBe(400);
        expect(['too_long', 'too_complex'], what).toContain(response.json.details.reason);
        if (typeof names === 'string') expect(response.json.msg, what).toContain(names);
        else expect(response.json.msg, what).toMatch(names);
      }),
      fuzzParams(RUNS.limits),
    );
    await expectAlive(service);
  });

  it('evaluates backtracking-prone regexes right on long input, literal or from the event', () => {
    const a = 'a'.repeat(100_000);
    const cases: [pattern: string, input: string, expected: boolean][] = [
      ['^(a+)+$', a, true],
      ['^(a+)+$', `${a}!`, false],
      ['^(a|aa)+$', `${a}!`, false],
      ['^(a|a?)+b$', a, false],
      ['(a*)*b', a, false],
      ['^(a+)*c', `${a}b`, false],
      ['(x+x+)+y', 'x'.repeat(100_000), false],
      ['^(.*a){20}$', a, true],
      ['^(.*a){20}$', `${a}b`, false],
      ['^(([a-z])+.)+[A-Z]([a-z])+$', `${a}!`, false],
      ['(\\w+\\s?)+$', `${'word '.repeat(20_000)}!`, false], // no match can end after the "!"
      ['(\\w+\\s?)+$', 'word '.repeat(20_000), true],
    ];
    for (const [pattern, input, expected] of cases) {
      const literal = compileFilter(HTTP, `conn.server_name.matches(${JSON.stringify(pattern)})`);
      expect(literal.matches({ conn: { server_name: input } }), pattern).toBe(expected);
      const dynamic = compileFilter(HTTP, 'conn.server_name.matches(conn.client_ip)');
      expect(dynamic.matches({ conn: { server_name: input, client_ip: pattern } }), pattern).toBe(
        expected,
      );
    }
  });

  it('agrees with JavaScript RegExp on short inputs for the same backtracking-prone patterns', () => {
    const patterns = [
      '^(a+)+$',
      '^(a|aa)+$',
      '(a*)*b',
      '(a|b)*a(a|b){3}',
      '^(ab|a)*b?$',
      '(x+x+)+y',
      '^(a?){5}a{5}$',
      'a{2,4}b',
      '^[ab]*!$',
    ];
    const compiled = new Map(
      patterns.map((p) => [
        p,
        compileFilter(HTTP, `conn.server_name.matches(${JSON.stringify(p)})`),
      ]),
    );
    fc.assert(
      fc.property(
        fc.constantFrom(...patterns),
        fc.string({ unit: fc.constantFrom('a', 'b', 'x', 'y', '!'), maxLength: 18 }),
        (pattern, input) => {
          const expected = new RegExp(pattern).test(input);
          expect(compiled.get(pattern)!.matches({ conn: { server_name: input } })).toBe(expected);
        },
      ),
      fuzzParams(RUNS.regex),
    );
  });

  it('never matches (and never throws) with a dynamic pattern beyond the filter limits', () => {
    const dynamic = compileFilter(HTTP, 'conn.server_name.matches(conn.client_ip)');
    for (const pattern of [
      '[a-z]{1000}'.repeat(10),
      'a'.repeat(FILTER_LIMITS.maxLength + 1),
      '(',
      '\\',
    ]) {
      expect(
        dynamic.matches({ conn: { server_name: 'a'.repeat(20_000), client_ip: pattern } }),
      ).toBe(false);
    }
  });

  it('answers random `fields` with 201 or 400 ERR_INVALID_FIELDS naming the unknown ones', async () => {
    const names = (type: string) => selectableNames(type as typeof HTTP);
    const name = (type: string) =>
      fc.oneof(
        { weight: 3, arbitrary: fc.constantFrom(...names(type)) },
        {
          weight: 2,
          arbitrary: fc.constantFrom(
            '',
            '.',
            'conn.',
            '.conn',
            'conn..client_ip',
            'Conn',
            'conn.client_ip.x',
            '__proto__',
            'constructor',
            'conn.__proto__',
            'toString',
            'conn.constructor',
            'ev.conn',
            '*',
            'conn.*',
            'http.request.headers.Accept',
          ),
        },
        { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
      );
    await fc.assert(
      fc.asyncProperty(
        fc
          .constantFrom(HTTP, TCP)
          .chain((type) => fc.tuple(fc.constant(type), fc.array(name(type), { maxLength: 10 }))),
        async ([type, fields]) => {
          const response = await postSource({ type, fields });
          const what = `${type} ${JSON.stringify(fields)} → ${response.text.slice(0, 300)}`;
          if (!fields.every(isStorable)) {
            expect(response.json?.error_code, what).toBe('ERR_INVALID_FIELD');
            return;
          }
          const unknown = fields.filter((f) => !names(type).includes(f));
          if (unknown.length === 0) {
            expect(response.status, what).toBe(201);
          } else {
            expect(response.json.error_code, what).toBe('ERR_INVALID_FIELDS');
            expect(response.json.details.invalid_fields, what).toEqual(unknown);
          }
        },
      ),
      fuzzParams(RUNS.fields),
    );
    await expectAlive(service);
  });

  it(`bounds \`fields\` at ${MAX_SELECTED_FIELDS} entries (ERR_INVALID_FIELDS naming the limit)`, async () => {
    const all = selectableNames(HTTP);
    const of = (n: number) => Array.from({ length: n }, (_, i) => all[i % all.length]);
    expect((await postSource({ type: HTTP, fields: of(MAX_SELECTED_FIELDS) })).status).toBe(201);
    for (const n of [MAX_SELECTED_FIELDS + 1, 10_000, 100_000]) {
      // Short names, so that 100,000 of them still fit in a request body.
      const fields = n > 1000 ? Array(n).fill('conn') : of(n);
      const response = await postSource({ type: HTTP, fields });
      expect(response.json.error_code).toBe('ERR_INVALID_FIELDS');
      expect(response.json.msg).toContain(String(MAX_SELECTED_FIELDS));
    }
    expect(() => compileProjection(HTTP, of(MAX_SELECTED_FIELDS + 1))).toThrow(FieldSelectionError);
    // Audit kinds take no field selection at all.
    const audit = await postSource({ type: 'api_key_created.v0', fields: ['conn'] });
    expect(audit.json.error_code).toBe('ERR_INVALID_FIELDS');
  });
});
