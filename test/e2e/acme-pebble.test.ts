import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { queueRenewals } from '../../src/control-plane/certs/renewals.ts';
import { type CertRunner, createCertRunner } from '../../src/control-plane/certs/runner.ts';
import type { Service } from '../../src/service.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { freePort } from '../helpers/free-port.ts';
import { NAME_SERVERS, startParentZone } from '../helpers/parent-zone.ts';
import { type Pebble, startPebble } from '../helpers/pebble.ts';
import { servedFingerprint } from '../helpers/served-certificate.ts';
import { apiClient, startTestService, TEST_BOOTSTRAP_KEY } from '../helpers/service.ts';
import { pgliteStore, postgresStore, type TestStore } from '../helpers/stores.ts';

// Certificates from a real ACME server: Debian's pebble validates DNS-01 against the service's
// own authoritative DNS. A test "parent zone" (a DNS server of its own) says which domains are
// delegated to the service's name servers. The runner's clock is injected to reach renewals and
// retries without waiting.

function policy(private_key_type: 'rsa' | 'ecdsa') {
  return { certificate_management_policy: { authority: 'letsencrypt', private_key_type } };
}

describe('ACME provisioning against pebble', () => {
  let store: TestStore;
  let service: Service;
  let pebble: Pebble;
  let parent: Awaited<ReturnType<typeof startParentZone>>;
  const delegated = new Map<string, string[]>();
  let now = new Date();
  let runner: CertRunner;
  /** The service's settings, pebble's ACME server among them. */
  let env: Record<string, string>;
  /** How many times the runner said a certificate was committed (the edge forgets its choices). */
  let issuedCalls = 0;
  const logLines: string[] = [];
  const api = () => apiClient(service.url, TEST_BOOTSTRAP_KEY);

  beforeAll(async () => {
    store = await pgliteStore();
    const dnsPort = await freePort();
    pebble = await startPebble(dnsPort);
    parent = await startParentZone(delegated);
    env = {
      ...store.env,
      DNS_PORT: String(dnsPort),
      REGIONS: 'us,eu',
      NAME_SERVERS: NAME_SERVERS.join(','),
      ACME_DIRECTORY_URL: pebble.directoryUrl,
      ACME_CA_FILE: pebble.caFile,
      DELEGATION_RESOLVER: `127.0.0.1:${parent.port}`,
      CERT_POLL_MS: '0',
    };
    service = await startTestService(store, env);
    runner = createCertRunner({
      db: service.db,
      config: loadConfig(env),
      keyring: service.keyring,
      logger: createLogger('info', { write: (line: string) => void logLines.push(line) }),
      clock: () => now,
      onIssued: () => issuedCalls++,
    });
  }, 60_000);
  afterAll(async () => {
    await service?.close();
    await parent?.close();
    await pebble?.close();
    await store?.cleanup();
  });

  async function ingress(id: string) {
    return (await api()('GET', `/agent_ingresses/${id}`)).body;
  }
  async function certificates() {
    return (await api()('GET', '/tls_certificates')).body.tls_certificates as any[];
  }

  it('issues one certificate covering the domain, its region domains and wildcards under them', async () => {
    delegated.set('tunnels.example.com', NAME_SERVERS);
    const created = await api()('POST', '/agent_ingresses', {
      domain: 'tunnels.example.com',
      ...policy('ecdsa'),
    });
    expect(created.status).toBe(201);
    expect(created.body.certificate_management_status.provisioning_job.msg).toMatch(/queued/);
    expect(await runner.runOnce()).toBe(true);
    expect(issuedCalls).toBe(1);
    const shown = await ingress(created.body.id);
    expect(shown.certificate_management_status.provisioning_job).toBeNull();
    const [certificate] = await certificates();
    expect(certificate.subject_alternative_names.dns_names.sort()).toEqual(
      [
        'tunnels.example.com',
        'us.tunnels.example.com',
        '*.us.tunnels.example.com',
        'eu.tunnels.example.com',
        '*.eu.tunnels.example.com',
      ].sort(),
    );
    expect(certificate.private_key_type).toBe('ecdsa');
    expect(certificate.issuer_common_name).toMatch(/^Pebble Intermediate CA/);
    expect(certificate.issued_at).toBe(now.toISOString());
    const renewsAt = new Date(shown.certificate_management_status.renews_at).getTime();
    const notAfter = new Date(certificate.not_after).getTime();
    expect(notAfter - renewsAt).toBe(30 * 86_400_000);
    // The event carries the certificate as GET shows it; the key is sealed in the store.
    const events = await service.db.query<{ envelope: any }>(
      `SELECT envelope FROM audit_outbox WHERE event_type = 'tls_certificate_created.v0'`,
    );
    expect(events.rows.map((row) => row.envelope.object.id)).toEqual([certificate.id]);
    const rows = await service.db.query<{ secret: string }>(
      'SELECT secret FROM account_objects WHERE id = $1',
      [certificate.id],
    );
    expect(rows.rows[0].secret).toMatch(/^enc:v1:/);
    // Neither the API, the event nor the runner's log lines carry a private key.
    expect(logLines.join('')).toContain(certificate.id);
    const everything = JSON.stringify([events.rows, shown, await certificates(), logLines]);
    expect(everything).not.toMatch(/PRIVATE KEY/);
    // Nothing is left in DNS once validated.
    const left = await service.db.query('SELECT * FROM acme_challenges');
    expect(left.rows).toEqual([]);
    // The edge's HTTPS listener serves it for the domain and names under a region domain.
    const leaf = new X509Certificate(certificate.certificate_pem).fingerprint256;
    for (const name of ['tunnels.example.com', 'app.eu.tunnels.example.com']) {
      expect(await servedFingerprint(service.edgeHttpsPort!, name)).toBe(leaf);
    }
  }, 60_000);

  it('renews at renews_at, as the injected clock reaches it', async () => {
    const [ingressRow] = (await api()('GET', '/agent_ingresses')).body.ingresses;
    const before = ingressRow.certificate_management_status.renews_at;
    const [first] = await certificates();
    expect(await runner.runOnce()).toBe(false);
    now = new Date(new Date(before).getTime() + 1000);
    expect(await runner.runOnce()).toBe(true);
    const after = (await ingress(ingressRow.id)).certificate_management_status;
    expect(after.provisioning_job).toBeNull();
    // Issued within the same second, the new certificate may end when the old one does.
    expect(new Date(after.renews_at).getTime()).toBeGreaterThanOrEqual(new Date(before).getTime());
    // The new certificate replaces the old one, which is deleted with its event.
    const [renewed] = await certificates();
    expect(renewed.id).not.toBe(first.id);
    expect(renewed.serial_number).not.toBe(first.serial_number);
    const deleted = await service.db.query<{ envelope: any }>(
      `SELECT envelope FROM audit_outbox WHERE event_type = 'tls_certificate_deleted.v0'`,
    );
    expect(deleted.rows.map((row) => row.envelope.object.id)).toEqual([first.id]);
    // The CA dates the new certificate by the real clock: back to it, nothing is due.
    now = new Date();
    expect(await runner.runOnce()).toBe(false);
  }, 60_000);

  it('re-issues on a policy change, and stops with a null policy', async () => {
    const [ingressRow] = (await api()('GET', '/agent_ingresses')).body.ingresses;
    const patched = await api()('PATCH', `/agent_ingresses/${ingressRow.id}`, policy('rsa'));
    expect(patched.status).toBe(200);
    expect(await runner.runOnce()).toBe(true);
    expect((await certificates()).map((c) => c.private_key_type)).toEqual(['rsa']);
    const off = await api()('PATCH', `/agent_ingresses/${ingressRow.id}`, {
      certificate_management_policy: null,
    });
    expect(off.body.certificate_management_status).toBeNull();
    now = new Date(now.getTime() + 10 * 365 * 86_400_000);
    expect(await runner.runOnce()).toBe(false);
    expect(await certificates()).toHaveLength(1);
  }, 60_000);

  it('fails with DNS_ERROR while the parent does not delegate, and issues once it does', async () => {
    const created = await api()('POST', '/agent_ingresses', {
      domain: 'undelegated.example.net',
      ...policy('ecdsa'),
    });
    delegated.set('undelegated.example.net', ['ns.elsewhere.example']);
    expect(await runner.runOnce()).toBe(true);
    const job = (await ingress(created.body.id)).certificate_management_status.provisioning_job;
    expect(job.error_code).toBe('DNS_ERROR');
    expect(job.msg).toContain('is not delegated to this service');
    expect(job.msg).toContain('ns.elsewhere.example');
    expect(new Date(job.retries_at).getTime()).toBe(now.getTime() + 30_000);
    // Not due yet: nothing runs; the user delegates, then a PATCH makes it due at once.
    expect(await runner.runOnce()).toBe(false);
    delegated.set('undelegated.example.net', NAME_SERVERS);
    const patched = await api()('PATCH', `/agent_ingresses/${created.body.id}`, {
      description: 'delegated now',
    });
    const due = patched.body.certificate_management_status.provisioning_job.retries_at;
    expect(new Date(due).getTime()).toBeLessThanOrEqual(Date.now());
    now = new Date();
    expect(await runner.runOnce()).toBe(true);
    const status = (await ingress(created.body.id)).certificate_management_status;
    expect([status.provisioning_job, typeof status.renews_at]).toEqual([null, 'string']);
  }, 60_000);

  it('fails with INTERNAL_ERROR and backs off while the ACME server is down, then issues', async () => {
    await pebble.stop();
    delegated.set('later.example.org', NAME_SERVERS);
    const created = await api()('POST', '/agent_ingresses', {
      domain: 'later.example.org',
      ...policy('rsa'),
    });
    const delays: number[] = [];
    for (let attempt = 0; attempt < 3; attempt++) {
      expect(await runner.runOnce()).toBe(true);
      const job = (await ingress(created.body.id)).certificate_management_status.provisioning_job;
      expect(job.error_code).toBe('INTERNAL_ERROR');
      expect(job.msg).toMatch(
        /^could not obtain a certificate from 127\.0\.0\.1:\d+: .*the ACME directory does not answer \(ECONNREFUSED\)/,
      );
      delays.push(new Date(job.retries_at).getTime() - now.getTime());
      now = new Date(job.retries_at);
    }
    expect(delays).toEqual([30_000, 60_000, 120_000]);
    await pebble.start();
    expect(await runner.runOnce()).toBe(true);
    const status = (await ingress(created.body.id)).certificate_management_status;
    expect([status.provisioning_job, typeof status.renews_at]).toEqual([null, 'string']);
  }, 60_000);

  it('keeps the status of a reserved domain in its fields', async () => {
    const created = await api()('POST', '/reserved_domains', {
      domain: 'shop.agent-ingress.example',
      ...policy('ecdsa'),
    });
    expect(created.status).toBe(201);
    expect(await runner.runOnce()).toBe(true);
    const shown = (await api()('GET', `/reserved_domains/${created.body.id}`)).body;
    expect(shown.certificate_management_status.provisioning_job).toBeNull();
    expect(typeof shown.certificate_management_status.renews_at).toBe('string');
    const newest = (await certificates()).find((c) =>
      c.subject_alternative_names.dns_names.includes('shop.agent-ingress.example'),
    );
    expect(newest.subject_alternative_names.dns_names).toEqual(['shop.agent-ingress.example']);
    // Its renewal shows as queued in its fields, then runs.
    now = new Date(new Date(shown.certificate_management_status.renews_at).getTime() + 1000);
    // Due too: the two managed ingresses of the tests above (the first one's policy is off).
    expect(await queueRenewals(service.db, now)).toBe(3);
    const queued = (await api()('GET', `/reserved_domains/${created.body.id}`)).body;
    expect(queued.certificate_management_status.provisioning_job.msg).toBe(
      'certificate renewal for shop.agent-ingress.example is queued',
    );
    // Run them on the real clock: the CA dates the new certificates by it.
    now = new Date();
    let runs = 0;
    while ((await runner.runOnce()) && runs < 10) runs += 1;
    expect(runs).toBe(3);
    const renewed = (await api()('GET', `/reserved_domains/${created.body.id}`)).body;
    expect(renewed.certificate_management_status.provisioning_job).toBeNull();
  }, 60_000);

  it('fails saying so while no ACME server is configured, and runs once one is, at the next start', async () => {
    delegated.set('unconfigured.example.org', NAME_SERVERS);
    const created = await api()('POST', '/agent_ingresses', {
      domain: 'unconfigured.example.org',
      ...policy('ecdsa'),
    });
    const runnerWith = (settings: Record<string, string>) =>
      createCertRunner({
        db: service.db,
        config: loadConfig(settings),
        keyring: service.keyring,
        logger: createLogger('silent'),
        clock: () => now,
      });
    // A bare start orders from no CA: the default is none, and the job says what to set.
    const { ACME_DIRECTORY_URL: _, ...bare } = env;
    expect(loadConfig(bare).acmeDirectoryUrl).toBe('');
    expect(await runnerWith(bare).runOnce()).toBe(true);
    const job = (await ingress(created.body.id)).certificate_management_status.provisioning_job;
    expect(job.error_code).toBe('INTERNAL_ERROR');
    expect(job.msg).toMatch(
      /^no ACME server is configured: set ACME_DIRECTORY_URL \(Let's Encrypt: https:\/\/acme-v02\.api\.letsencrypt\.org\/directory; for local tries, pebble: docs\/dns-and-certificates\.md#pebble\) and restart; trying again at /,
    );
    expect(new Date(job.retries_at).getTime()).toBe(now.getTime() + 30_000);
    // Started with one, a runner takes the job at once, not at retries_at.
    const configured = runnerWith(env);
    configured.start();
    await configured.close();
    const status = (await ingress(created.body.id)).certificate_management_status;
    expect([status.provisioning_job, typeof status.renews_at]).toEqual([null, 'string']);
  }, 60_000);
});

describe('two instances on one PostgreSQL', () => {
  let store: TestStore;
  let pebble: Pebble;
  let parent: Awaited<ReturnType<typeof startParentZone>>;
  const services: Service[] = [];
  const delegated = new Map<string, string[]>();

  beforeAll(async () => {
    store = await postgresStore();
    const dnsPorts = [await freePort(), await freePort()];
    // pebble asks the first instance; the second's challenges reach it through the store.
    pebble = await startPebble(dnsPorts[0]);
    parent = await startParentZone(delegated);
    for (const port of dnsPorts) {
      const service = await startTestService(store, {
        DNS_PORT: String(port),
        REGIONS: 'us',
        NAME_SERVERS: NAME_SERVERS.join(','),
        ACME_DIRECTORY_URL: pebble.directoryUrl,
        ACME_CA_FILE: pebble.caFile,
        DELEGATION_RESOLVER: `127.0.0.1:${parent.port}`,
        CERT_POLL_MS: '50',
      });
      services.push(service);
    }
  }, 60_000);
  afterAll(async () => {
    for (const service of services) await service.close();
    await parent?.close();
    await pebble?.close();
    await store?.cleanup();
  });

  it('issues each certificate once, whichever instance runs its job', async () => {
    const domains = ['a.example.com', 'b.example.com', 'c.example.com', 'd.example.com'];
    const ids: string[] = [];
    for (const [i, domain] of domains.entries()) {
      delegated.set(domain, NAME_SERVERS);
      const api = apiClient(services[i % 2].url, TEST_BOOTSTRAP_KEY);
      const created = await api('POST', '/agent_ingresses', { domain, ...policy('ecdsa') });
      expect(created.status).toBe(201);
      ids.push(created.body.id);
    }
    const api = apiClient(services[1].url, TEST_BOOTSTRAP_KEY);
    const deadline = Date.now() + 45_000;
    let statuses: any[] = [];
    while (Date.now() < deadline) {
      statuses = await Promise.all(
        ids.map(async (id) => (await api('GET', `/agent_ingresses/${id}`)).body),
      );
      if (statuses.every((s) => s.certificate_management_status.renews_at !== null)) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(statuses.map((s) => s.certificate_management_status.provisioning_job)).toEqual(
      ids.map(() => null),
    );
    const certificates = (await api('GET', '/tls_certificates')).body.tls_certificates as any[];
    expect(certificates.map((c) => c.subject_common_name).sort()).toEqual(domains);
    const events = await services[0].db.query(
      `SELECT 1 FROM audit_outbox WHERE event_type = 'tls_certificate_created.v0'`,
    );
    expect(events.rows).toHaveLength(domains.length);
    // Nothing failed on the way: no instance refused another's challenge, no account race.
    const jobs = await services[0].db.query<{ state: string; attempts: number }>(
      'SELECT state, attempts FROM jobs',
    );
    expect(jobs.rows).toEqual(domains.map(() => ({ state: 'done', attempts: 0 })));
  }, 60_000);
});
