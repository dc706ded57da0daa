import { describe, expect, it } from 'vitest';
import { normalizeDomain } from '../../src/api/agent-ingresses/domain.ts';
import { isId, newId } from '../../src/ids.ts';

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
  it('lower-cases valid names', () => {
    expect(normalizeDomain('Agents.Example.COM')).toBe('agents.example.com');
    expect(normalizeDomain('xn--bcher-kva.example')).toBe('xn--bcher-kva.example');
    expect(normalizeDomain(`${'a'.repeat(63)}.io`)).toBe(`${'a'.repeat(63)}.io`);
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
    expect(() => normalizeDomain(domain)).toThrow(why);
  });
});
