import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AGENT_SESSION_EVENT_TYPES,
  AUDIT_EVENT_TYPES,
  AUDIT_RESOURCES,
} from '../../src/catalogue/event-types.ts';
import { RESOURCES } from '../../src/control-plane/api/resource-list.ts';
import type { Service } from '../../src/service.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';

// The audit catalogue end to end: one subscription to every _created/_updated/_deleted kind,
// every declared resource created, updated and deleted through the API, and every kind found
// in a file destination with each field of SPEC.md's table for its resource.

/** SPEC.md's field tables ("Events"), by audit resource; dots name nested fields. */
const SPEC_FIELDS: Record<string, string[]> = {
  agent_ingress: [
    'id',
    'uri',
    'description',
    'metadata',
    'domain',
    'ns_targets',
    'region_domains',
    'created_at',
    'certificate_management_policy',
    'certificate_management_status',
  ],
  api_key: ['id', 'uri', 'description', 'metadata', 'created_at', 'token'],
  // Not SPEC.md's: the catalogue's extension for cloud endpoints (docs/traffic-policy.md).
  endpoint: [
    'id',
    'uri',
    'created_at',
    'updated_at',
    'description',
    'metadata',
    'type',
    'url',
    'public_url',
    'proto',
    'hostport',
    'traffic_policy',
    'bindings',
  ],
  certificate_authority: [
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
  ],
  domain: [
    'id',
    'uri',
    'created_at',
    'description',
    'metadata',
    'domain',
    'region',
    'cname_target',
    'certificate.id',
    'certificate.uri',
    'certificate_management_policy.authority',
    'certificate_management_policy.private_key_type',
    'certificate_management_status.renews_at',
    'certificate_management_status.provisioning_job.msg',
    'certificate_management_status.provisioning_job.started_at',
    'certificate_management_status.provisioning_job.retries_at',
    'acme_challenge_cname_target',
  ],
  event_destination: ['id', 'metadata', 'created_at', 'description', 'format', 'target', 'uri'],
  event_subscription: [
    'id',
    'uri',
    'created_at',
    'metadata',
    'description',
    'sources.type',
    'sources.uri',
    'destinations.id',
    'destinations.uri',
  ],
  ip_policy: ['id', 'uri', 'created_at', 'description', 'metadata'],
  ip_policy_rule: [
    'id',
    'uri',
    'created_at',
    'description',
    'metadata',
    'cidr',
    'ip_policy.id',
    'ip_policy.uri',
    'action',
  ],
  ip_restriction: [
    'id',
    'uri',
    'created_at',
    'description',
    'metadata',
    'enforced',
    'type',
    'ip_policies.id',
    'ip_policies.uri',
  ],
  ssh_certificate_authority: [
    'id',
    'uri',
    'created_at',
    'description',
    'metadata',
    'public_key',
    'key_type',
  ],
  ssh_host_certificate: [
    'id',
    'uri',
    'created_at',
    'description',
    'metadata',
    'public_key',
    'key_type',
    'ssh_certificate_authority_id',
    'principals',
    'valid_after',
    'valid_until',
    'certificate',
  ],
  ssh_user_certificate: [
    'id',
    'uri',
    'created_at',
    'description',
    'metadata',
    'public_key',
    'key_type',
    'ssh_certificate_authority_id',
    'principals',
    'valid_after',
    'valid_until',
    'certificate',
    'critical_options',
    'extensions',
  ],
  ssh_public_key: ['id', 'uri', 'created_at', 'description', 'metadata', 'public_key', 'acl'],
  tcp_address: ['id', 'uri', 'created_at', 'description', 'metadata', 'addr', 'region'],
  tls_certificate: [
    'id',
    'uri',
    'created_at',
    'description',
    'metadata',
    'certificate_pem',
    'subject_common_name',
    'subject_alternative_names.dns_names',
    'subject_alternative_names.ips',
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
  ],
  tunnel_credential: ['id', 'uri', 'created_at', 'description', 'metadata', 'token', 'acl'],
};

/** Every `_created/_updated/_deleted` kind: the catalogue's audit kinds but the session ones. */
const CHANGE_KINDS = AUDIT_EVENT_TYPES.filter(
  (type) => !(AGENT_SESSION_EVENT_TYPES as readonly string[]).includes(type),
);

/**
 * True when `object` has the dotted field: the first name is a key; below a null it stops
 * (an absent certificate has no id); below a list every element has the rest.
 */
function hasField(object: unknown, path: string[]): boolean {
  if (path.length === 0 || object === null) return true;
  if (Array.isArray(object)) return object.every((item) => hasField(item, path));
  if (typeof object !== 'object' || !Object.hasOwn(object, path[0])) return false;
  return hasField((object as Record<string, unknown>)[path[0]], path.slice(1));
}

/** Every audit event line of a file destination's directory. */
function readAudit(dir: string): { event_type: string; object: Record<string, unknown> }[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) =>
    readFileSync(join(dir, name), 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line)),
  );
}

describe('every audit kind of the catalogue, from the API to a file destination', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let dir: string;

  beforeAll(async () => {
    store = await pgliteStore();
    service = await startTestService(store, { BATCH_LINGER_MS: '20' });
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    const destination = await api('POST', '/event_destinations', {
      target: { file: { path: 'audit' } },
    });
    expect(destination.status).toBe(201);
    const sources = CHANGE_KINDS.map((type) => ({ type }));
    const subscription = await api('POST', '/event_subscriptions', {
      sources,
      destination_ids: [destination.body.id],
    });
    expect(subscription.status, JSON.stringify(subscription.body)).toBe(201);
    const account = (await api('GET', '/account')).body.id;
    dir = join(store.env.DATA_DIR, 'events', account, 'audit');
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  it('has a declared resource for every audit resource of the catalogue', () => {
    expect(RESOURCES.map((resource) => resource.audit).sort()).toEqual([...AUDIT_RESOURCES].sort());
  });

  it('emits _created, _updated and _deleted of every resource with SPEC.md’s fields', async () => {
    const kept: Record<string, string> = {};
    const idOf = (path: string) => kept[path];
    let held: string | undefined;
    for (const resource of RESOURCES) {
      // One object stays (others refer to it); a second one is updated and deleted.
      for (const tag of ['kept', 'changed']) {
        const body = resource.example({ tag: `audit-${tag}-${Date.now()}`, idOf, held });
        const created = await api('POST', `/${resource.path}`, body);
        if (resource.path === 'agent_ingresses') held ??= created.body.domain;
        expect(created.status, `${resource.path}: ${JSON.stringify(created.body)}`).toBe(201);
        // The answer shows exactly the declared fields: declaration and presenter cannot drift.
        const shown = Object.entries(resource.fields)
          .filter(([, field]) => !field.writeOnly && !field.sometimes)
          .map(([name]) => name);
        const keys = Object.keys(created.body).filter((key) => key !== 'health');
        expect(keys.sort(), resource.path).toEqual(shown.sort());
        if (tag === 'kept') {
          kept[resource.path] = created.body.id;
          continue;
        }
        const item = `/${resource.path}/${created.body.id}`;
        expect((await api('PATCH', item, { description: 'changed' })).status).toBe(200);
        expect((await api('DELETE', item)).status).toBe(204);
      }
    }

    const expected = [...CHANGE_KINDS];
    let events = readAudit(dir);
    for (let waited = 0; waited < 15_000; waited += 100) {
      const seen = new Set(events.map((event) => event.event_type));
      if (expected.every((type) => seen.has(type))) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
      events = readAudit(dir);
    }
    expect([...new Set(events.map((event) => event.event_type))].sort()).toEqual(
      expect.arrayContaining(expected.sort()),
    );
    for (const event of events) {
      const resource = event.event_type.replace(/_(created|updated|deleted)\.v0$/, '');
      const missing = SPEC_FIELDS[resource].filter(
        (field) => !hasField(event.object, field.split('.')),
      );
      expect(missing, `${event.event_type} lacks fields`).toEqual([]);
    }
  });
});
