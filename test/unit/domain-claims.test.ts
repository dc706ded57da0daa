import { describe, expect, it } from 'vitest';
import {
  covers,
  type DomainClaim,
  familyOf,
  inertClaims,
  overlap,
} from '../../src/shared/domains/claims.ts';
import { isPublicSuffix } from '../../src/shared/domains/public-suffix.ts';
import { serviceNameRefusal } from '../../src/shared/domains/service-names.ts';

// The rules of name claims as pure functions: overlaps, which of two overlapping claims of two
// accounts holds, what a claim covers, public suffixes and the service's own names.

const at = (second: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, second));
const claim = (
  id: string,
  accountId: string,
  domain: string,
  second: number,
  kind: DomainClaim['kind'] = 'reserved_domain',
): DomainClaim => ({ id, accountId, kind, domain, createdAt: at(second) });

describe('name claims', () => {
  it('overlap at, above and under, never beside; one family holds every overlapping name', () => {
    expect(overlap('a.com', 'x.a.com')).toBe(true);
    expect(overlap('x.a.com', 'a.com')).toBe(true);
    expect(overlap('a.com', 'a.com')).toBe(true);
    expect(overlap('xa.com', 'a.com')).toBe(false);
    expect(overlap('x.a.com', 'y.a.com')).toBe(false);
    expect(familyOf('deep.x.a.com')).toBe(familyOf('a.com'));
  });

  it('keeps the older of two overlapping claims of two accounts, whichever is deeper', () => {
    const claims = [
      claim('old-parent', 'A', 'a.com', 1, 'agent_ingress'),
      claim('new-child', 'B', '*.us.a.com', 2),
      claim('old-child', 'C', 'x.b.com', 1),
      claim('new-parent', 'D', 'b.com', 2, 'agent_ingress'),
      claim('same-account', 'A', 'shop.a.com', 3),
      claim('beside', 'E', 'c.com', 0),
    ];
    expect([...inertClaims(claims)].sort()).toEqual(['new-child', 'new-parent']);
  });

  it('covers: an ingress its tree, a reserved name itself, a wildcard the names under it', () => {
    const ingress = claim('i', 'A', 'a.com', 1, 'agent_ingress');
    expect([covers(ingress, 'a.com'), covers(ingress, 'x.us.a.com')]).toEqual([true, true]);
    const exact = claim('r', 'A', 'shop.b.com', 1);
    expect([covers(exact, 'shop.b.com'), covers(exact, 'x.shop.b.com')]).toEqual([true, false]);
    const wildcard = claim('w', 'A', '*.c.com', 1);
    expect([covers(wildcard, 'c.com'), covers(wildcard, 'x.y.c.com')]).toEqual([false, true]);
  });

  it('knows public suffixes of both sections, and TLDs the list does not name', () => {
    for (const name of ['com', 'co.uk', 'github.io', 'ngrok.app', 'test', 'foo.kawasaki.jp']) {
      expect(isPublicSuffix(name), name).toBe(true);
    }
    for (const name of ['google.com', 'a.co.uk', 'myname.github.io', 'a-corp.test', 'x.example']) {
      expect(isPublicSuffix(name), name).toBe(false);
    }
  });

  it('refuses the service’s names, above and under, and allows its subdomains to reserve', () => {
    const config = {
      serviceDomain: 'ingress.corp.example',
      nameServers: ['ns1.dns-host.example', 'ns2.dns-host.example'],
      publicUrl: 'https://api.corp.example',
      internalUrl: 'http://10.0.0.5:9000',
    };
    for (const name of [
      'ingress.corp.example',
      'corp.example',
      'cname.ingress.corp.example',
      'x.acme.ingress.corp.example',
      'eu.tcp.ingress.corp.example',
      'dns-host.example',
      'x.ns1.dns-host.example',
      'api.corp.example',
    ]) {
      expect(serviceNameRefusal(config, name, true), name).toBeDefined();
    }
    expect(serviceNameRefusal(config, 'myapp.ingress.corp.example', true)).toBeUndefined();
    expect(serviceNameRefusal(config, 'myapp.ingress.corp.example', false)).toBeDefined();
    expect(serviceNameRefusal(config, 'other.example', false)).toBeUndefined();
  });
});
