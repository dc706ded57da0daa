import { Ngrok } from '@ngrok/ngrok-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/service.ts';
import { expectError } from '../helpers/expect-error.ts';
import { clientDelete } from '../helpers/ngrok-client.ts';
import {
  type ApiClient,
  apiClient,
  auditEventsOf,
  otherAccountClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import {
  keygen,
  keygenFingerprint,
  listCertificate,
  sshDir,
  sshKeygen,
} from '../helpers/ssh-keygen.ts';
import { pgliteStore, STORES, type TestStore } from '../helpers/stores.ts';

// The four SSH families over REST: SSH credentials (a public key found by its fingerprint),
// certificate authorities (a key pair whose private half is sealed and never shown), and host
// and user certificates signed by them, checked with ssh-keygen; then ngrok's own client.

const dir = sshDir();
afterAll(() => dir.remove());

async function startWithOtherAccount(store: TestStore) {
  const service = await startTestService(store);
  return {
    service,
    api: apiClient(service.url, TEST_BOOTSTRAP_KEY),
    other: await otherAccountClient(service),
  };
}

describe.each(STORES)('SSH families on $kind', ({ open }) => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let other: ApiClient;

  beforeAll(async () => {
    store = await open();
    ({ service, api, other } = await startWithOtherAccount(store));
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  const auditOf = (id: string) => auditEventsOf(service, id);

  /** The stored row of an object. */
  async function storedRow(id: string) {
    const rows = await service.db.query<{
      unique_key: string | null;
      fields: unknown;
      secret: string | null;
    }>('SELECT unique_key, fields, secret FROM account_objects WHERE id = $1', [id]);
    return rows.rows[0];
  }

  describe('/ssh_credentials', () => {
    it('keeps a key by its ssh-keygen fingerprint, unique across the service, with an acl', async () => {
      const key = await keygen(dir.path, `cred-${store.kind}`, 'ed25519');
      const { fingerprint } = await keygenFingerprint(`${key.path}.pub`);
      const created = await api('POST', '/ssh_credentials', {
        description: 'device 7',
        public_key: key.pub,
        acl: ['bind:*.Example.com'],
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const shown = {
        id: expect.stringMatching(/^sshcr_/),
        uri: `${service.url}/ssh_credentials/${created.body.id}`,
        created_at: expect.any(String),
        description: 'device 7',
        metadata: '',
        public_key: key.pub.trim(),
        acl: ['bind:*.example.com'],
        owner_id: null,
      };
      expect(created.body).toEqual(shown);
      expect((await api('GET', `/ssh_credentials/${created.body.id}`)).body).toEqual(created.body);
      expect((await storedRow(created.body.id)).unique_key).toBe(fingerprint);

      // The same key again, in another form: a clash in this account, and in another.
      const rfc4716 = await sshKeygen('-e', '-f', `${key.path}.pub`);
      expectError(
        await api('POST', '/ssh_credentials', { public_key: rfc4716 }),
        409,
        'ERR_ALREADY_EXISTS',
        'public_key',
      );
      expectError(
        await other('POST', '/ssh_credentials', { public_key: key.pub }),
        409,
        'ERR_ALREADY_EXISTS',
        'registered in another account',
      );
      expectError(await other('GET', `/ssh_credentials/${created.body.id}`), 404, 'ERR_NOT_FOUND');

      const updated = await api('PATCH', `/ssh_credentials/${created.body.id}`, {
        acl: ['*'],
        metadata: 'm',
      });
      expect(updated.body).toEqual({ ...created.body, acl: ['*'], metadata: 'm' });
      expectError(
        await api('PATCH', `/ssh_credentials/${created.body.id}`, { public_key: key.pub }),
        400,
        'ERR_FIELD_NOT_UPDATABLE',
      );
      const list = await api('GET', '/ssh_credentials');
      expect(list.body.ssh_credentials.map((item: { id: string }) => item.id)).toContain(
        created.body.id,
      );
      expect((await api('DELETE', `/ssh_credentials/${created.body.id}`)).status).toBe(204);
      expectError(await api('GET', `/ssh_credentials/${created.body.id}`), 404, 'ERR_NOT_FOUND');
      expect((await api('POST', '/ssh_credentials', { public_key: key.pub })).status).toBe(201);

      const audit = await auditOf(created.body.id);
      expect(audit.map((event) => event.type)).toEqual([
        'ssh_public_key_created.v0',
        'ssh_public_key_updated.v0',
        'ssh_public_key_deleted.v0',
      ]);
      expect(audit[0].object).toEqual(created.body);
    });

    it('refuses weak, unknown and private keys, and invalid acl rules', async () => {
      const small = await keygen(dir.path, `small-${store.kind}`, 'rsa', 1024);
      expectError(
        await api('POST', '/ssh_credentials', { public_key: small.pub }),
        400,
        'ERR_INVALID_FIELD',
        '2048',
      );
      expectError(
        await api('POST', '/ssh_credentials', { public_key: 'ssh-ed25519 AAAA' }),
        400,
        'ERR_INVALID_FIELD',
      );
      expectError(await api('POST', '/ssh_credentials', {}), 400, 'ERR_MISSING_FIELD');
      const key = await keygen(dir.path, `acl-${store.kind}`, 'ecdsa');
      expectError(
        await api('POST', '/ssh_credentials', {
          public_key: key.pub,
          acl: ['bind:ok.example.com', 'bind:a.*.b'],
        }),
        400,
        'ERR_INVALID_FIELD',
        '"acl[1]"',
      );
    });
  });

  describe('/ssh_certificate_authorities and certificates', () => {
    it('generates authorities whose private key is sealed and never shown', async () => {
      const cases = [
        [{}, 'ed25519', 256],
        [{ private_key_type: 'ecdsa', elliptic_curve: 'p384' }, 'ecdsa', 384],
        [{ private_key_type: 'rsa', key_size: 2048 }, 'rsa', 2048],
      ] as const;
      for (const [body, keyType, bits] of cases) {
        const created = await api('POST', '/ssh_certificate_authorities', {
          description: keyType,
          ...body,
        });
        expect(created.status, JSON.stringify(created.body)).toBe(201);
        expect(created.body).toEqual({
          id: expect.stringMatching(/^sshca_/),
          uri: `${service.url}/ssh_certificate_authorities/${created.body.id}`,
          created_at: expect.any(String),
          description: keyType,
          metadata: '',
          public_key: expect.stringMatching(
            /^(ssh-ed25519|ecdsa-sha2-nistp384|ssh-rsa) [A-Za-z0-9+/]+=*$/,
          ),
          key_type: keyType,
        });
        expect(
          (await keygenFingerprint(dir.file(`${created.body.id}.pub`, created.body.public_key)))
            .bits,
        ).toBe(bits);
        const row = await storedRow(created.body.id);
        expect(row.secret).toMatch(/^enc:v1:/);
        expect(JSON.stringify(row)).not.toContain('PRIVATE KEY');
        const updated = await api('PATCH', `/ssh_certificate_authorities/${created.body.id}`, {
          description: 'renamed',
        });
        expect(updated.body).toEqual({ ...created.body, description: 'renamed' });
        expect(
          (await api('DELETE', `/ssh_certificate_authorities/${created.body.id}`)).status,
        ).toBe(204);
        const audit = await auditOf(created.body.id);
        expect(audit.map((event) => event.type)).toEqual([
          'ssh_certificate_authority_created.v0',
          'ssh_certificate_authority_updated.v0',
          'ssh_certificate_authority_deleted.v0',
        ]);
        expect(audit[0].object).toEqual(created.body);
        expect(JSON.stringify(audit)).not.toMatch(
          /PRIVATE KEY|private_key_type|key_size|elliptic_curve/,
        );
      }
    });

    it('refuses unknown key types, sizes and curves, and changes to the key', async () => {
      const refused = [
        { private_key_type: 'dsa' },
        { private_key_type: 'rsa', key_size: 1024 },
        { private_key_type: 'ecdsa', elliptic_curve: 'secp256k1' },
        { private_key_type: 'ed25519', key_size: 4096 },
      ];
      for (const body of refused) {
        expectError(
          await api('POST', '/ssh_certificate_authorities', body),
          400,
          'ERR_INVALID_FIELD',
        );
      }
      const created = await api('POST', '/ssh_certificate_authorities', {
        private_key_type: 'ed25519',
        key_size: 0,
        elliptic_curve: '',
      });
      expect(created.status).toBe(201);
      expectError(
        await api('PATCH', `/ssh_certificate_authorities/${created.body.id}`, {
          private_key_type: 'rsa',
        }),
        400,
        'ERR_FIELD_NOT_UPDATABLE',
      );
      expectError(
        await other('GET', `/ssh_certificate_authorities/${created.body.id}`),
        404,
        'ERR_NOT_FOUND',
      );
    });

    it('signs host and user certificates that ssh-keygen reads back', async () => {
      const ca = (await api('POST', '/ssh_certificate_authorities', { private_key_type: 'ecdsa' }))
        .body;
      const caFingerprint = (await keygenFingerprint(dir.file(`${ca.id}.pub`, ca.public_key)))
        .fingerprint;
      const key = await keygen(dir.path, `subject-${store.kind}`, 'rsa', 2048);
      const host = await api('POST', '/ssh_host_certificates', {
        ssh_certificate_authority_id: ca.id,
        public_key: key.pub,
        principals: ['host.example.com', '10.0.0.1'],
        valid_after: '2030-01-01T00:00:00Z',
        description: 'web',
      });
      expect(host.status, JSON.stringify(host.body)).toBe(201);
      expect(host.body).toEqual({
        id: expect.stringMatching(/^shcrt_/),
        uri: `${service.url}/ssh_host_certificates/${host.body.id}`,
        created_at: expect.any(String),
        description: 'web',
        metadata: '',
        public_key: key.pub.trim(),
        key_type: 'rsa',
        ssh_certificate_authority_id: ca.id,
        principals: ['host.example.com', '10.0.0.1'],
        valid_after: '2030-01-01T00:00:00Z',
        valid_until: '2031-01-01T00:00:00Z',
        certificate: expect.stringMatching(/^ssh-rsa-cert-v01@openssh\.com \S+ shcrt_/),
      });
      expect(
        await listCertificate(dir.file(`${host.body.id}-cert.pub`, host.body.certificate)),
      ).toMatchObject({
        type: 'ssh-rsa-cert-v01@openssh.com host certificate',
        signingCa: `ECDSA ${caFingerprint} (using ecdsa-sha2-nistp256)`,
        keyId: `"${host.body.id}"`,
        valid: 'from 2030-01-01T00:00:00 to 2031-01-01T00:00:00',
        principals: ['host.example.com', '10.0.0.1'],
        extensions: [],
      });

      const before = Math.floor(Date.now() / 1000) * 1000;
      const user = await api('POST', '/ssh_user_certificates', {
        ssh_certificate_authority_id: ca.id,
        public_key: key.pub,
        principals: ['deploy'],
        critical_options: { 'source-address': '10.0.0.0/8' },
      });
      expect(user.status, JSON.stringify(user.body)).toBe(201);
      expect(user.body).toMatchObject({
        id: expect.stringMatching(/^sucrt_/),
        key_type: 'rsa',
        principals: ['deploy'],
        critical_options: { 'source-address': '10.0.0.0/8' },
        extensions: { 'permit-pty': '', 'permit-user-rc': '' },
      });
      const validAfter = Date.parse(user.body.valid_after);
      expect(validAfter).toBeGreaterThanOrEqual(before);
      expect(Date.parse(user.body.valid_until) - validAfter).toBe(24 * 3600 * 1000);
      expect(
        await listCertificate(dir.file(`${user.body.id}-cert.pub`, user.body.certificate)),
      ).toMatchObject({
        type: 'ssh-rsa-cert-v01@openssh.com user certificate',
        keyId: `"${user.body.id}"`,
        principals: ['deploy'],
        criticalOptions: ['source-address 10.0.0.0/8'],
        extensions: ['permit-pty', 'permit-user-rc'],
      });

      for (const [path, created] of [
        ['ssh_host_certificates', host],
        ['ssh_user_certificates', user],
      ] as const) {
        const item = `/${path}/${created.body.id}`;
        expect((await api('GET', item)).body).toEqual(created.body);
        expect(
          (await api('GET', `/${path}`)).body[path].map((c: { id: string }) => c.id),
        ).toContain(created.body.id);
        expect((await api('PATCH', item, { metadata: 'm' })).body).toEqual({
          ...created.body,
          metadata: 'm',
        });
        expectError(
          await api('PATCH', item, { principals: ['root'] }),
          400,
          'ERR_FIELD_NOT_UPDATABLE',
        );
        expectError(await other('GET', item), 404, 'ERR_NOT_FOUND');
        expect((await api('DELETE', item)).status).toBe(204);
        const audit = await auditOf(created.body.id);
        const prefix = path.replace(/s$/, '');
        expect(audit.map((event) => event.type)).toEqual(
          ['created', 'updated', 'deleted'].map((change) => `${prefix}_${change}.v0`),
        );
        expect(audit[0].object).toEqual(created.body);
      }
    });

    it('signs only with an authority of the caller’s account, and refuses bad requests', async () => {
      const ca = (await api('POST', '/ssh_certificate_authorities', {})).body;
      const key = (await keygen(dir.path, `refused-${store.kind}`, 'ed25519')).pub;
      const sign = (client: ApiClient, path: string, body: Record<string, unknown>) =>
        client('POST', path, { ssh_certificate_authority_id: ca.id, public_key: key, ...body });
      expectError(await sign(other, '/ssh_user_certificates', {}), 404, 'ERR_NOT_FOUND', ca.id);
      expectError(await sign(other, '/ssh_host_certificates', {}), 404, 'ERR_NOT_FOUND', ca.id);
      expectError(
        await api('POST', '/ssh_host_certificates', {
          ssh_certificate_authority_id: 'sshca_missing',
          public_key: key,
        }),
        404,
        'ERR_NOT_FOUND',
      );
      expectError(
        await sign(api, '/ssh_user_certificates', { critical_options: { 'no-pty': '' } }),
        400,
        'ERR_INVALID_FIELD',
        'force-command',
      );
      expectError(
        await sign(api, '/ssh_user_certificates', {
          critical_options: { 'source-address': 'somewhere' },
        }),
        400,
        'ERR_INVALID_FIELD',
      );
      expectError(
        await sign(api, '/ssh_host_certificates', { critical_options: {} }),
        400,
        'ERR_UNKNOWN_FIELD',
      );
      expectError(
        await sign(api, '/ssh_host_certificates', { valid_until: 'soon' }),
        400,
        'ERR_INVALID_FIELD',
      );
      expectError(
        await sign(api, '/ssh_user_certificates', {
          valid_after: '2030-01-02T00:00:00Z',
          valid_until: '2030-01-01T00:00:00Z',
        }),
        400,
        'ERR_INVALID_FIELD',
        'later than',
      );
      expectError(
        await sign(api, '/ssh_user_certificates', { principals: ['two words'] }),
        400,
        'ERR_INVALID_FIELD',
      );
      expectError(
        await sign(api, '/ssh_user_certificates', { public_key: 'ssh-dss AAAA' }),
        400,
        'ERR_INVALID_FIELD',
      );
      expectError(
        await api('POST', '/ssh_user_certificates', { public_key: key }),
        400,
        'ERR_MISSING_FIELD',
      );
    });
  });
});

describe('ngrok’s official API client on the SSH families', () => {
  let store: TestStore;
  let service: Service;
  let ngrok: Ngrok;
  let api: ApiClient;

  beforeAll(async () => {
    store = await pgliteStore();
    ({ service, api } = await startWithOtherAccount(store));
    ngrok = new Ngrok({ baseUrl: service.url, apiToken: TEST_BOOTSTRAP_KEY });
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  /** A client delete (see test/helpers/ngrok-client.ts), then the object is gone. */
  async function deleted(run: () => Promise<unknown>, path: string): Promise<void> {
    await clientDelete(run);
    expect((await api('GET', path)).status).toBe(404);
  }

  it('creates, gets, lists, updates and deletes SSH credentials', async () => {
    const key = await keygen(dir.path, 'ngrok-cred', 'ed25519');
    const created = await ngrok.sshCredentials.create({
      publicKey: key.pub,
      acl: ['bind:x.example.com'],
    });
    expect(created.acl).toEqual(['bind:x.example.com']);
    expect((await ngrok.sshCredentials.get(created.id)).publicKey).toBe(key.pub.trim());
    expect((await ngrok.sshCredentials.update({ id: created.id, acl: ['*'] })).acl).toEqual(['*']);
    expect((await ngrok.sshCredentials.list()).map((item) => item.id)).toContain(created.id);
    await deleted(() => ngrok.sshCredentials.delete(created.id), `/ssh_credentials/${created.id}`);
  });

  it('creates, gets, lists, updates and deletes authorities, host and user certificates', async () => {
    const ca = await ngrok.sshCertificateAuthorities.create({
      privateKeyType: 'ecdsa',
      ellipticCurve: 'p256',
    } as never);
    expect(ca.keyType).toBe('ecdsa');
    expect((await ngrok.sshCertificateAuthorities.get(ca.id)).publicKey).toBe(ca.publicKey);
    expect(
      (await ngrok.sshCertificateAuthorities.update({ id: ca.id, description: 'd' })).description,
    ).toBe('d');
    expect((await ngrok.sshCertificateAuthorities.list()).map((item) => item.id)).toContain(ca.id);

    const key = (await keygen(dir.path, 'ngrok-subject', 'ecdsa')).pub;
    const host = await ngrok.sshHostCertificates.create({
      sshCertificateAuthorityId: ca.id,
      publicKey: key,
      principals: ['h.example.com'],
    } as never);
    expect(host.certificate).toMatch(/^ecdsa-sha2-nistp256-cert-v01@openssh\.com /);
    expect((await ngrok.sshHostCertificates.get(host.id)).principals).toEqual(['h.example.com']);
    expect((await ngrok.sshHostCertificates.update({ id: host.id, metadata: 'm' })).metadata).toBe(
      'm',
    );
    expect((await ngrok.sshHostCertificates.list()).map((item) => item.id)).toContain(host.id);

    // The client turns Map and Date arguments into {} before sending them: plain values instead.
    const user = await ngrok.sshUserCertificates.create({
      sshCertificateAuthorityId: ca.id,
      publicKey: key,
      principals: ['deploy'],
      criticalOptions: { 'force-command': 'uptime' },
      validUntil: '2035-01-01T00:00:00.000Z',
    } as never);
    expect(user.validUntil).toBe('2035-01-01T00:00:00Z');
    expect((await ngrok.sshUserCertificates.get(user.id)).keyType).toBe('ecdsa');
    expect(
      (await ngrok.sshUserCertificates.update({ id: user.id, description: 'u' })).description,
    ).toBe('u');
    expect((await ngrok.sshUserCertificates.list()).map((item) => item.id)).toContain(user.id);
    const listing = await listCertificate(dir.file('ngrok-user-cert.pub', user.certificate));
    expect(listing.criticalOptions).toEqual(['force-command uptime']);

    await deleted(
      () => ngrok.sshUserCertificates.delete(user.id),
      `/ssh_user_certificates/${user.id}`,
    );
    await deleted(
      () => ngrok.sshHostCertificates.delete(host.id),
      `/ssh_host_certificates/${host.id}`,
    );
    await deleted(
      () => ngrok.sshCertificateAuthorities.delete(ca.id),
      `/ssh_certificate_authorities/${ca.id}`,
    );
  });
});
