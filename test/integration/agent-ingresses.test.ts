import { describe, expect, it } from 'vitest';
import { expectError } from '../helpers/expect-error.ts';
import { apiClient, useTestService } from '../helpers/service.ts';
import { STORES } from '../helpers/stores.ts';

let counter = 0;
const uniqueDomain = () => `d${Date.now().toString(36)}${counter++}.example.com`;

/** A unique valid domain of exactly `bytes` bytes: full 63-byte labels, then the rest. */
function domainOfLength(bytes: number): string {
  const tail = uniqueDomain();
  const labels: string[] = [];
  let left = bytes - tail.length;
  while (left > 0) {
    const label = Math.min(63, left - 1);
    labels.push('a'.repeat(label));
    left -= label + 1;
  }
  return [...labels, tail].join('.');
}

describe.each(STORES)('Agent Ingress API on $kind', ({ open }) => {
  const t = useTestService(open);

  it('creates, gets, lists, updates and deletes an ingress', async () => {
    const domain = uniqueDomain();
    const created = await t.api('POST', '/agent_ingresses', {
      domain: domain.toUpperCase(),
      description: 'edge for the billing agents',
      metadata: '{"team":"billing"}',
    });
    expect(created.status).toBe(201);
    const ingress = created.body;
    expect(ingress).toEqual({
      id: expect.stringMatching(/^agin_[0-9a-z]{26}$/),
      uri: `${t.service.url}/agent_ingresses/${ingress.id}`,
      description: 'edge for the billing agents',
      metadata: '{"team":"billing"}',
      domain,
      ns_targets: ['ns1.agent-ingress.example', 'ns2.agent-ingress.example'],
      region_domains: ['au', 'eu', 'ap', 'us', 'us-cal-1', 'jp', 'in', 'sa'].map(
        (r) => `${r}.${domain}`,
      ),
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      certificate_management_policy: null,
      certificate_management_status: null,
    });

    expect((await t.api('GET', `/agent_ingresses/${ingress.id}`)).body).toEqual(ingress);
    const list = await t.api('GET', '/agent_ingresses');
    expect(list.status).toBe(200);
    expect(list.body.ingresses.map((i: { id: string }) => i.id)).toContain(ingress.id);
    expect(list.body.uri).toBe(`${t.service.url}/agent_ingresses`);

    const patched = await t.api('PATCH', `/agent_ingresses/${ingress.id}`, { description: '' });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...ingress, description: '' });

    const deleted = await t.api('DELETE', `/agent_ingresses/${ingress.id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.body).toBeNull();
    expectError(await t.api('GET', `/agent_ingresses/${ingress.id}`), 404, 'ERR_NOT_FOUND');
    expectError(await t.api('DELETE', `/agent_ingresses/${ingress.id}`), 404, 'ERR_NOT_FOUND');
  });

  it('manages the certificate policy and queues a provisioning job', async () => {
    const created = await t.api('POST', '/agent_ingresses', {
      domain: uniqueDomain(),
      certificate_management_policy: { authority: 'letsencrypt' },
    });
    expect(created.status).toBe(201);
    expect(created.body.certificate_management_policy).toEqual({
      authority: 'letsencrypt',
      private_key_type: 'rsa',
    });
    const status = created.body.certificate_management_status;
    expect(status.renews_at).toBeNull();
    expect(status.provisioning_job).toEqual({
      msg: expect.stringContaining('queued'),
      started_at: expect.stringMatching(/Z$/),
      retries_at: null,
    });
    expect(status.provisioning_job).not.toHaveProperty('error_code');
    const jobs = await t.service.db.query<{ state: string }>(
      'SELECT state FROM jobs WHERE subject_id = $1',
      [created.body.id],
    );
    expect(jobs.rows).toEqual([{ state: 'queued' }]);

    const ecdsa = await t.api('PATCH', `/agent_ingresses/${created.body.id}`, {
      certificate_management_policy: { authority: 'letsencrypt', private_key_type: 'ecdsa' },
    });
    expect(ecdsa.body.certificate_management_policy.private_key_type).toBe('ecdsa');
    expect(ecdsa.body.certificate_management_status.provisioning_job.msg).toContain('queued');

    const off = await t.api('PATCH', `/agent_ingresses/${created.body.id}`, {
      certificate_management_policy: null,
    });
    expect(off.status).toBe(200);
    expect(off.body.certificate_management_policy).toBeNull();
    expect(off.body.certificate_management_status).toBeNull();
    const active = await t.service.db.query(
      "SELECT 1 FROM jobs WHERE subject_id = $1 AND state = 'queued'",
      [created.body.id],
    );
    expect(active.rows).toHaveLength(0);
  });

  it('counts byte limits in UTF-8 bytes', async () => {
    const euro = '€'; // 3 bytes
    const ok = await t.api('POST', '/agent_ingresses', {
      domain: uniqueDomain(),
      description: euro.repeat(85),
      metadata: euro.repeat(1365),
    });
    expect(ok.status).toBe(201);
    expectError(
      await t.api('POST', '/agent_ingresses', {
        domain: uniqueDomain(),
        description: euro.repeat(86),
      }),
      400,
      'ERR_FIELD_TOO_LONG',
      '255 bytes',
    );
    expectError(
      await t.api('POST', '/agent_ingresses', {
        domain: uniqueDomain(),
        metadata: `${euro.repeat(1365)}ab`,
      }),
      400,
      'ERR_FIELD_TOO_LONG',
      '4096 bytes',
    );
    expectError(
      await t.api('PATCH', `/agent_ingresses/${ok.body.id}`, { description: 'x'.repeat(256) }),
      400,
      'ERR_FIELD_TOO_LONG',
      'description',
    );
  });

  it('rejects a domain whose longest region domain would exceed 253 bytes', async () => {
    // The longest default region is us-cal-1: its region domain adds 9 bytes.
    const longest = domainOfLength(244);
    expect(longest.length).toBe(244);
    const created = await t.api('POST', '/agent_ingresses', { domain: longest });
    expect(created.status).toBe(201);
    expect(Math.max(...created.body.region_domains.map((d: string) => d.length))).toBe(253);
    for (const bytes of [245, 249, 253]) {
      const rejected = await t.api('POST', '/agent_ingresses', { domain: domainOfLength(bytes) });
      expectError(
        rejected,
        400,
        'ERR_INVALID_DOMAIN',
        `region domain us-cal-1.<domain> would be ${bytes + 9} bytes; DNS names are at most 253`,
      );
      expect(rejected.body.details.field).toBe('domain');
    }
  });

  it('rejects bad domains, bad policies, unknown fields and a domain in PATCH', async () => {
    expectError(await t.api('POST', '/agent_ingresses', {}), 400, 'ERR_MISSING_FIELD', 'domain');
    expectError(
      await t.api('POST', '/agent_ingresses', { domain: 42 }),
      400,
      'ERR_INVALID_FIELD',
      'domain',
    );
    for (const bad of [
      '',
      'localhost',
      '*.example.com',
      'example.com.',
      'bad_label.example.com',
      '-lead.example.com',
      'a..example.com',
      `${'a'.repeat(64)}.example.com`,
      `${'abcdefghi.'.repeat(25)}example.com`,
      '10.0.0.1',
      'exämple.com',
    ]) {
      expectError(
        await t.api('POST', '/agent_ingresses', { domain: bad }),
        400,
        'ERR_INVALID_DOMAIN',
      );
    }
    const domain = uniqueDomain();
    expect((await t.api('POST', '/agent_ingresses', { domain })).status).toBe(201);
    expectError(await t.api('POST', '/agent_ingresses', { domain }), 409, 'ERR_DOMAIN_TAKEN');
    expectError(
      await t.api('POST', '/agent_ingresses', { domain: domain.toUpperCase() }),
      409,
      'ERR_DOMAIN_TAKEN',
    );
    expectError(
      await t.api('POST', '/agent_ingresses', {
        domain: uniqueDomain(),
        certificate_management_policy: { authority: 'zerossl' },
      }),
      400,
      'ERR_INVALID_FIELD',
      'authority',
    );
    expectError(
      await t.api('POST', '/agent_ingresses', {
        domain: uniqueDomain(),
        certificate_management_policy: { authority: 'letsencrypt', private_key_type: 'dsa' },
      }),
      400,
      'ERR_INVALID_FIELD',
      'private_key_type',
    );
    expectError(
      await t.api('POST', '/agent_ingresses', {
        domain: uniqueDomain(),
        certificate_management_policy: { authority: 'letsencrypt', renew: true },
      }),
      400,
      'ERR_UNKNOWN_FIELD',
      'certificate_management_policy.renew',
    );
    expectError(
      await t.api('POST', '/agent_ingresses', { domain: uniqueDomain(), color: 'blue' }),
      400,
      'ERR_UNKNOWN_FIELD',
      'color',
    );
    const created = await t.api('POST', '/agent_ingresses', { domain: uniqueDomain() });
    expectError(
      await t.api('PATCH', `/agent_ingresses/${created.body.id}`, { domain: uniqueDomain() }),
      400,
      'ERR_FIELD_NOT_UPDATABLE',
      'domain',
    );
    expectError(
      await t.api('PATCH', `/agent_ingresses/${created.body.id}`, { region_domains: [] }),
      400,
      'ERR_UNKNOWN_FIELD',
    );
    expectError(await t.api('POST', '/agent_ingresses', [1, 2]), 400, 'ERR_INVALID_FIELD');
  });

  it('rejects bad list parameters', async () => {
    for (const limit of ['0', '101', '-1', 'ten', '1.5', '']) {
      expectError(
        await t.api('GET', `/agent_ingresses?limit=${limit}`),
        400,
        'ERR_INVALID_QUERY',
        'limit',
      );
    }
    for (const beforeId of ['nope', 'ak_06h01yx3eexeqasb5hgsrgp1e0', 'agin_short']) {
      expectError(
        await t.api('GET', `/agent_ingresses?before_id=${beforeId}`),
        400,
        'ERR_INVALID_QUERY',
        'before_id',
      );
    }
    expectError(await t.api('GET', '/agent_ingresses?page=2'), 400, 'ERR_INVALID_QUERY', 'page');
  });

  it('writes one audit event per change, in the same transaction, and none for a failed change', async () => {
    const before = await t.service.db.query<{ n: string }>(
      'SELECT count(*)::text AS n FROM audit_outbox',
    );
    const created = await t.api('POST', '/agent_ingresses', { domain: uniqueDomain() });
    await t.api('PATCH', `/agent_ingresses/${created.body.id}`, { metadata: 'm' });
    const afterPatch = (await t.api('GET', `/agent_ingresses/${created.body.id}`)).body;
    await t.api('DELETE', `/agent_ingresses/${created.body.id}`);
    // Failed mutations: duplicate domain, bad field, unknown id.
    await t.api('POST', '/agent_ingresses', { domain: afterPatch.domain, x: 1 });
    await t.api('PATCH', '/agent_ingresses/agin_06h01yx3eexeqasb5hgsrgp1e0', { metadata: 'x' });

    const events = await t.service.db.query<{ event_type: string; envelope: any }>(
      'SELECT event_type, envelope FROM audit_outbox WHERE seq > (SELECT COALESCE(max(seq), 0) FROM audit_outbox) - 3 ORDER BY seq',
    );
    const after = await t.service.db.query<{ n: string }>(
      'SELECT count(*)::text AS n FROM audit_outbox',
    );
    expect(Number(after.rows[0].n) - Number(before.rows[0].n)).toBe(3);
    expect(events.rows.map((r) => r.event_type)).toEqual([
      'agent_ingress_created.v0',
      'agent_ingress_updated.v0',
      'agent_ingress_deleted.v0',
    ]);
    const [createdEvent, updatedEvent, deletedEvent] = events.rows.map((r) => r.envelope);
    expect(createdEvent).toEqual({
      event_id: expect.stringMatching(/^ev_/),
      event_type: 'agent_ingress_created.v0',
      event_timestamp: expect.stringMatching(/Z$/),
      account_id: expect.stringMatching(/^ac_/),
      principal: {
        id: expect.stringMatching(/^ak_/),
        uri: expect.stringContaining('/api_keys/ak_'),
      },
      object: created.body,
    });
    expect(updatedEvent.object).toEqual(afterPatch);
    expect(deletedEvent.object).toEqual(afterPatch);
  });

  it('pages through 250 ingresses newest first, each exactly once', async () => {
    const account = await t.service.db.query<{ id: string }>('SELECT id FROM accounts LIMIT 1');
    expect(account.rows).toHaveLength(1);
    const key = await t.api('POST', '/api_keys', { description: 'pager' });
    const pager = apiClient(t.service.url, key.body.token);
    const before = (await pager('GET', '/agent_ingresses')).body.ingresses.length;
    expect(before).toBeLessThanOrEqual(100);
    const createdIds: string[] = [];
    for (let i = 0; i < 250; i++) {
      const res = await pager('POST', '/agent_ingresses', { domain: `page${i}-${uniqueDomain()}` });
      expect(res.status).toBe(201);
      createdIds.push(res.body.id);
    }
    const seen: string[] = [];
    let next: string | null = `${t.service.url}/agent_ingresses?limit=37`;
    let pages = 0;
    while (next !== null) {
      const page = await pager('GET', next.slice(t.service.url.length));
      expect(page.status).toBe(200);
      expect(page.body.ingresses.length).toBeLessThanOrEqual(37);
      seen.push(...page.body.ingresses.map((i: { id: string }) => i.id));
      next = page.body.next_page_uri;
      pages++;
    }
    expect(new Set(seen).size).toBe(seen.length);
    const newest = seen.slice(0, 250);
    expect(newest).toEqual([...createdIds].reverse());
    expect(pages).toBe(Math.ceil(seen.length / 37));
    const created = await pager('GET', '/agent_ingresses');
    expect(created.body.ingresses).toHaveLength(100);
    expect(created.body.next_page_uri).toBe(
      `${t.service.url}/agent_ingresses?before_id=${created.body.ingresses[99].id}`,
    );
  });
});
