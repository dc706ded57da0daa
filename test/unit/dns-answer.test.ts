import dnsPacket, { type Packet } from 'dns-packet';
import { describe, expect, it } from 'vitest';
import { answerQuery } from '../../src/agent-plane/dns/answer.ts';
import { buildZoneData, createZoneCache } from '../../src/agent-plane/dns/zones.ts';
import { loadConfig } from '../../src/config/load.ts';

const config = loadConfig({
  REGIONS: 'us,eu',
  EDGE_ADDRESSES: 'us=192.0.2.1|2001:db8::1,*=192.0.2.9',
  SERVICE_DOMAIN: 'svc.example',
});
const zones = buildZoneData(
  config,
  ['ingress.example.com'],
  [
    { domain: '*.wild.example.org', region: null, cname_target: 'abc.cname.svc.example' },
    { domain: 'shop.svc.example', region: 'eu', cname_target: null },
  ],
);
const sources = {
  zones,
  nameServers: ['ns1.svc.example', 'ns2.svc.example'],
  challenges: async (name: string) => (name === '_acme-challenge.ingress.example.com' ? ['v'] : []),
};

function query(name: string, type: 'A' | 'AAAA' | 'TXT' | 'SOA' | 'NS' | 'MX', flags = 0): Packet {
  return { id: 7, type: 'query', flags, questions: [{ name, type, class: 'IN' }] };
}

async function ask(name: string, type: 'A' | 'AAAA' | 'TXT' | 'SOA' | 'NS' | 'MX') {
  // Through the wire format both ways, as the server does.
  const bytes = dnsPacket.encode(await answerQuery(query(name, type), sources));
  const decoded = dnsPacket.decode(bytes);
  return {
    rcode: (decoded as unknown as { rcode: string }).rcode,
    aa: decoded.flag_aa,
    answers: (decoded.answers ?? []).map((a: any) => `${a.type} ${a.data}`),
    authorities: (decoded.authorities ?? []).map((a: any) => a.type),
  };
}

describe('authoritative answers', () => {
  it('gives region domains their region, others the * addresses', async () => {
    expect((await ask('us.ingress.example.com', 'A')).answers).toEqual(['A 192.0.2.1']);
    expect((await ask('x.y.us.ingress.example.com', 'AAAA')).answers).toEqual(['AAAA 2001:db8::1']);
    expect((await ask('eu.ingress.example.com', 'A')).answers).toEqual(['A 192.0.2.9']);
  });

  it('answers a wildcard reserved domain below its base, and its CNAME target', async () => {
    expect((await ask('a.wild.example.org', 'A')).answers).toEqual(['A 192.0.2.1', 'A 192.0.2.9']);
    expect((await ask('abc.cname.svc.example', 'A')).answers).toEqual([
      'A 192.0.2.1',
      'A 192.0.2.9',
    ]);
    expect((await ask('shop.svc.example', 'A')).answers).toEqual(['A 192.0.2.9']);
  });

  it('separates NXDOMAIN, NODATA and REFUSED', async () => {
    expect(await ask('nothing.ingress.example.com', 'A')).toMatchObject({
      rcode: 'NXDOMAIN',
      aa: true,
      authorities: ['SOA'],
    });
    expect(await ask('us.ingress.example.com', 'MX')).toMatchObject({
      rcode: 'NOERROR',
      answers: [],
      authorities: ['SOA'],
    });
    expect(await ask('ingress.example.net', 'A')).toMatchObject({ rcode: 'REFUSED', aa: false });
  });

  it('answers TXT only from pending challenges', async () => {
    expect((await ask('_acme-challenge.ingress.example.com', 'TXT')).answers).toEqual(['TXT v']);
    expect((await ask('_acme-challenge.shop.svc.example', 'TXT')).rcode).toBe('NXDOMAIN');
  });

  it('echoes the question as asked (0x20) and answers only standard queries', async () => {
    const answer = await answerQuery(query('US.Ingress.example.com', 'A'), sources);
    expect(answer.answers?.[0].name).toBe('US.Ingress.example.com');
    const notify = await answerQuery(query('ingress.example.com', 'SOA', 4 << 11), sources);
    expect((notify.flags ?? 0) & 0xf).toBe(4); // NOTIMP
  });
});

describe('regions', () => {
  it('serves a region added to the configuration under every ingress domain', () => {
    const grown = loadConfig({ REGIONS: 'us,eu,ap', SERVICE_DOMAIN: 'svc.example' });
    const data = buildZoneData(grown, ['ingress.example.com'], []);
    expect([...data.hosts.keys()]).toEqual([
      'us.ingress.example.com',
      'eu.ingress.example.com',
      'ap.ingress.example.com',
    ]);
  });
});

describe('zone cache', () => {
  it('reads the store again after ttl or invalidate, and not in between', async () => {
    let reads = 0;
    let time = 0;
    const cache = createZoneCache(
      async () => ({ ...zones, reads: ++reads }),
      1000,
      () => time,
    );
    await cache.get();
    time = 999;
    await cache.get();
    expect(reads).toBe(1);
    time = 1000;
    await cache.get();
    expect(reads).toBe(2);
    cache.invalidate();
    await cache.get();
    expect(reads).toBe(3);
  });

  it('does not keep a failed read', async () => {
    let fail = true;
    const cache = createZoneCache(async () => {
      if (fail) throw new Error('store down');
      return zones;
    }, 60_000);
    await expect(cache.get()).rejects.toThrow('store down');
    fail = false;
    await expect(cache.get()).resolves.toBe(zones);
  });
});

describe('EDGE_ADDRESSES', () => {
  it('defaults every region to 127.0.0.1 and refuses what is not an address', () => {
    expect(loadConfig({}).edgeAddresses).toEqual({ '*': ['127.0.0.1'] });
    expect(() => loadConfig({ EDGE_ADDRESSES: 'us=not-an-ip' })).toThrow(/EDGE_ADDRESSES/);
    expect(() => loadConfig({ DELEGATION_RESOLVER: '8.8.8.8' })).toThrow(/host:port/);
  });
});
