import { Ngrok } from '@ngrok/ngrok-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/service.ts';
import { expectError } from '../helpers/expect-error.ts';
import { clientDelete } from '../helpers/ngrok-client.ts';
import { CA_EXTENSIONS, type Issued, OpensslPki } from '../helpers/openssl-pki.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';

// ngrok's official TypeScript client, unmodified, on /certificate_authorities and
// /tls_certificates: create, get, list, update, delete, and the fields as its models name them.

describe('ngrok’s official API client on the X.509 families', () => {
  let pki: OpensslPki;
  let ca: Issued;
  let leaf: Issued;
  let store: TestStore;
  let service: Service;
  let ngrok: Ngrok;
  let api: ApiClient;

  beforeAll(async () => {
    pki = new OpensslPki();
    ca = pki.selfSigned('ca', {
      key: 'ecdsa',
      subject: '/CN=Client CA',
      extensions: CA_EXTENSIONS,
    });
    leaf = pki.issue('leaf', ca, {
      key: 'ed25519',
      subject: '/O=Acme/CN=api.example.com',
      extensions: ['subjectAltName=DNS:api.example.com,IP:192.0.2.1'],
    });
    store = await pgliteStore();
    service = await startTestService(store);
    ngrok = new Ngrok({ baseUrl: service.url, apiToken: TEST_BOOTSTRAP_KEY });
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
    pki?.close();
  });

  it('creates, gets, lists, updates and deletes certificate authorities', async () => {
    const created = await ngrok.certificateAuthorities.create({
      caPem: ca.cert,
      description: 'ngrok',
    });
    expect(created).toMatchObject({
      caPem: ca.cert,
      subjectCommonName: 'Client CA',
      keyUsages: ['cert_sign', 'crl_sign'],
      extendedKeyUsages: [],
      description: 'ngrok',
    });
    expect(created.id).toMatch(/^ca_/);
    expect(new Date(created.notAfter).getTime()).toBeGreaterThan(Date.now());
    expect((await ngrok.certificateAuthorities.get(created.id)).caPem).toBe(ca.cert);
    const updated = await ngrok.certificateAuthorities.update({ id: created.id, metadata: 'm' });
    expect(updated).toMatchObject({ metadata: 'm', description: 'ngrok' });
    const listed = await ngrok.certificateAuthorities.list();
    expect(listed.map((authority) => authority.id)).toContain(created.id);
    await clientDelete(() => ngrok.certificateAuthorities.delete(created.id));
    expectError(await api('GET', `/certificate_authorities/${created.id}`), 404, 'ERR_NOT_FOUND');
  });

  it('creates, gets, lists, updates and deletes TLS certificates', async () => {
    const created = await ngrok.tlsCertificates.create({
      certificatePem: leaf.cert,
      privateKeyPem: leaf.key,
      description: 'ngrok',
    });
    expect(created).toMatchObject({
      certificatePem: leaf.cert,
      subjectCommonName: 'api.example.com',
      subjectAlternativeNames: { dnsNames: ['api.example.com'], ips: ['192.0.2.1'] },
      privateKeyType: 'ed25519',
      issuerCommonName: 'Client CA',
      subjectOrganization: 'Acme',
      subjectCountry: '',
    });
    expect(created.id).toMatch(/^cert_/);
    expect(created.issuedAt ?? null).toBeNull();
    expect(JSON.stringify(created)).not.toContain('PRIVATE KEY');
    expect((await ngrok.tlsCertificates.get(created.id)).serialNumber).toBe(created.serialNumber);
    const updated = await ngrok.tlsCertificates.update({ id: created.id, description: 'renamed' });
    expect(updated.description).toBe('renamed');
    const listed = await ngrok.tlsCertificates.list();
    expect(listed.map((certificate) => certificate.id)).toContain(created.id);
    await clientDelete(() => ngrok.tlsCertificates.delete(created.id));
    expectError(await api('GET', `/tls_certificates/${created.id}`), 404, 'ERR_NOT_FOUND');
  });
});
