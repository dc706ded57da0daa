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

// The network families over REST: IP policies, their rules, IP restrictions and reserved TCP
// addresses; each change's audit event carries every field of SPEC.md's table.

const COMMON = ['id', 'uri', 'created_at', 'description', 'metadata'];
/** SPEC.md's fields of each family's audit object (and response), in order. */
const SPEC_FIELDS = {
  ip_policy: COMMON,
  ip_policy_rule: [...COMMON, 'cidr', 'ip_policy', 'action'],
  ip_restriction: [...COMMON, 'enforced', 'type', 'ip_policies'],
  tcp_address: [...COMMON, 'addr', 'region'],
};

describe.each(STORES)('network families on $kind', ({ open }) => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let other: ApiClient;

  beforeAll(async () => {
    store = await open();
    service = await startTestService(store, { TCP_ADDR_PORTS: '40000-40002' });
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    other = await otherAccountClient(service);
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  /** The envelopes of the audit events about object `id`, oldest first. */
  const eventsAbout = async (id: string) =>
    (await auditEventsOf(service, id)).map((event) => event.envelope);

  /** Checks the created/updated/deleted events of `id` carry the responses, SPEC fields first. */
  async function expectAudit(
    prefix: keyof typeof SPEC_FIELDS,
    id: string,
    shown: { created: unknown; updated: unknown },
  ) {
    const events = await eventsAbout(id);
    expect(events.map((event) => event.event_type)).toEqual([
      `${prefix}_created.v0`,
      `${prefix}_updated.v0`,
      `${prefix}_deleted.v0`,
    ]);
    expect(events.map((event) => event.object)).toEqual([
      shown.created,
      shown.updated,
      shown.updated,
    ]);
    expect(Object.keys(shown.created as object)).toEqual(SPEC_FIELDS[prefix]);
    for (const event of events) {
      // The outbox keeps envelopes as jsonb, which orders keys its own way.
      expect(Object.keys(event.object).sort()).toEqual([...SPEC_FIELDS[prefix]].sort());
      expect(event.principal.id).toMatch(/^ak_/);
    }
  }

  /** Creates, updates and deletes through REST; returns the create and update answers. */
  async function lifecycle(path: string, body: object, patch: object) {
    const created = await api('POST', path, body);
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const { id } = created.body;
    expect((await api('GET', `${path}/${id}`)).body).toEqual(created.body);
    const updated = await api('PATCH', `${path}/${id}`, patch);
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect((await api('DELETE', `${path}/${id}`)).status).toBe(204);
    expectError(await api('GET', `${path}/${id}`), 404, 'ERR_NOT_FOUND');
    return { created: created.body, updated: updated.body };
  }

  async function newPolicy(description = 'office'): Promise<string> {
    const policy = await api('POST', '/ip_policies', { description });
    expect(policy.status).toBe(201);
    return policy.body.id;
  }

  it('keeps IP policies with their audit events', async () => {
    const shown = await lifecycle(
      '/ip_policies',
      { description: 'offices', metadata: '{"team":"net"}' },
      { description: 'all offices' },
    );
    expect(shown.created).toEqual({
      id: expect.stringMatching(/^ipp_[0-9a-z]{26}$/),
      uri: `${service.url}/ip_policies/${shown.created.id}`,
      created_at: expect.stringMatching(/Z$/),
      description: 'offices',
      metadata: '{"team":"net"}',
    });
    expect(shown.updated).toMatchObject({ description: 'all offices', metadata: '{"team":"net"}' });
    await expectAudit('ip_policy', shown.created.id, shown);
  });

  it('keeps rules in canonical form, in their policy, with their audit events', async () => {
    const policy = await newPolicy();
    const shown = await lifecycle(
      '/ip_policy_rules',
      { cidr: '2001:DB8:0:0::/32', action: 'deny', ip_policy_id: policy, description: 'lab' },
      { cidr: '198.51.100.7', metadata: 'm' },
    );
    expect(shown.created).toEqual({
      id: expect.stringMatching(/^ipr_/),
      uri: `${service.url}/ip_policy_rules/${shown.created.id}`,
      created_at: expect.any(String),
      description: 'lab',
      metadata: '',
      cidr: '2001:db8::/32',
      ip_policy: { id: policy, uri: `${service.url}/ip_policies/${policy}` },
      action: 'deny',
    });
    expect(shown.updated).toMatchObject({ cidr: '198.51.100.7/32', action: 'deny', metadata: 'm' });
    await expectAudit('ip_policy_rule', shown.created.id, shown);
  });

  it('refuses rules that are not valid, naming the network when host bits are set', async () => {
    const policy = await newPolicy();
    const rule = (body: object) =>
      api('POST', '/ip_policy_rules', { cidr: '10.0.0.0/8', action: 'allow', ...body });
    expectError(
      await rule({ cidr: '10.1.2.3/8', ip_policy_id: policy }),
      400,
      'ERR_INVALID_FIELD',
      'host bits set; the network is 10.0.0.0/8',
    );
    expectError(await rule({ cidr: '10.1', ip_policy_id: policy }), 400, 'ERR_INVALID_FIELD');
    expectError(
      await rule({ cidr: `${'1'.repeat(100)}`, ip_policy_id: policy }),
      400,
      'ERR_FIELD_TOO_LONG',
    );
    expectError(await rule({ action: 'block', ip_policy_id: policy }), 400, 'ERR_INVALID_FIELD');
    expectError(await rule({}), 400, 'ERR_MISSING_FIELD', 'ip_policy_id');
    expectError(
      await api('POST', '/ip_policy_rules', { cidr: '10.0.0.0/8', ip_policy_id: policy }),
      400,
      'ERR_MISSING_FIELD',
      'action',
    );
    // Another account's policy does not exist for this one.
    const theirs = (await other('POST', '/ip_policies', {})).body.id;
    expectError(await rule({ ip_policy_id: theirs }), 400, 'ERR_INVALID_FIELD', 'not found');
    const created = await rule({ ip_policy_id: policy });
    for (const patch of [{ action: 'deny' }, { ip_policy_id: policy }]) {
      expectError(
        await api('PATCH', `/ip_policy_rules/${created.body.id}`, patch),
        400,
        'ERR_FIELD_NOT_UPDATABLE',
      );
    }
    expectError(
      await api('PATCH', `/ip_policy_rules/${created.body.id}`, { cidr: '::1/64' }),
      400,
      'ERR_INVALID_FIELD',
      '::/64',
    );
  });

  it('deletes a policy’s rules with it, each with its event; restrictions keep naming it', async () => {
    const policy = await newPolicy();
    const rules: string[] = [];
    for (const cidr of ['192.0.2.0/24', '198.51.100.0/24']) {
      const rule = await api('POST', '/ip_policy_rules', {
        cidr,
        action: 'allow',
        ip_policy_id: policy,
      });
      rules.push(rule.body.id);
    }
    const restriction = await api('POST', '/ip_restrictions', {
      type: 'agent',
      ip_policy_ids: [policy],
    });
    expect((await api('DELETE', `/ip_policies/${policy}`)).status).toBe(204);
    for (const rule of rules) {
      expectError(await api('GET', `/ip_policy_rules/${rule}`), 404, 'ERR_NOT_FOUND');
      const events = await eventsAbout(rule);
      expect(events.map((event) => event.event_type)).toEqual([
        'ip_policy_rule_created.v0',
        'ip_policy_rule_deleted.v0',
      ]);
      expect(events[1].object).toEqual(events[0].object);
    }
    const kept = await api('GET', `/ip_restrictions/${restriction.body.id}`);
    expect(kept.body.ip_policies).toEqual([
      { id: policy, uri: `${service.url}/ip_policies/${policy}` },
    ]);
  });

  it('keeps IP restrictions with their audit events', async () => {
    const [first, second] = [await newPolicy('a'), await newPolicy('b')];
    const shown = await lifecycle(
      '/ip_restrictions',
      { type: 'endpoints', ip_policy_ids: [first], description: 'edge' },
      { ip_policy_ids: [second, first], enforced: true },
    );
    const ref = (id: string) => ({ id, uri: `${service.url}/ip_policies/${id}` });
    expect(shown.created).toEqual({
      id: expect.stringMatching(/^ipx_/),
      uri: `${service.url}/ip_restrictions/${shown.created.id}`,
      created_at: expect.any(String),
      description: 'edge',
      metadata: '',
      enforced: false,
      type: 'endpoints',
      ip_policies: [ref(first)],
    });
    expect(shown.updated).toMatchObject({
      enforced: true,
      type: 'endpoints',
      ip_policies: [ref(second), ref(first)],
    });
    await expectAudit('ip_restriction', shown.created.id, shown);
  });

  it('refuses restrictions that are not valid', async () => {
    const policy = await newPolicy();
    const restriction = (body: object) =>
      api('POST', '/ip_restrictions', { type: 'agent', ip_policy_ids: [policy], ...body });
    expectError(await restriction({ type: 'ssh' }), 400, 'ERR_INVALID_FIELD', '"type"');
    expectError(await restriction({ ip_policy_ids: [] }), 400, 'ERR_INVALID_FIELD', 'at least one');
    expectError(
      await restriction({ ip_policy_ids: [policy, policy] }),
      400,
      'ERR_INVALID_FIELD',
      'twice',
    );
    expectError(
      await restriction({ ip_policy_ids: ['ipp_06h01yx3eexeqasb5hgsrgp1e0'] }),
      400,
      'ERR_INVALID_FIELD',
      'not found',
    );
    expectError(await restriction({ enforced: 'yes' }), 400, 'ERR_INVALID_FIELD', '"enforced"');
    expectError(
      await api('POST', '/ip_restrictions', { ip_policy_ids: [policy] }),
      400,
      'ERR_MISSING_FIELD',
      'type',
    );
    const created = await restriction({});
    expectError(
      await api('PATCH', `/ip_restrictions/${created.body.id}`, { type: 'api' }),
      400,
      'ERR_FIELD_NOT_UPDATABLE',
    );
  });

  it('keeps reserved TCP addresses with their audit events', async () => {
    const shown = await lifecycle(
      '/reserved_addrs',
      { description: 'ssh', metadata: 'x' },
      { description: 'ssh bastion' },
    );
    expect(shown.created).toEqual({
      id: expect.stringMatching(/^ra_/),
      uri: `${service.url}/reserved_addrs/${shown.created.id}`,
      created_at: expect.any(String),
      description: 'ssh',
      metadata: 'x',
      addr: expect.stringMatching(/^us\.tcp\.agent-ingress\.example:4000[0-2]$/),
      region: 'us',
    });
    expect(shown.updated).toMatchObject({ description: 'ssh bastion', addr: shown.created.addr });
    await expectAudit('tcp_address', shown.created.id, shown);
    expectError(await api('POST', '/reserved_addrs', { region: 'mars' }), 400, 'ERR_INVALID_FIELD');
  });

  it('allocates distinct ports across accounts, even at once, until the range is spent', async () => {
    const create = (call: ApiClient) => call('POST', '/reserved_addrs', { region: 'eu' });
    const answers = await Promise.all([create(api), create(other), create(api)]);
    expect(answers.map((answer) => answer.status)).toEqual([201, 201, 201]);
    const addrs = answers.map((answer) => answer.body.addr as string).sort();
    expect(addrs).toEqual([
      'eu.tcp.agent-ingress.example:40000',
      'eu.tcp.agent-ingress.example:40001',
      'eu.tcp.agent-ingress.example:40002',
    ]);
    expectError(await create(other), 409, 'ERR_NO_FREE_PORT', 'region eu');
    // Another region has its own ports; a deleted address's port is free again.
    expect((await api('POST', '/reserved_addrs', { region: 'ap' })).body.addr).toMatch(/^ap\./);
    const freed = answers[1];
    expect((await other('DELETE', `/reserved_addrs/${freed.body.id}`)).status).toBe(204);
    expect((await create(api)).body.addr).toBe(freed.body.addr);
    expectError(
      await api('PATCH', `/reserved_addrs/${answers[0].body.id}`, { region: 'us' }),
      400,
      'ERR_FIELD_NOT_UPDATABLE',
    );
  });

  it('lists each family under ngrok’s key, a page at a time', async () => {
    const policy = await newPolicy();
    for (const cidr of ['192.0.2.0/25', '192.0.2.128/25']) {
      await api('POST', '/ip_policy_rules', { cidr, action: 'allow', ip_policy_id: policy });
    }
    for (const [path, key] of [
      ['/ip_policies', 'ip_policies'],
      ['/ip_policy_rules', 'ip_policy_rules'],
      ['/ip_restrictions', 'ip_restrictions'],
      ['/reserved_addrs', 'reserved_addrs'],
    ]) {
      const page = await api('GET', `${path}?limit=1`);
      expect(page.status).toBe(200);
      expect(page.body[key]).toHaveLength(1);
      expect(page.body.next_page_uri, path).toContain(`${path}?`);
    }
  });
});
