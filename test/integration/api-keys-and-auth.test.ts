import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { mintApiKey } from '../../src/control-plane/api/api-keys/mint.ts';
import { createAccount } from '../../src/store/accounts.ts';
import { expectError } from '../helpers/expect-error.ts';
import { apiClient, TEST_BOOTSTRAP_KEY, useTestService } from '../helpers/service.ts';
import { STORES } from '../helpers/stores.ts';

describe.each(STORES)('API keys, auth and errors on $kind', ({ open }) => {
  const t = useTestService(open);

  it('shows a new key token once, stores only its hash, and lets it call the API', async () => {
    const created = await t.api('POST', '/api_keys', { description: 'ci', metadata: 'm' });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.stringMatching(/^ak_/),
      uri: `${t.service.url}/api_keys/${created.body.id}`,
      description: 'ci',
      metadata: 'm',
      created_at: expect.stringMatching(/Z$/),
      token: expect.stringMatching(/^aik_[A-Za-z0-9_-]{43}$/),
    });
    const token: string = created.body.token;
    const got = await t.api('GET', `/api_keys/${created.body.id}`);
    expect(got.body).toEqual({ ...created.body, token: null });

    const stored = await t.service.db.query<{ token_hash: Uint8Array }>(
      'SELECT token_hash FROM api_keys WHERE id = $1',
      [created.body.id],
    );
    expect(Buffer.from(stored.rows[0].token_hash)).toEqual(
      createHash('sha256').update(token).digest(),
    );
    const dump = await t.service.db.query('SELECT * FROM api_keys');
    expect(JSON.stringify(dump.rows)).not.toContain(token);
    const outbox = await t.service.db.query('SELECT envelope FROM audit_outbox');
    expect(JSON.stringify(outbox.rows)).not.toContain(token);

    const own = apiClient(t.service.url, token);
    expect((await own('GET', '/agent_ingresses')).status).toBe(200);

    const list = await t.api('GET', '/api_keys?limit=100');
    expect(list.body.keys.map((k: { id: string }) => k.id)).toContain(created.body.id);
    expect(list.body.keys.every((k: { token: null }) => k.token === null)).toBe(true);

    const patched = await t.api('PATCH', `/api_keys/${created.body.id}`, { metadata: '' });
    expect(patched.body).toEqual({ ...created.body, metadata: '', token: null });
    expectError(
      await t.api('PATCH', `/api_keys/${created.body.id}`, { token: 'x' }),
      400,
      'ERR_UNKNOWN_FIELD',
    );
    expectError(
      await t.api('POST', '/api_keys', { description: 'é'.repeat(128) }),
      400,
      'ERR_FIELD_TOO_LONG',
    );

    expect((await t.api('DELETE', `/api_keys/${created.body.id}`)).status).toBe(204);
    expectError(await own('GET', '/agent_ingresses'), 401, 'ERR_UNAUTHORIZED');
    const events = await t.service.db.query<{ event_type: string; envelope: any }>(
      "SELECT event_type, envelope FROM audit_outbox WHERE envelope->'object'->>'id' = $1 ORDER BY seq",
      [created.body.id],
    );
    expect(events.rows.map((r) => r.event_type)).toEqual([
      'api_key_created.v0',
      'api_key_updated.v0',
      'api_key_deleted.v0',
    ]);
    expect(events.rows[0].envelope.object.token).toBeNull();
  });

  it('answers 401 for a missing, malformed or unknown token', async () => {
    expectError(
      await apiClient(t.service.url)('GET', '/agent_ingresses'),
      401,
      'ERR_UNAUTHORIZED',
      'missing',
    );
    expectError(
      await apiClient(t.service.url)('GET', '/agent_ingresses', undefined, {
        authorization: 'Basic abc',
      }),
      401,
      'ERR_UNAUTHORIZED',
      'malformed',
    );
    expectError(
      await apiClient(t.service.url, 'aik_not-a-key')('GET', '/api_keys'),
      401,
      'ERR_UNAUTHORIZED',
    );
    expectError(
      await apiClient(t.service.url, `${TEST_BOOTSTRAP_KEY}x`)('POST', '/agent_ingresses', {
        domain: 'a.example.org',
      }),
      401,
      'ERR_UNAUTHORIZED',
    );
  });

  it('keeps accounts apart: another account’s objects are 404 and never listed', async () => {
    const accountB = await createAccount(t.service.db);
    const keyB = await mintApiKey(t.service.db, { accountId: accountB }, null, t.service.url);
    const b = apiClient(t.service.url, keyB.token!);
    const ingressA = await t.api('POST', '/agent_ingresses', {
      domain: `iso-${Date.now()}.example.net`,
    });
    const ingressB = await b('POST', '/agent_ingresses', {
      domain: `iso-b-${Date.now()}.example.net`,
    });
    expect(ingressB.status).toBe(201);
    const keyA = await t.api('POST', '/api_keys', {});

    for (const [method, path] of [
      ['GET', `/agent_ingresses/${ingressA.body.id}`],
      ['PATCH', `/agent_ingresses/${ingressA.body.id}`],
      ['DELETE', `/agent_ingresses/${ingressA.body.id}`],
      ['GET', `/api_keys/${keyA.body.id}`],
      ['PATCH', `/api_keys/${keyA.body.id}`],
      ['DELETE', `/api_keys/${keyA.body.id}`],
    ]) {
      const body = method === 'PATCH' ? { description: 'stolen' } : undefined;
      expectError(await b(method, path, body), 404, 'ERR_NOT_FOUND');
    }
    const listB = await b('GET', '/agent_ingresses');
    expect(listB.body.ingresses.map((i: { id: string }) => i.id)).toEqual([ingressB.body.id]);
    const keysB = await b('GET', '/api_keys');
    expect(keysB.body.keys.map((k: { id: string }) => k.id)).toEqual([keyB.id]);
    expect((await t.api('GET', `/agent_ingresses/${ingressA.body.id}`)).body.description).toBe('');
    const listA = await t.api('GET', '/agent_ingresses');
    expect(listA.body.ingresses.map((i: { id: string }) => i.id)).not.toContain(ingressB.body.id);
  });

  it('gives every protocol error the error body', async () => {
    expectError(await t.api('GET', '/nope'), 404, 'ERR_ROUTE_NOT_FOUND');
    const put = await t.api('PUT', '/agent_ingresses/agin_06h01yx3eexeqasb5hgsrgp1e0', {});
    expectError(put, 405, 'ERR_METHOD_NOT_ALLOWED');
    expect(put.headers.get('allow')).toBe('GET, PATCH, DELETE');
    expectError(
      await t.api('POST', '/agent_ingresses', 'domain=a.example.com', {
        'content-type': 'application/x-www-form-urlencoded',
      }),
      415,
      'ERR_UNSUPPORTED_MEDIA_TYPE',
    );
    expectError(
      await t.api('POST', '/agent_ingresses', 'hello', { 'content-type': 'text/plain' }),
      415,
      'ERR_UNSUPPORTED_MEDIA_TYPE',
    );
    expectError(await t.api('POST', '/agent_ingresses', '{"domain": '), 400, 'ERR_MALFORMED_JSON');
    expectError(await t.api('POST', '/agent_ingresses', ''), 400, 'ERR_MALFORMED_JSON');
    expectError(
      await t.api('POST', '/agent_ingresses', {
        domain: 'big.example.com',
        metadata: 'x'.repeat(2 * 1024 * 1024),
      }),
      413,
      'ERR_BODY_TOO_LARGE',
    );
    expectError(
      await t.api('POST', '/agent_ingresses', '"just a string"'),
      400,
      'ERR_INVALID_FIELD',
    );
    expectError(
      await t.api('POST', '/agent_ingresses', '{"__proto__": {"x": 1}}'),
      400,
      'ERR_MALFORMED_JSON',
    );
  });

  it('keeps everything across a restart', async () => {
    const ingress = await t.api('POST', '/agent_ingresses', {
      domain: `restart-${Date.now()}.example.org`,
      certificate_management_policy: { authority: 'letsencrypt', private_key_type: 'ecdsa' },
    });
    const key = await t.api('POST', '/api_keys', { description: 'survives' });
    await t.restart();
    const again = await t.api('GET', `/agent_ingresses/${ingress.body.id}`);
    expect({ ...again.body, uri: undefined }).toEqual({ ...ingress.body, uri: undefined });
    expect((await apiClient(t.service.url, key.body.token)('GET', '/api_keys')).status).toBe(200);
    const accounts = await t.service.db.query('SELECT id FROM accounts');
    expect(accounts.rows.length).toBeGreaterThanOrEqual(1);
  });
});
