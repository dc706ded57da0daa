import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { choosePort, parsePortRange } from '../../src/shared/net/port-choice.ts';

describe('parsePortRange', () => {
  it('reads first-last', () => {
    expect(parsePortRange('20000-29999')).toEqual({ first: 20000, last: 29999 });
    expect(parsePortRange('1-65535')).toEqual({ first: 1, last: 65535 });
    expect(parsePortRange('5000-5000')).toEqual({ first: 5000, last: 5000 });
  });

  it.each(['', '20000', '20000-', '0-10', '10-65536', '30000-20000', 'a-b', '1-2-3', '-1-5'])(
    'refuses %j',
    (text) => {
      expect(() => parsePortRange(text)).toThrow(/must be/);
    },
  );
});

describe('choosePort', () => {
  const range = { first: 100, last: 109 };

  it('picks the free port of the rank the random number gives', () => {
    expect(choosePort(range, [], 0)).toBe(100);
    expect(choosePort(range, [], 0.999999)).toBe(109);
    expect(choosePort(range, [100, 101, 103], 0)).toBe(102);
    expect(choosePort(range, [100, 101, 103], 0.3)).toBe(105);
    expect(choosePort(range, [109, 100, 5, 70000], 0.99)).toBe(108);
  });

  it('answers undefined when every port is taken', () => {
    expect(
      choosePort(range, [100, 101, 102, 103, 104, 105, 106, 107, 108, 109], 0.5),
    ).toBeUndefined();
    expect(choosePort({ first: 7, last: 7 }, [7, 7], 0)).toBeUndefined();
  });

  it('always returns a free port of the range, and can return every free port', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 95, max: 115 }), { maxLength: 15 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (taken, random) => {
          const port = choosePort(range, taken, random);
          const free = [];
          for (let p = range.first; p <= range.last; p++) if (!taken.includes(p)) free.push(p);
          if (free.length === 0) return port === undefined;
          return port === free[Math.floor(random * free.length)];
        },
      ),
    );
  });
});

describe('TCP address configuration', () => {
  it('defaults to ports 20000-29999', () => {
    const config = loadConfig({});
    expect(config.tcpAddrPorts).toEqual({ first: 20000, last: 29999 });
    expect(config.ipRestrictionCacheTtlMs).toBe(5000);
  });

  it('reads TCP_ADDR_PORTS', () => {
    expect(loadConfig({ TCP_ADDR_PORTS: '40000-40009' }).tcpAddrPorts).toEqual({
      first: 40000,
      last: 40009,
    });
  });

  it.each([
    [{ TCP_ADDR_PORTS: '9-8' }, 'TCP_ADDR_PORTS must be two ports 1-65535'],
    [{ TCP_ADDR_PORTS: '20000' }, 'TCP_ADDR_PORTS must be "first-last"'],
    [{ IP_RESTRICTION_CACHE_TTL_MS: 'soon' }, 'IP_RESTRICTION_CACHE_TTL_MS must be a whole number'],
  ])('rejects %o', (env, message) => {
    expect(() => loadConfig(env)).toThrow(`invalid configuration: ${message}`);
  });
});
