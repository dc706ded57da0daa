import { describe, expect, it } from 'vitest';
import { normalizeDomain } from '../../src/control-plane/api/agent-ingresses/domain.ts';
import { isId, newId } from '../../src/shared/ids.ts';

describe('ids', () => {
  it('carry their prefix and sort by creation, even within one millisecond', () => {
    const ids = Array.from({ length: 1000 }, () => newId('agin'));
    expect(ids.every((id) => isId(id, 'agin'))).toBe(true);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('reject other prefixes and malformed bodies', () => {
    const id = newId('ak');
    expect(isId(id, 'agin')).toBe(false);
    expect(isId(`${id}x`, 'ak')).toBe(false);
    expect(isId('ak_ABCDEFGHJKMNPQRSTVWXYZ012', 'ak')).toBe(false);
  });
});

describe('domains', () => {
  const regions = ['eu', 'us-cal-1'];

  it('lower-cases valid names', () => {
    expect(normalizeDomain('Agents.Example.COM', regions)).toBe('agents.example.com');
    expect(normalizeDomain('xn--bcher-kva.example', regions)).toBe('xn--bcher-kva.example');
    expect(normalizeDomain(`${'a'.repeat(63)}.io`, regions)).toBe(`${'a'.repeat(63)}.io`);
  });

  it.each([
    ['', 'empty'],
    ['example', 'two labels'],
    ['*.example.com', 'wildcard'],
    ['example.com.', 'dot'],
    ['ex_ample.com', 'letters, digits'],
    ['example-.com', 'letters, digits'],
    ['192.168.0.1', 'IP address'],
    ['bücher.example', 'punycode'],
    [`${'a'.repeat(64)}.com`, '63 characters'],
    [`${'a.'.repeat(127)}com`, '253 bytes'],
  ])('rejects %j (%s)', (domain, why) => {
    expect(() => normalizeDomain(domain, regions)).toThrow(why);
  });

  it('accepts a domain whose longest region domain is exactly 253 bytes', () => {
    const domain = `${'a.'.repeat(120)}com`;
    expect(domain.length).toBe(243);
    expect(normalizeDomain(`${domain}x`, regions)).toBe(`${domain}x`);
    expect(() => normalizeDomain(`${domain}xx`, regions)).toThrow(
      'region domain us-cal-1.<domain> would be 254 bytes; DNS names are at most 253',
    );
  });
});
