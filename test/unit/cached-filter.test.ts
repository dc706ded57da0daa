import { describe, expect, it } from 'vitest';
import { cachedFilter, readFields } from '../../src/data-plane/filter/cached-filter.ts';
import { type CompiledFilter, compileFilter } from '../../src/data-plane/filter/index.ts';
import { type EventJson, trafficToJson } from '../../src/data-plane/wire-json/to-json.ts';
import type { HttpRequestComplete } from '../../src/gen/agent_ingress/events/v0/traffic_pb.ts';
import { generateEvents } from '../helpers/events.ts';

const HTTP = 'http_request_complete.v0' as const;
const TCP = 'tcp_connection_closed.v0' as const;

/** A compiled filter that counts its evaluations. */
function counting(expression: string, type: string = HTTP): CompiledFilter & { calls: number } {
  const inner = compileFilter(type, expression);
  const spy = {
    type: inner.type,
    expression: inner.expression,
    calls: 0,
    matches(event: EventJson) {
      spy.calls++;
      return inner.matches(event);
    },
  };
  return spy;
}

function ev(client_ip: string, server_ip: string, server_name: string, server_port: number) {
  return { conn: { client_ip, server_ip, server_name, server_port } } as EventJson;
}

const events = generateEvents(400, { accounts: ['ac_1'], tcpShare: 0, seed: 9 }).map((e) =>
  trafficToJson(HTTP)(e.payload.value as HttpRequestComplete),
);

describe('cachedFilter', () => {
  it.each([
    'conn.server_port == 443',
    'conn.server_name.endsWith(".example.com") && conn.server_port != 80',
    'ev.conn.client_ip.startsWith("10.1.") || conn.server_ip in ["192.0.2.1", "192.0.2.7"]',
    'conn.server_name.matches("^(api|shop)\\\\.")',
    'conn.server_name.matches(conn.client_ip)',
    '[conn][0].server_port == 443 && ev.conn.client_ip.startsWith("10.2")',
    '1 == 1',
  ])('answers as the uncached filter: %s', (expression) => {
    const plain = compileFilter(HTTP, expression);
    // Marked costly so that every expression, the cheap ones too, goes through the cache.
    const cached = cachedFilter({ ...plain, cheap: false });
    // Twice: the second pass answers from the cache.
    for (const e of [...events, ...events]) expect(cached.matches(e)).toBe(plain.matches(e));
    expect(cached.type).toBe(HTTP);
    expect(cached.expression).toBe(expression);
  });

  it('leaves cheap filters (generated JS without a regex) uncached, caches the costly ones', () => {
    for (const cheap of [
      'conn.server_port == 443',
      'conn.client_ip.startsWith("10.1.") || conn.client_ip.startsWith("10.2.")',
      'conn.server_ip in ["192.0.2.1", "192.0.2.2", "192.0.2.3"]',
    ]) {
      const plain = compileFilter(HTTP, cheap);
      expect(plain.cheap).toBe(true);
      expect(cachedFilter(plain)).toBe(plain);
    }
    for (const costly of [
      'conn.server_name.matches("^(api|shop)\\\\.")', // a regex
      'conn.server_port + 1 == 444', // arithmetic: the cel-js evaluator
    ]) {
      const plain = compileFilter(HTTP, costly);
      expect(plain.cheap).toBe(false);
      const cached = cachedFilter(plain);
      expect(cached).not.toBe(plain);
      for (const e of [...events, ...events]) expect(cached.matches(e)).toBe(plain.matches(e));
    }
  });

  it('evaluates once per key, keyed by the fields the expression reads', () => {
    const port = counting('conn.server_port == 443');
    const cached = cachedFilter(port);
    const ports = new Set(events.map((e) => (e.conn as { server_port: number }).server_port));
    for (const e of [...events, ...events]) cached.matches(e);
    expect(port.calls).toBe(ports.size);

    const whole = counting('[conn][0].server_port == 443');
    const cachedWhole = cachedFilter(whole);
    cachedWhole.matches(ev('10.0.0.1', '192.0.2.1', 'a.example', 443));
    cachedWhole.matches(ev('10.0.0.2', '192.0.2.1', 'a.example', 443)); // other client: a miss
    cachedWhole.matches(ev('10.0.0.1', '192.0.2.1', 'a.example', 443)); // same tuple: a hit
    expect(whole.calls).toBe(2);
  });

  it('keeps at most maxEntries keys and keeps the ones in use', () => {
    const f = counting('conn.client_ip.startsWith("10.")');
    const cached = cachedFilter(f, 4); // two generations of two keys
    const a = ev('10.0.0.1', 's', 'n', 1);
    const b = ev('10.0.0.2', 's', 'n', 1);
    const c = ev('10.0.0.3', 's', 'n', 1);
    const d = ev('10.0.0.4', 's', 'n', 1);
    const e = ev('10.0.0.5', 's', 'n', 1);
    for (const x of [a, b, c]) cached.matches(x); // young {c}, old {a, b}
    cached.matches(a); // hit in old: copied to young {c, a}
    expect(f.calls).toBe(3);
    cached.matches(d); // young {d}, old {c, a}
    cached.matches(a); // still a hit
    expect(f.calls).toBe(4);
    cached.matches(e); // young {d, e}
    cached.matches(b); // b was dropped: evaluated again
    expect(f.calls).toBe(6);
  });

  it('steps aside for a while when nearly every lookup misses', () => {
    const f = counting('conn.client_ip.startsWith("10.")');
    const cached = cachedFilter(f);
    for (let i = 0; i < 1024; i++) cached.matches(ev(`10.0.${i >> 8}.${i & 255}`, 's', 'n', 1));
    expect(f.calls).toBe(1024); // all misses: the cache is now bypassed for 16384 events
    const x = ev('10.9.9.9', 's', 'n', 1);
    for (let i = 0; i < 16384; i++) expect(cached.matches(x)).toBe(true);
    expect(f.calls).toBe(1024 + 16384);
    cached.matches(x); // caching again: a miss, then hits
    cached.matches(x);
    cached.matches(x);
    expect(f.calls).toBe(1024 + 16384 + 1);
  });

  it('skips the cache for events whose tuple is not plain strings and an integer port', () => {
    const f = counting('conn.server_port == 0');
    const cached = cachedFilter(f);
    const odd = [
      { conn: { server_port: '443' } },
      { conn: null },
      {},
      { conn: { server_port: 1.5 } },
    ] as unknown as EventJson[];
    for (const x of [...odd, ...odd]) {
      expect(cached.matches(x)).toBe(compileFilter(HTTP, 'conn.server_port == 0').matches(x));
    }
    expect(f.calls).toBe(odd.length * 2);
  });

  it('returns the match-all filter unchanged and evaluates a constant filter once', () => {
    const all = compileFilter(HTTP, '');
    expect(cachedFilter(all)).toBe(all);
    const constant = counting('"a" == "a"');
    const cached = cachedFilter(constant);
    for (const e of events) expect(cached.matches(e)).toBe(true);
    expect(constant.calls).toBe(1);
  });
});

describe('readFields', () => {
  it('finds the leaves an expression selects', () => {
    expect(readFields(HTTP, 'conn.server_port == 443')).toEqual(new Set(['conn.server_port']));
    expect(readFields(HTTP, 'ev.conn.client_ip.startsWith("1") && has(conn.server_name)')).toEqual(
      new Set(['conn.client_ip', 'conn.server_name']),
    );
    expect(readFields(TCP, 'true')).toEqual(new Set());
  });

  it('gives up (undefined) when a group is used whole', () => {
    expect(readFields(HTTP, '[conn][0].server_port == 1')).toBeUndefined();
    expect(readFields(HTTP, '{"a": ev.conn}.a.client_ip == ""')).toBeUndefined();
    expect(readFields(HTTP, '[ev][0].conn.server_port == 1')).toBeUndefined();
  });
});
