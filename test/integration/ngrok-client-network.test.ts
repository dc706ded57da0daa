import { Ngrok } from '@ngrok/ngrok-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/service.ts';
import { expectError } from '../helpers/expect-error.ts';
import { clientDelete } from '../helpers/ngrok-client.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';

// ngrok's official TypeScript client, unmodified, on the network families: IP policies, rules,
// restrictions and reserved TCP addresses. Its `delete` parses the empty 204 answer as JSON and
// so rejects (README: "ngrok's API clients"); each test checks with a GET that the object is gone.

describe('ngrok’s official API client on the network families', () => {
  let store: TestStore;
  let service: Service;
  let ngrok: Ngrok;
  let api: ApiClient;

  beforeAll(async () => {
    store = await pgliteStore();
    service = await startTestService(store);
    ngrok = new Ngrok({ baseUrl: service.url, apiToken: TEST_BOOTSTRAP_KEY });
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  it('creates, gets, lists, updates and deletes IP policies and their rules', async () => {
    const policy = await ngrok.ipPolicies.create({ description: 'offices', metadata: 'm' });
    expect(policy.id).toMatch(/^ipp_/);
    expect((await ngrok.ipPolicies.get(policy.id)).description).toBe('offices');
    expect((await ngrok.ipPolicies.update({ id: policy.id, description: 'hq' })).description).toBe(
      'hq',
    );
    expect((await ngrok.ipPolicies.list()).map((p) => p.id)).toContain(policy.id);

    const rule = await ngrok.ipPolicyRules.create({
      cidr: '2001:DB8::/32',
      ipPolicyId: policy.id,
      action: 'allow',
      description: 'lab',
    });
    expect(rule).toMatchObject({
      cidr: '2001:db8::/32',
      action: 'allow',
      ipPolicy: { id: policy.id, uri: `${service.url}/ip_policies/${policy.id}` },
    });
    expect((await ngrok.ipPolicyRules.get(rule.id)).cidr).toBe('2001:db8::/32');
    const moved = await ngrok.ipPolicyRules.update({ id: rule.id, cidr: '192.0.2.0/24' });
    expect(moved.cidr).toBe('192.0.2.0/24');
    expect((await ngrok.ipPolicyRules.list()).map((r) => r.id)).toContain(rule.id);
    await clientDelete(() => ngrok.ipPolicyRules.delete(rule.id));
    expectError(await api('GET', `/ip_policy_rules/${rule.id}`), 404, 'ERR_NOT_FOUND');
    await clientDelete(() => ngrok.ipPolicies.delete(policy.id));
    expectError(await api('GET', `/ip_policies/${policy.id}`), 404, 'ERR_NOT_FOUND');
  });

  it('creates, gets, lists, updates and deletes IP restrictions', async () => {
    const [a, b] = [await ngrok.ipPolicies.create({}), await ngrok.ipPolicies.create({})];
    const created = await ngrok.ipRestrictions.create({
      type: 'endpoints',
      enforced: false,
      ipPolicyIds: [a.id],
    });
    expect(created).toMatchObject({ type: 'endpoints', enforced: false });
    expect(created.ipPolicies.map((p) => p.id)).toEqual([a.id]);
    expect((await ngrok.ipRestrictions.get(created.id)).type).toBe('endpoints');
    const updated = await ngrok.ipRestrictions.update({
      id: created.id,
      enforced: true,
      ipPolicyIds: [a.id, b.id],
      description: 'edge',
    });
    expect(updated).toMatchObject({ enforced: true, description: 'edge' });
    expect(updated.ipPolicies.map((p) => p.id)).toEqual([a.id, b.id]);
    expect((await ngrok.ipRestrictions.list()).map((r) => r.id)).toContain(created.id);
    await clientDelete(() => ngrok.ipRestrictions.delete(created.id));
    expectError(await api('GET', `/ip_restrictions/${created.id}`), 404, 'ERR_NOT_FOUND');
  });

  it('creates, gets, lists, updates and deletes reserved TCP addresses', async () => {
    const created = await ngrok.reservedAddrs.create({ region: 'eu', description: 'db' });
    expect(created.addr).toMatch(/^eu\.tcp\.agent-ingress\.example:2\d{4}$/);
    expect(created.region).toBe('eu');
    expect((await ngrok.reservedAddrs.get(created.id)).addr).toBe(created.addr);
    const updated = await ngrok.reservedAddrs.update({ id: created.id, metadata: '{"db":1}' });
    expect(updated).toMatchObject({ metadata: '{"db":1}', addr: created.addr });
    expect((await ngrok.reservedAddrs.list()).map((r) => r.id)).toContain(created.id);
    await clientDelete(() => ngrok.reservedAddrs.delete(created.id));
    expectError(await api('GET', `/reserved_addrs/${created.id}`), 404, 'ERR_NOT_FOUND');
  });
});
