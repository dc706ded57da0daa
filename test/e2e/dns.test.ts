import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/service.ts';
import { dig } from '../helpers/dig.ts';
import { freePort } from '../helpers/free-port.ts';
import { apiClient, startTestService, TEST_BOOTSTRAP_KEY } from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';

// The authoritative DNS answers what the store holds, asked with a real dig over UDP and TCP.

const ENV = {
  REGIONS: 'us,eu',
  EDGE_ADDRESSES: 'us=192.0.2.10|2001:db8::10,eu=192.0.2.20',
  NAME_SERVERS: 'ns1.agent-ingress.example,ns2.agent-ingress.example',
  SERVICE_DOMAIN: 'agent-ingress.example',
  // Long enough that only the in-process invalidation can make a change visible in the test.
  DNS_CACHE_MS: '600000',
  CERT_POLL_MS: '0',
};

describe.each(['udp', 'tcp'] as const)('authoritative DNS over %s', (transport) => {
  let store: TestStore;
  let service: Service;
  let port: number;
  const api = () => apiClient(service.url, TEST_BOOTSTRAP_KEY);
  const ask = (name: string, type: string) => dig(port, name, type, transport);

  beforeAll(async () => {
    store = await pgliteStore();
    port = await freePort();
    service = await startTestService(store, { ...ENV, DNS_PORT: String(port) });
    const ingress = await api()('POST', '/agent_ingresses', { domain: 'tunnels.example.com' });
    expect(ingress.status).toBe(201);
    const reserved = await api()('POST', '/reserved_domains', { domain: 'app.example.org' });
    expect(reserved.status).toBe(201);
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  it('answers SOA and NS for an Agent Ingress domain with the ns_targets', async () => {
    const soa = await ask('tunnels.example.com', 'SOA');
    expect(soa.status).toBe('NOERROR');
    expect(soa.aa).toBe(true);
    expect(soa.answers).toEqual([
      {
        name: 'tunnels.example.com.',
        type: 'SOA',
        data: expect.stringMatching(
          /^ns1\.agent-ingress\.example\. hostmaster\.tunnels\.example\.com\. /,
        ),
      },
    ]);
    const ns = await ask('tunnels.example.com', 'NS');
    expect(ns.answers.map((r) => r.data).sort()).toEqual([
      'ns1.agent-ingress.example.',
      'ns2.agent-ingress.example.',
    ]);
  });

  it("answers A and AAAA for region domains and names under them with the region's edge", async () => {
    expect((await ask('us.tunnels.example.com', 'A')).answers).toEqual([
      { name: 'us.tunnels.example.com.', type: 'A', data: '192.0.2.10' },
    ]);
    expect((await ask('foo.eu.tunnels.example.com', 'A')).answers).toEqual([
      { name: 'foo.eu.tunnels.example.com.', type: 'A', data: '192.0.2.20' },
    ]);
    expect((await ask('a.b.us.tunnels.example.com', 'AAAA')).answers).toEqual([
      { name: 'a.b.us.tunnels.example.com.', type: 'AAAA', data: '2001:db8::10' },
    ]);
    // eu has no IPv6 edge: the name exists, without AAAA records (NODATA with the SOA).
    const none = await ask('eu.tunnels.example.com', 'AAAA');
    expect([none.status, none.answers, none.authority.map((r) => r.type)]).toEqual([
      'NOERROR',
      [],
      ['SOA'],
    ]);
  });

  it('answers NXDOMAIN for a name of a served zone that does not exist', async () => {
    const missing = await ask('nope.tunnels.example.com', 'A');
    expect([missing.status, missing.aa, missing.authority.map((r) => r.type)]).toEqual([
      'NXDOMAIN',
      true,
      ['SOA'],
    ]);
  });

  it('answers a reserved custom domain and its CNAME target', async () => {
    const listed = await api()('GET', '/reserved_domains');
    const target = listed.body.reserved_domains[0].cname_target as string;
    expect(target).toMatch(/\.cname\.agent-ingress\.example$/);
    for (const name of ['app.example.org', target]) {
      const a = await ask(name, 'A');
      expect(a.answers.map((r) => r.data).sort()).toEqual(['192.0.2.10', '192.0.2.20']);
    }
    expect((await ask('app.example.org', 'SOA')).status).toBe('NOERROR');
  });

  it('answers TXT _acme-challenge only while a DNS-01 challenge is pending', async () => {
    const name = '_acme-challenge.us.tunnels.example.com';
    expect((await ask(name, 'TXT')).answers).toEqual([]);
    await service.db.query(
      `INSERT INTO acme_challenges (name, value, job_id, created_at) VALUES ($1, 'token-a', 'job_1', now()), ($1, 'token-b', 'job_1', now())`,
      [name],
    );
    const txt = await ask(name, 'TXT');
    expect(txt.answers.map((r) => r.data).sort()).toEqual(['"token-a"', '"token-b"']);
    await service.db.query('DELETE FROM acme_challenges WHERE name = $1', [name]);
    expect((await ask(name, 'TXT')).answers).toEqual([]);
  });

  it('REFUSES zones it does not serve', async () => {
    const refused = await ask('example.net', 'A');
    expect([refused.status, refused.aa, refused.answers]).toEqual(['REFUSED', false, []]);
    expect((await ask('com', 'NS')).status).toBe('REFUSED');
  });

  it('serves a new ingress at once and forgets a deleted one at once', async () => {
    const created = await api()('POST', '/agent_ingresses', { domain: 'new.example.io' });
    expect(created.status).toBe(201);
    expect((await ask('new.example.io', 'SOA')).status).toBe('NOERROR');
    expect((await api()('DELETE', `/agent_ingresses/${created.body.id}`)).status).toBe(204);
    expect((await ask('new.example.io', 'SOA')).status).toBe('REFUSED');
  });
});
