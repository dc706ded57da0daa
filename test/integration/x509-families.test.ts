import { createPrivateKey } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/service.ts';
import { expectError } from '../helpers/expect-error.ts';
import { CA_EXTENSIONS, type Issued, OpensslPki } from '../helpers/openssl-pki.ts';
import {
  type ApiClient,
  apiClient,
  auditEventsOf,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { STORES, type TestStore } from '../helpers/stores.ts';

// /certificate_authorities and /tls_certificates over REST, on both stores: certificates made by
// the real openssl command, every SPEC.md field in the response and in each audit event, the
// private key never shown and sealed in the store.

const CA_FIELDS = [
  'id',
  'uri',
  'created_at',
  'description',
  'metadata',
  'ca_pem',
  'subject_common_name',
  'not_before',
  'not_after',
  'key_usages',
  'extended_key_usages',
];

const TLS_FIELDS = [
  'id',
  'uri',
  'created_at',
  'description',
  'metadata',
  'certificate_pem',
  'subject_common_name',
  'subject_alternative_names',
  'issued_at',
  'not_before',
  'not_after',
  'key_usages',
  'extended_key_usages',
  'private_key_type',
  'issuer_common_name',
  'serial_number',
  'subject_organization',
  'subject_organizational_unit',
  'subject_locality',
  'subject_province',
  'subject_country',
];

let pki: OpensslPki;
let root: Issued;
let intermediate: Issued;
let leaf: Issued;

beforeAll(() => {
  pki = new OpensslPki();
  root = pki.selfSigned('root', {
    subject: '/O=Acme/CN=Acme Client CA',
    extensions: [...CA_EXTENSIONS, 'extendedKeyUsage=clientAuth'],
  });
  intermediate = pki.issue('intermediate', root, {
    key: 'ecdsa',
    subject: '/CN=Acme Issuing CA',
    extensions: CA_EXTENSIONS,
  });
  leaf = pki.issue('leaf', intermediate, {
    subject: '/C=FR/ST=Ile-de-France/L=Paris/O=Acme SAS/OU=Edge/CN=www.example.com',
    extensions: [
      'subjectAltName=DNS:www.example.com,DNS:*.example.com,IP:198.51.100.4,IP:2001:db8::4',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
    ],
  });
});
afterAll(() => pki.close());

/** openssl's date for `flag` as RFC 3339 to the second. */
function opensslDate(cert: string, flag: string): string {
  return new Date(pki.x509Field(cert, flag)).toISOString().replace('.000Z', 'Z');
}

/** The base64 lines of a PEM: what a leak of it would contain. */
function pemLines(pem: string): string[] {
  return pem.split('\n').filter((line) => /^[A-Za-z0-9+/=]{40,}$/.test(line));
}

describe.each(STORES)('X.509 families on $kind', ({ open }) => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;

  beforeAll(async () => {
    store = await open();
    service = await startTestService(store);
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  /** The audit events of object `id`, in order (jsonb: keys unordered). */
  const auditOf = (id: string) => auditEventsOf(service, id);

  it('creates, gets, lists, updates and deletes a certificate authority, each change audited', async () => {
    const created = await api('POST', '/certificate_authorities', {
      description: 'client CA',
      metadata: '{"team":"edge"}',
      ca_pem: root.cert,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id;
    expect(id).toMatch(/^ca_/);
    expect(Object.keys(created.body)).toEqual(CA_FIELDS);
    expect(created.body).toEqual({
      id,
      uri: `${service.url}/certificate_authorities/${id}`,
      created_at: expect.any(String),
      description: 'client CA',
      metadata: '{"team":"edge"}',
      ca_pem: root.cert,
      subject_common_name: 'Acme Client CA',
      not_before: opensslDate(root.cert, '-startdate'),
      not_after: opensslDate(root.cert, '-enddate'),
      key_usages: ['cert_sign', 'crl_sign'],
      extended_key_usages: ['client_auth'],
    });
    expect((await api('GET', `/certificate_authorities/${id}`)).body).toEqual(created.body);
    const list = await api('GET', '/certificate_authorities?limit=100');
    expect(list.status).toBe(200);
    expect(list.body.certificate_authorities).toContainEqual(created.body);

    const updated = await api('PATCH', `/certificate_authorities/${id}`, {
      description: 'renamed',
      metadata: '',
    });
    expect(updated.body).toEqual({ ...created.body, description: 'renamed', metadata: '' });
    expectError(
      await api('PATCH', `/certificate_authorities/${id}`, { ca_pem: root.cert }),
      400,
      'ERR_FIELD_NOT_UPDATABLE',
    );
    expect((await api('DELETE', `/certificate_authorities/${id}`)).status).toBe(204);
    expectError(await api('GET', `/certificate_authorities/${id}`), 404, 'ERR_NOT_FOUND');

    const events = await auditOf(id);
    expect(events.map((event) => event.type)).toEqual([
      'certificate_authority_created.v0',
      'certificate_authority_updated.v0',
      'certificate_authority_deleted.v0',
    ]);
    expect(events[0].object).toEqual(created.body);
    expect(events[1].object).toEqual(updated.body);
    expect(events[2].object).toEqual(updated.body);
    for (const event of events)
      expect(Object.keys(event.object).sort()).toEqual(CA_FIELDS.toSorted());
  });

  it('refuses a certificate that is not a CA, and what is not PEM, naming ca_pem', async () => {
    const notCa = await api('POST', '/certificate_authorities', { ca_pem: leaf.cert });
    expectError(notCa, 400, 'ERR_INVALID_FIELD', 'not a certificate authority');
    expect(notCa.body.details.field).toBe('ca_pem');
    const garbage = await api('POST', '/certificate_authorities', { ca_pem: 'not a PEM' });
    expectError(garbage, 400, 'ERR_INVALID_FIELD', '"ca_pem" must be PEM');
    expect(garbage.body.details.field).toBe('ca_pem');
    expectError(await api('POST', '/certificate_authorities', {}), 400, 'ERR_MISSING_FIELD');
    expectError(
      await api('POST', '/certificate_authorities', { ca_pem: root.cert.repeat(40) }),
      400,
      'ERR_FIELD_TOO_LONG',
    );
  });

  it('creates, gets, lists, updates and deletes a TLS certificate; its key is never shown and sealed at rest', async () => {
    const chain = leaf.cert + intermediate.cert;
    const created = await api('POST', '/tls_certificates', {
      description: 'www',
      certificate_pem: chain,
      private_key_pem: leaf.key,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id;
    expect(id).toMatch(/^cert_/);
    expect(Object.keys(created.body)).toEqual(TLS_FIELDS);
    expect(created.body).toEqual({
      id,
      uri: `${service.url}/tls_certificates/${id}`,
      created_at: expect.any(String),
      description: 'www',
      metadata: '',
      certificate_pem: chain,
      subject_common_name: 'www.example.com',
      subject_alternative_names: {
        dns_names: ['www.example.com', '*.example.com'],
        ips: ['198.51.100.4', '2001:db8::4'],
      },
      issued_at: null,
      not_before: opensslDate(leaf.cert, '-startdate'),
      not_after: opensslDate(leaf.cert, '-enddate'),
      key_usages: ['digital_signature', 'key_encipherment'],
      extended_key_usages: ['server_auth'],
      private_key_type: 'rsa',
      issuer_common_name: 'Acme Issuing CA',
      serial_number: pki.x509Field(leaf.cert, '-serial').toLowerCase(),
      subject_organization: 'Acme SAS',
      subject_organizational_unit: 'Edge',
      subject_locality: 'Paris',
      subject_province: 'Ile-de-France',
      subject_country: 'FR',
    });
    const got = await api('GET', `/tls_certificates/${id}`);
    expect(got.body).toEqual(created.body);
    const list = await api('GET', '/tls_certificates?limit=100');
    expect(list.body.tls_certificates).toContainEqual(created.body);
    const updated = await api('PATCH', `/tls_certificates/${id}`, { metadata: 'm' });
    expect(updated.body).toEqual({ ...created.body, metadata: 'm' });
    for (const field of ['certificate_pem', 'private_key_pem']) {
      expectError(
        await api('PATCH', `/tls_certificates/${id}`, { [field]: leaf.key }),
        400,
        'ERR_FIELD_NOT_UPDATABLE',
      );
    }

    // Sealed in the store, and opened by the service's keyring to the same key.
    const row = await service.db.query<{ secret: string }>(
      'SELECT secret FROM account_objects WHERE id = $1',
      [id],
    );
    expect(row.rows[0].secret).toMatch(/^enc:v1:/);
    const opened = createPrivateKey(service.keyring.open(row.rows[0].secret));
    expect(opened.equals(createPrivateKey(leaf.key))).toBe(true);

    expect((await api('DELETE', `/tls_certificates/${id}`)).status).toBe(204);
    expectError(await api('GET', `/tls_certificates/${id}`), 404, 'ERR_NOT_FOUND');
    const events = await auditOf(id);
    expect(events.map((event) => event.type)).toEqual([
      'tls_certificate_created.v0',
      'tls_certificate_updated.v0',
      'tls_certificate_deleted.v0',
    ]);
    expect(events[0].object).toEqual(created.body);
    for (const event of events)
      expect(Object.keys(event.object).sort()).toEqual(TLS_FIELDS.toSorted());

    // Not in any answer or event, nor in clear anywhere in the store.
    const shown = JSON.stringify([created, got, list, updated].map((r) => r.body));
    const keyLines = pemLines(leaf.key);
    expect(keyLines.length).toBeGreaterThan(10);
    for (const line of keyLines) expect(shown).not.toContain(line);
    expect(shown).not.toContain('PRIVATE KEY');
    expect(await storeRowsContaining(service, [...keyLines, 'PRIVATE KEY'])).toEqual([]);
    // The scan sees what the store holds: the chain, in the audit events.
    expect(await storeRowsContaining(service, pemLines(leaf.cert))).not.toEqual([]);
  });

  it('keeps a TLS certificate a reserved domain serves until the domain stops serving it', async () => {
    const cert = await api('POST', '/tls_certificates', {
      certificate_pem: leaf.cert,
      private_key_pem: leaf.key,
    });
    const domain = await api('POST', '/reserved_domains', {
      domain: `x509-${Date.now()}.example.net`,
      certificate_id: cert.body.id,
    });
    expect(domain.status, JSON.stringify(domain.body)).toBe(201);
    expect(domain.body.certificate).toEqual({ id: cert.body.id, uri: cert.body.uri });
    const refused = await api('DELETE', `/tls_certificates/${cert.body.id}`);
    expectError(refused, 409, 'ERR_IN_USE', domain.body.id);
    expect(refused.body.details.reserved_domain_ids).toEqual([domain.body.id]);
    const cleared = await api('DELETE', `/reserved_domains/${domain.body.id}/certificate`);
    expect(cleared.status).toBe(204);
    expect((await api('DELETE', `/tls_certificates/${cert.body.id}`)).status).toBe(204);
  });

  it('refuses a key that does not match the leaf, and a chain not leaf first', async () => {
    const mismatch = await api('POST', '/tls_certificates', {
      certificate_pem: leaf.cert,
      private_key_pem: intermediate.key,
    });
    expectError(mismatch, 400, 'ERR_INVALID_FIELD', 'does not match');
    expect(mismatch.body.details.field).toBe('private_key_pem');
    const reversed = await api('POST', '/tls_certificates', {
      certificate_pem: intermediate.cert + leaf.cert,
      private_key_pem: leaf.key,
    });
    expectError(reversed, 400, 'ERR_INVALID_FIELD', 'leaf first');
    expect(reversed.body.details.field).toBe('certificate_pem');
    expectError(
      await api('POST', '/tls_certificates', { certificate_pem: leaf.cert }),
      400,
      'ERR_MISSING_FIELD',
    );
  });
});

/** Every row of every table of the store whose text holds one of `needles`, as `table: row`. */
async function storeRowsContaining(service: Service, needles: string[]): Promise<string[]> {
  const tables = await service.db.query<{ name: string }>(
    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
  );
  const found: string[] = [];
  for (const { name } of tables.rows) {
    const rows = await service.db.query<{ text: string }>(
      `SELECT t::text AS text FROM "${name}" t`,
    );
    for (const { text } of rows.rows) {
      if (needles.some((needle) => text.includes(needle)))
        found.push(`${name}: ${text.slice(0, 200)}`);
    }
  }
  return found;
}
