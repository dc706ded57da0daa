import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/service.ts';
import { expectError } from '../helpers/expect-error.ts';
import {
  type ApiClient,
  apiClient,
  auditEventsOf,
  otherAccountClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { STORES, type TestStore } from '../helpers/stores.ts';

// Two families on the account-object layer: tunnel credentials (a token shown once, kept as
// its hash) and reserved domains (service subdomains, custom domains with their CNAME targets,
// certificates by upload or by policy).

let counter = 0;
const unique = () => `t${Date.now().toString(36)}${counter++}`;

describe.each(STORES)('tunnel credentials and reserved domains on $kind', ({ open }) => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let other: ApiClient;

  beforeAll(async () => {
    store = await open();
    service = await startTestService(store);
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    other = await otherAccountClient(service);
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  const auditOf = (id: string) => auditEventsOf(service, id);

  describe('/credentials', () => {
    it('shows the authtoken once and keeps only its SHA-256', async () => {
      const created = await api('POST', '/credentials', {
        description: 'laptop',
        acl: ['bind:*.Example.COM', '  bind:app.example.org '],
      });
      expect(created.status).toBe(201);
      const { token, ...rest } = created.body;
      expect(token).toMatch(/^cr_[A-Za-z0-9_-]{43}$/);
      expect(rest).toEqual({
        id: expect.stringMatching(/^cr_/),
        uri: `${service.url}/credentials/${created.body.id}`,
        created_at: expect.any(String),
        description: 'laptop',
        metadata: '',
        acl: ['bind:*.example.com', 'bind:app.example.org'],
        owner_id: null,
      });
      const got = await api('GET', `/credentials/${created.body.id}`);
      expect(got.body).toEqual({ ...rest, token: null });

      const stored = await service.db.query<{ unique_key: string; fields: unknown; secret: null }>(
        'SELECT unique_key, fields, secret FROM account_objects WHERE id = $1',
        [created.body.id],
      );
      const hash = createHash('sha256').update(token).digest('base64url');
      expect(stored.rows[0].unique_key).toBe(hash);
      expect(JSON.stringify(stored.rows)).not.toContain(token);
      const audit = await auditOf(created.body.id);
      expect(audit.map((event) => event.type)).toEqual(['tunnel_credential_created.v0']);
      expect(audit[0].object).toEqual({ ...rest, token: null });
      expect(JSON.stringify(audit)).not.toContain(token);
    });

    it('refuses an invalid acl rule, naming it, and changes the acl on update', async () => {
      expectError(
        await api('POST', '/credentials', { acl: ['bind:ok.example.com', 'tcp:22'] }),
        400,
        'ERR_INVALID_FIELD',
        '"acl[1]"',
      );
      expectError(
        await api('POST', '/credentials', { acl: 'bind:x.com' }),
        400,
        'ERR_INVALID_FIELD',
      );
      expectError(await api('POST', '/credentials', { acl: ['bind:*'] }), 400, 'ERR_INVALID_FIELD');
      expectError(await api('POST', '/credentials', { token: 'mine' }), 400, 'ERR_UNKNOWN_FIELD');
      const created = await api('POST', '/credentials', { acl: ['*'] });
      expect(created.body.acl).toEqual(['*']);
      const updated = await api('PATCH', `/credentials/${created.body.id}`, {
        id: created.body.id,
        acl: ['bind:only.example.net'],
        metadata: 'm',
      });
      expect(updated.status).toBe(200);
      expect(updated.body).toMatchObject({
        acl: ['bind:only.example.net'],
        metadata: 'm',
        token: null,
      });
      expect((await api('DELETE', `/credentials/${created.body.id}`)).status).toBe(204);
      expectError(await api('GET', `/credentials/${created.body.id}`), 404, 'ERR_NOT_FOUND');
      expect((await auditOf(created.body.id)).map((event) => event.type)).toEqual([
        'tunnel_credential_created.v0',
        'tunnel_credential_updated.v0',
        'tunnel_credential_deleted.v0',
      ]);
    });
  });

  describe('/reserved_domains', () => {
    it('gives a service subdomain no CNAME, a custom domain its targets', async () => {
      const sub = await api('POST', '/reserved_domains', {
        domain: `${unique()}.agent-ingress.example`,
      });
      expect(sub.status).toBe(201);
      expect(sub.body).toMatchObject({
        cname_target: null,
        acme_challenge_cname_target: null,
        region: null,
        certificate: null,
        certificate_management_policy: null,
        certificate_management_status: null,
      });
      const custom = await api('POST', '/reserved_domains', {
        domain: `App.${unique()}.example.com`,
      });
      expect(custom.body.domain).toMatch(/^app\./);
      expect(custom.body.cname_target).toMatch(/^[0-9a-f]{16}\.cname\.agent-ingress\.example$/);
      expect(custom.body.acme_challenge_cname_target).toBeNull();
      const wildcard = await api('POST', '/reserved_domains', {
        domain: `*.${unique()}.example.com`,
      });
      expect(wildcard.status).toBe(201);
      expect(wildcard.body.acme_challenge_cname_target).toMatch(/\.acme\.agent-ingress\.example$/);
      expectError(
        await api('POST', '/reserved_domains', { domain: `*.${unique()}.agent-ingress.example` }),
        400,
        'ERR_INVALID_DOMAIN',
      );
      expectError(
        await api('POST', '/reserved_domains', { domain: 'not a domain' }),
        400,
        'ERR_INVALID_DOMAIN',
      );
      expectError(
        await api('POST', '/reserved_domains', { domain: 'x.example.com', region: 'mars' }),
        400,
        'ERR_INVALID_FIELD',
      );
      expect(
        (await api('POST', '/reserved_domains', { domain: `${unique()}.example.com`, region: '' }))
          .body.region,
      ).toBeNull();
    });

    it('keeps a domain to one holder across accounts, ingresses included', async () => {
      const domain = `${unique()}.example.com`;
      expect((await api('POST', '/reserved_domains', { domain })).status).toBe(201);
      expectError(await other('POST', '/reserved_domains', { domain }), 409, 'ERR_ALREADY_EXISTS');
      expectError(await other('POST', '/agent_ingresses', { domain }), 409, 'ERR_DOMAIN_TAKEN');
      const ingress = `${unique()}.example.com`;
      expect((await api('POST', '/agent_ingresses', { domain: ingress })).status).toBe(201);
      expectError(
        await other('POST', '/reserved_domains', { domain: ingress }),
        409,
        'ERR_DOMAIN_TAKEN',
      );
    });

    it('queues a certificate for a policy, and takes it off with the sub-route', async () => {
      const created = await api('POST', '/reserved_domains', {
        domain: `${unique()}.example.com`,
        certificate_management_policy: { private_key_type: 'ecdsa' },
      });
      expect(created.body.certificate_management_policy).toEqual({
        authority: 'letsencrypt',
        private_key_type: 'ecdsa',
      });
      expect(created.body.certificate_management_status).toEqual({
        renews_at: null,
        provisioning_job: {
          msg: `certificate provisioning for ${created.body.domain} is queued`,
          started_at: expect.any(String),
          retries_at: null,
        },
      });
      const jobs = () =>
        service.db.query<{ state: string }>(
          'SELECT state FROM jobs WHERE subject_id = $1 ORDER BY created_at',
          [created.body.id],
        );
      expect((await jobs()).rows.map((job) => job.state)).toEqual(['queued']);
      expectError(
        await api('PATCH', `/reserved_domains/${created.body.id}`, { domain: 'other.example.com' }),
        400,
        'ERR_FIELD_NOT_UPDATABLE',
      );
      const off = await api(
        'DELETE',
        `/reserved_domains/${created.body.id}/certificate_management_policy`,
      );
      expect(off.status).toBe(204);
      const now = await api('GET', `/reserved_domains/${created.body.id}`);
      expect(now.body).toMatchObject({
        certificate_management_policy: null,
        certificate_management_status: null,
      });
      expect((await jobs()).rows.map((job) => job.state)).toEqual(['cancelled']);
      const audit = await auditOf(created.body.id);
      expect(audit.map((event) => event.type)).toEqual(['domain_created.v0', 'domain_updated.v0']);
      expect(audit[1].object).toEqual(now.body);
      expect((await api('DELETE', `/reserved_domains/${created.body.id}/certificate`)).status).toBe(
        204,
      );
    });

    it('refuses a certificate that is not the caller’s, and both certificate sources at once', async () => {
      expectError(
        await api('POST', '/reserved_domains', {
          domain: `${unique()}.example.com`,
          certificate_id: 'cert_x',
        }),
        400,
        'ERR_INVALID_FIELD',
        'was not found',
      );
      const created = await api('POST', '/reserved_domains', {
        domain: `${unique()}.example.com`,
        certificate_id: null,
      });
      expect(created.status).toBe(201);
      expect(created.body.certificate).toBeNull();
      expectError(await other('GET', `/reserved_domains/${created.body.id}`), 404, 'ERR_NOT_FOUND');
    });
  });
});
