import { create } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import {
  compileFilter,
  compileProjection,
  FILTER_LIMITS,
  FieldSelectionError,
  FilterError,
} from '../../src/data-plane/filter/index.ts';
import { type EventJson, trafficToJson } from '../../src/data-plane/wire-json/to-json.ts';
import { HttpRequestCompleteSchema } from '../../src/gen/agent_ingress/events/v0/traffic_pb.ts';

const HTTP = 'http_request_complete.v0';
const TCP = 'tcp_connection_closed.v0';

const event: EventJson = trafficToJson(HTTP)(
  create(HttpRequestCompleteSchema, {
    conn: {
      clientIp: '10.1.2.3',
      serverIp: '192.0.2.10',
      serverName: 'api.example.com',
      serverPort: 443,
      startTs: { seconds: 1_700_000_000n, nanos: 0 },
    },
    http: { request: { method: 'get' }, response: { statusCode: 200 } },
  }),
);

function matches(expression: string, ev: EventJson = event, type = HTTP): boolean {
  return compileFilter(type, expression).matches(ev);
}

function filterError(expression: string, type = HTTP): FilterError {
  try {
    compileFilter(type, expression);
  } catch (err) {
    expect(err).toBeInstanceOf(FilterError);
    return err as FilterError;
  }
  throw new Error(`expected '${expression}' to be rejected`);
}

describe('compileFilter: evaluation', () => {
  it.each([
    ['conn.server_port == 443', true],
    ['conn.server_port == 80', false],
    ['conn.server_port != 80 && conn.server_port > 100', true],
    ['conn.server_name.startsWith("api.")', true],
    ['conn.server_name.endsWith(".example.com")', true],
    ['conn.server_name.endsWith(".example.org")', false],
    ['conn.client_ip.contains(".2.")', true],
    ['conn.server_name.matches("^api\\\\.example\\\\.(com|org)$")', true],
    ['conn.server_name.matches("example")', true], // unanchored, as CEL specifies
    ['conn.server_name.matches("^example")', false],
    ['conn.server_port in [80, 443]', true],
    ['conn.server_ip in ["198.51.100.1"]', false],
    ['conn.server_port == 80 || conn.server_ip == "192.0.2.10"', true],
    ['conn.server_port == 80 || conn.server_ip == "192.0.2.11"', false],
    ['!(conn.server_port == 80)', true],
    ['[conn.server_name, conn.client_ip].exists(s, s.matches("^10\\\\."))', true],
  ])('%s ⇒ %s', (expression, expected) => {
    expect(matches(expression)).toBe(expected);
  });

  it('binds the event as ev and each top-level group by name', () => {
    expect(matches('ev.conn.server_port == 443')).toBe(true);
    expect(matches('conn.server_port == 443 && ev.conn.server_port == 443')).toBe(true);
    expect(matches('ev.conn.server_port == 80')).toBe(false);
  });

  it('works for tcp_connection_closed and on the lighter {conn} object', () => {
    const conn = { client_ip: '10.0.0.1', server_ip: '', server_name: 'db', server_port: 5432 };
    expect(matches('conn.server_port == 5432 && conn.server_name == "db"', { conn }, TCP)).toBe(
      true,
    );
    expect(matches('conn.server_port == 5432', { conn: { ...conn, server_port: 1 } }, TCP)).toBe(
      false,
    );
  });

  it('treats missing values as defaults instead of failing per event', () => {
    expect(matches('conn.server_name == ""', {})).toBe(true);
    expect(matches('conn.server_port == 0', { conn: null })).toBe(true);
  });

  it('accepts a blank expression as "no filter"', () => {
    expect(matches('')).toBe(true);
    expect(matches('  \n ', {})).toBe(true);
  });

  // Runs before the linear-time case: if `matches` ever fell back to JS RegExp (a cel-js
  // upgrade), this fails fast — JS has no `(?i)` flag group — instead of the next test hanging.
  it('evaluates matches with RE2 syntax', () => {
    expect(matches('conn.server_name.matches("(?i)^API\\\\.EXAMPLE")')).toBe(true);
  });

  it('runs matches in linear time (RE2): a catastrophic pattern on a long input returns', () => {
    const f = compileFilter(HTTP, 'conn.server_name.matches("(a+)+$")');
    // A backtracking engine needs ~2^n steps to fail on n a's followed by '!'.
    expect(f.matches({ conn: { server_name: `${'a'.repeat(50_000)}!` } })).toBe(false);
    expect(f.matches({ conn: { server_name: `!${'a'.repeat(50_000)}` } })).toBe(true);
    const inMacro = compileFilter(HTTP, '[conn.server_name].exists(s, s.matches("^(a|aa)+$"))');
    expect(inMacro.matches({ conn: { server_name: `${'a'.repeat(50_000)}!` } })).toBe(false);
  });

  it('compiles a non-literal pattern at event time; an invalid one does not match', () => {
    const f = compileFilter(HTTP, 'conn.server_name.matches(conn.client_ip)');
    expect(f.matches({ conn: { server_name: 'x10y', client_ip: '1+0' } })).toBe(true);
    expect(f.matches({ conn: { server_name: 'x10y', client_ip: '(' } })).toBe(false);
  });
});

describe('compileFilter: what CEL means (issue 14)', () => {
  const both = (expression: string, ev: EventJson = event): [boolean, boolean] => [
    compileFilter(HTTP, expression).matches(ev),
    compileFilter(HTTP, expression, { generated: false }).matches(ev),
  ];

  it('has(): false for an unset or default field and an absent group, on both paths', () => {
    const unset = { conn: { server_name: '', server_port: 0 } };
    expect(both('has(conn.server_name)', unset)).toEqual([false, false]);
    expect(both('has(conn.server_port)', unset)).toEqual([false, false]);
    expect(both('has(ev.conn)', {})).toEqual([false, false]);
    expect(both('has(ev.conn)', unset)).toEqual([false, false]);
    expect(both('has(conn.server_name) && has(ev.conn)')).toEqual([true, true]);
    // cel-js checks only has()'s variable; CEL (and the filter's field rule) check the field.
    expect(filterError('has(ev.conn.start_ts)').code).toBe('not_filterable');
    expect(filterError('has(conn.nope)').code).toBe('unknown_field');
    expect(filterError('has(ev.http.request.method)').code).toBe('not_filterable');
  });

  it('orders strings by code point, on both paths', () => {
    const ev = { conn: { server_name: '\uff61' } }; // U+FF61 < U+1F600, though its UTF-16 unit is larger
    expect(both('conn.server_name < "😀"', ev)).toEqual([true, true]);
    expect(both('conn.server_name >= "😀"', ev)).toEqual([false, false]);
    expect(both('"😀" > conn.server_name', ev)).toEqual([true, true]);
    expect(both('[conn.server_name].exists(s, s <= "😀")', ev)).toEqual([true, true]);
  });

  it('rejects an int literal beyond int64, and accepts int64 minimum', () => {
    const err = filterError('conn.server_port == 9223372036854775808');
    expect(err.code).toBe('syntax');
    expect(err.message).toContain('out of range');
    expect(err.position?.column).toBe(21);
    expect(filterError('conn.server_port == 0x8000000000000000').code).toBe('syntax');
    expect(matches('conn.server_port > -9223372036854775808')).toBe(true);
  });

  it.each([
    ['matches(conn.server_name, "^api\\\\.")', true],
    ['matches(conn.server_name, "^shop")', false],
    ['conn == ev.conn', true],
    ['conn != ev.conn', false],
    ["[1, 'a'].size() == 2", true],
    ['int(443u) == conn.server_port', true],
    ["conn.server_name in ['x', 1, 'api.example.com']", true],
    ["{'a': 1, 2: 'b'}.size() == 2", true],
    [`${'('.repeat(32)}conn.server_port${')'.repeat(32)} == 443`, true],
  ])('accepts valid CEL it used to refuse: %s', (expression, expected) => {
    expect(both(expression)).toEqual([expected, expected]);
  });

  it('makes int negation and division overflow an error (no match), on every evaluation', () => {
    for (const expression of [
      '-(-9223372036854775808) > 0',
      '(-9223372036854775808) / -1 > 0',
      '-(conn.server_port - 9223372036854775807 - 2) > 0',
    ]) {
      const ev = { conn: { server_port: 1 } };
      for (let i = 0; i < 3; i++) expect(both(expression, ev), expression).toEqual([false, false]);
    }
    expect(both('-(-9223372036854775807) > 0')).toEqual([true, true]);
    expect(both('conn.server_port / -1 == -443')).toEqual([true, true]);
  });

  it('labels what cel-js cannot type-check a type error, not a syntax error', () => {
    const err = filterError('[].all(e, e > 0)'); // valid CEL: README, known differences
    expect(err.code).toBe('type');
    expect(err.message).toMatch(/^filter: type error: /);
  });

  it('runs the global matches with RE2 and rejects its invalid literal pattern', () => {
    const f = compileFilter(HTTP, 'matches(conn.server_name, "(a+)+$")');
    expect(f.matches({ conn: { server_name: `${'a'.repeat(50_000)}!` } })).toBe(false);
    expect(filterError('matches(conn.server_name, "a(b")').code).toBe('invalid_regex');
  });
});

describe('compileFilter: errors', () => {
  it('reports a syntax error with its position', () => {
    const err = filterError('conn.server_port ==');
    expect(err.code).toBe('syntax');
    expect(err.position).toEqual({ line: 1, column: 20, offset: 19 });
    expect(err.message).toMatch(/^filter: syntax error: .* at column 20$/);
  });

  it('reports line and column in a multi-line expression', () => {
    const err = filterError('conn.server_port == 443 &&\n  conn.nope == 1');
    expect(err.position).toEqual({ line: 2, column: 3, offset: 29 });
    expect(err.message).toContain('at line 2, column 3');
  });

  it('rejects a field that exists but is not filterable, listing the allowed fields', () => {
    const err = filterError('ev.http.request.method == "get"');
    expect(err.code).toBe('not_filterable');
    expect(err.message).toBe(
      "filter: field 'ev.http.request.method' is not filterable at column 1; " +
        'filterable fields: conn.client_ip, conn.server_ip, conn.server_name, conn.server_port',
    );
    expect(err.allowedFields).toEqual([
      'conn.client_ip',
      'conn.server_ip',
      'conn.server_name',
      'conn.server_port',
    ]);
    expect(filterError('conn.start_ts < timestamp("2030-01-01T00:00:00Z")').code).toBe(
      'not_filterable',
    );
    expect(filterError('http.response.status_code == 200').code).toBe('not_filterable');
  });

  it('rejects an unknown field, suggesting the filterable one it resembles', () => {
    const err = filterError('conn.server_port == 443 && conn.nope == "x"');
    expect(err.code).toBe('unknown_field');
    expect(err.message).toContain("unknown field 'conn.nope' at column 28");
    expect(err.position?.column).toBe(28);
    const bare = filterError('server_port == 443');
    expect(bare.code).toBe('unknown_field');
    expect(bare.message).toContain("(did you mean 'conn.server_port'?)");
  });

  it('rejects a filter that does not evaluate to bool', () => {
    const err = filterError('conn.server_port');
    expect(err.code).toBe('not_bool');
    expect(err.message).toContain('must evaluate to bool, got int');
    expect(filterError('conn.server_name').code).toBe('not_bool');
  });

  it('rejects a type error at compile time', () => {
    const err = filterError('conn.server_port == "x"');
    expect(err.code).toBe('type');
    expect(err.message).toContain('int == string');
    expect(err.position?.column).toBe(1);
  });

  it('rejects an invalid literal regex at compile time, at the pattern', () => {
    const err = filterError('conn.server_name.matches("a(b")');
    expect(err.code).toBe('invalid_regex');
    expect(err.position?.column).toBe(26);
    expect(err.message).toContain('missing closing )');
    // RE2 syntax, not JS: backreferences are not RE2.
    expect(filterError('conn.server_name.matches("(a)\\\\1")').code).toBe('invalid_regex');
  });

  it('bounds expression length and nesting', () => {
    const long = `conn.server_port == 443${' '.repeat(FILTER_LIMITS.maxLength)}`;
    const err = filterError(long);
    expect(err.code).toBe('too_long');
    expect(err.message).toContain(`the limit is ${FILTER_LIMITS.maxLength}`);
    const deep = `${'('.repeat(40)}conn.server_port == 443${')'.repeat(40)}`;
    expect(filterError(deep).code).toBe('too_complex');
  });

  it('keeps the RE2 helper private', () => {
    expect(filterError('conn.server_name.re2Matches("a")').code).toBe('type');
  });

  it('accepts filters only for traffic event types', () => {
    const err = filterError('true', 'api_key_created.v0');
    expect(err.code).toBe('unsupported_event_type');
    expect(filterError('true', 'nope.v0').code).toBe('unsupported_event_type');
  });
});

describe('compileProjection', () => {
  it('returns the event unchanged when no fields are selected', () => {
    expect(compileProjection(HTTP, undefined)(event)).toBe(event);
    expect(compileProjection(HTTP, [])(event)).toBe(event);
  });

  it('selects a whole group by its name', () => {
    expect(compileProjection(HTTP, ['conn'])(event)).toEqual({ conn: event.conn });
  });

  it('selects leaves, keeping the output nested', () => {
    const project = compileProjection(HTTP, [
      'conn.server_port',
      'http.request.method',
      'http.response.status_code',
    ]);
    expect(project(event)).toEqual({
      conn: { server_port: 443 },
      http: { request: { method: 'get' }, response: { status_code: 200 } },
    });
  });

  it('lets a group absorb its own leaves, in either order', () => {
    const a = compileProjection(HTTP, ['conn.client_ip', 'conn'])(event);
    const b = compileProjection(HTTP, ['conn', 'conn.client_ip'])(event);
    expect(a).toEqual({ conn: event.conn });
    expect(b).toEqual({ conn: event.conn });
  });

  it('rejects unknown names, listing the valid ones', () => {
    try {
      compileProjection(TCP, ['conn.client_ip', 'conn.nope', 'http']);
      throw new Error('expected a FieldSelectionError');
    } catch (err) {
      expect(err).toBeInstanceOf(FieldSelectionError);
      const e = err as FieldSelectionError;
      expect(e.invalidNames).toEqual(['conn.nope', 'http']);
      expect(e.validNames).toContain('conn');
      expect(e.validNames).toContain('traffic_policy.logs');
      expect(e.message).toMatch(/^fields: unknown fields 'conn.nope', 'http'; valid names: conn, /);
    }
  });

  it('supports selection only for traffic event types', () => {
    expect(() => compileProjection('domain_created.v0', ['id'])).toThrow(FieldSelectionError);
  });
});
