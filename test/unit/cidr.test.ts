import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/shared/errors.ts';
import {
  cidrContains,
  formatAddress,
  normalizeCidr,
  parseCallerAddress,
  parseCidr,
} from '../../src/shared/net/cidr.ts';

function refusal(raw: string): AppError {
  try {
    parseCidr(raw);
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  }
  throw new Error(`${raw} was accepted`);
}

describe('normalizeCidr', () => {
  it.each([
    ['203.0.113.0/24', '203.0.113.0/24'],
    ['0.0.0.0/0', '0.0.0.0/0'],
    ['2.2.2.2', '2.2.2.2/32'],
    ['10.0.0.7/32', '10.0.0.7/32'],
    ['2001:DB8:0:0::/32', '2001:db8::/32'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1/128'],
    ['::/0', '::/0'],
    ['::1', '::1/128'],
    ['2001:db8:0:0:1:0:0:1/128', '2001:db8::1:0:0:1/128'],
    ['::ffff:10.1.0.0/112', '10.1.0.0/16'],
    ['::ffff:192.0.2.9', '192.0.2.9/32'],
    ['::ffff:0:0/96', '0.0.0.0/0'],
  ])('%s is %s', (raw, canonical) => {
    expect(normalizeCidr(raw)).toBe(canonical);
  });

  it('refuses host bits, naming the network', () => {
    const error = refusal('10.1.2.3/8');
    expect(error.code).toBe('ERR_INVALID_FIELD');
    expect(error.status).toBe(400);
    expect(error.message).toContain('host bits');
    expect(error.message).toContain('10.0.0.0/8');
    expect(error.details).toEqual({ field: 'cidr' });
    expect(refusal('2001:db8::1/32').message).toContain('2001:db8::/32');
    expect(refusal('192.168.1.129/25').message).toContain('192.168.1.128/25');
  });

  it.each([
    '',
    ' 10.0.0.0/8',
    '10.0.0.0/8 ',
    '10.1',
    '10.0.0.0.0',
    '010.0.0.1',
    '0x0a.0.0.1',
    '256.0.0.0',
    '10.0.0.0/33',
    '10.0.0.0/08',
    '10.0.0.0/',
    '/8',
    '10.0.0.0/8/8',
    '::/129',
    'fe80::1%eth0',
    '::1.2.3.4',
    '1:2:3:4:5:6:7:8:9',
    'example.com',
    '10.0.0.0/-1',
  ])('refuses %j', (raw) => {
    const error = refusal(raw);
    expect(error.code).toBe('ERR_INVALID_FIELD');
    expect(error.message).toContain(JSON.stringify(raw));
  });
});

describe('cidrContains', () => {
  const address = (text: string) => {
    const parsed = parseCallerAddress(text);
    if (!parsed) throw new Error(`not an address: ${text}`);
    return parsed;
  };

  it('matches addresses inside the range and no others', () => {
    const office = parseCidr('203.0.113.0/24');
    expect(cidrContains(office, address('203.0.113.0'))).toBe(true);
    expect(cidrContains(office, address('203.0.113.255'))).toBe(true);
    expect(cidrContains(office, address('203.0.114.0'))).toBe(false);
    expect(cidrContains(parseCidr('0.0.0.0/0'), address('255.255.255.255'))).toBe(true);
    expect(cidrContains(parseCidr('2001:db8::/32'), address('2001:db8:ffff::1'))).toBe(true);
    expect(cidrContains(parseCidr('2001:db8::/32'), address('2001:db9::1'))).toBe(false);
  });

  it('matches a dual-stack listener’s IPv4-mapped caller against IPv4 rules', () => {
    expect(formatAddress(address('::ffff:127.0.0.2'))).toBe('127.0.0.2');
    expect(cidrContains(parseCidr('127.0.0.2/32'), address('::ffff:127.0.0.2'))).toBe(true);
    expect(cidrContains(parseCidr('127.0.0.1'), address('::ffff:127.0.0.2'))).toBe(false);
  });

  it('never matches across families', () => {
    expect(cidrContains(parseCidr('::/0'), address('127.0.0.1'))).toBe(false);
    expect(cidrContains(parseCidr('0.0.0.0/0'), address('::1'))).toBe(false);
  });

  it('reads callers’ addresses strictly, dropping a zone', () => {
    expect(formatAddress(address('fe80::1%lo'))).toBe('fe80::1');
    expect(parseCallerAddress(undefined)).toBeUndefined();
    expect(parseCallerAddress('')).toBeUndefined();
    expect(parseCallerAddress('10.1')).toBeUndefined();
    expect(parseCallerAddress('not-an-ip')).toBeUndefined();
  });
});
