import { request as httpRequest } from 'node:http';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { mintApiKey } from '../../src/control-plane/api/api-keys/mint.ts';
import { type Service, startService } from '../../src/service.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { createIpRestrictions } from '../../src/shared/net/account-restrictions.ts';
import { createAccount } from '../../src/store/accounts.ts';
import { expectError } from '../helpers/expect-error.ts';
import { freePort } from '../helpers/free-port.ts';
import type { ApiResponse } from '../helpers/service.ts';
import { startTestService, TEST_BOOTSTRAP_KEY } from '../helpers/service.ts';
import { pgliteStore, postgresStore, type TestStore } from '../helpers/stores.ts';

// `api` IP restrictions over real sockets: the service listens on 127.0.0.1 and each request
// leaves from a chosen loopback address (the client socket is bound to it), so the service sees
// 127.0.0.1 or 127.0.0.2 as the peer, exactly as it would see a remote client.

/** A REST call whose TCP connection leaves from `from`. */
function callFrom(
  baseUrl: string,
  token: string,
  from: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<ApiResponse> {
  const url = new URL(path, baseUrl);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method,
        localAddress: from,
        agent: false,
        headers: {
          authorization: `Bearer ${token}`,
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          resolve({
            status: res.statusCode ?? 0,
            body: text === '' ? null : JSON.parse(text),
            headers: new Headers(res.headers as Record<string, string>),
          });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

describe('api IP restrictions', () => {
  let store: TestStore;
  let service: Service;
  const warnings: Record<string, any>[] = [];
  const from = (address: string) => (method: string, path: string, body?: unknown) =>
    callFrom(service.url, TEST_BOOTSTRAP_KEY, address, method, path, body);
  const one = from('127.0.0.1');
  const two = from('127.0.0.2');

  beforeAll(async () => {
    store = await pgliteStore();
    const port = String(await freePort());
    const config = loadConfig({
      PORT: port,
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      LOG_LEVEL: 'warn',
      BOOTSTRAP_API_KEY: TEST_BOOTSTRAP_KEY,
      // Random agent and edge ports: suites run side by side.
      SSH_PORT: '0',
      AGENT_PORT: '0',
      EDGE_HTTP_PORT: '0',
      EDGE_HTTPS_PORT: '0',
      ...store.env,
    });
    const capture = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) {
          warnings.push(JSON.parse(line));
        }
        done();
      },
    });
    service = await startService(config, createLogger(config.logLevel, capture));
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  /** A new policy with the given rules ([cidr, action]); returns its id and its rules' ids. */
  async function policyWith(...rules: [string, 'allow' | 'deny'][]) {
    const policy = (await one('POST', '/ip_policies', { description: 'test' })).body.id as string;
    const ruleIds: string[] = [];
    for (const [cidr, action] of rules) {
      const rule = await one('POST', '/ip_policy_rules', { cidr, action, ip_policy_id: policy });
      expect(rule.status, JSON.stringify(rule.body)).toBe(201);
      ruleIds.push(rule.body.id);
    }
    return { policy, ruleIds };
  }

  it('refuses a caller the enforced restriction does not allow, and only that caller', async () => {
    expect((await two('GET', '/ip_policies')).status).toBe(200);
    const office = await policyWith(['127.0.0.1/32', 'allow']);
    const restriction = await one('POST', '/ip_restrictions', {
      type: 'api',
      enforced: true,
      ip_policy_ids: [office.policy],
    });
    expect(restriction.status, JSON.stringify(restriction.body)).toBe(201);
    const refused = await two('GET', '/ip_policies');
    expectError(refused, 403, 'ERR_IP_RESTRICTED', '127.0.0.2');
    expect(refused.body.details).toMatchObject({
      client_ip: '127.0.0.2',
      ip_restriction_id: restriction.body.id,
    });
    expect((await one('GET', '/ip_policies')).status).toBe(200);
    // Writes are refused too, and change nothing.
    expectError(await two('POST', '/ip_policies', {}), 403, 'ERR_IP_RESTRICTED');

    // Another account has no restriction: its key works from 127.0.0.2.
    const account = await createAccount(service.db);
    const key = await mintApiKey(service.db, { accountId: account }, null, service.url);
    const theirs = await callFrom(service.url, key.token!, '127.0.0.2', 'GET', '/ip_policies');
    expect(theirs.status).toBe(200);

    // A rule allowing 127.0.0.2 applies to the next request; a deny rule wins over it.
    const allowTwo = await one('POST', '/ip_policy_rules', {
      cidr: '127.0.0.0/30',
      action: 'allow',
      ip_policy_id: office.policy,
    });
    expect((await two('GET', '/ip_policies')).status).toBe(200);
    const denyTwo = await one('POST', '/ip_policy_rules', {
      cidr: '127.0.0.2',
      action: 'deny',
      ip_policy_id: office.policy,
    });
    expectError(await two('GET', '/ip_policies'), 403, 'ERR_IP_RESTRICTED');

    // Not enforced: the request passes and a warning names the restriction and the address.
    warnings.length = 0;
    await one('PATCH', `/ip_restrictions/${restriction.body.id}`, { enforced: false });
    expect((await two('GET', '/ip_policies')).status).toBe(200);
    expect(warnings).toContainEqual(
      expect.objectContaining({
        level: 40,
        ip_restriction_id: restriction.body.id,
        client_ip: '127.0.0.2',
        msg: expect.stringContaining('not enforced'),
      }),
    );
    expect((await one('GET', '/ip_policies')).status).toBe(200);
    expect(warnings.filter((line) => line.client_ip === '127.0.0.1')).toEqual([]);

    for (const rule of [allowTwo, denyTwo]) {
      expect((await one('DELETE', `/ip_policy_rules/${rule.body.id}`)).status).toBe(204);
    }
    expect((await one('DELETE', `/ip_restrictions/${restriction.body.id}`)).status).toBe(204);
    expect((await two('GET', '/ip_policies')).status).toBe(200);
  });

  it('refuses, with 409, every change that would lock the caller out', async () => {
    const lockout = (response: ApiResponse) => {
      expectError(response, 409, 'ERR_IP_RESTRICTION_LOCKOUT', 'your own address 127.0.0.1');
      expect(response.body.details.client_ip).toBe('127.0.0.1');
    };
    const elsewhere = await policyWith(['127.0.0.2/32', 'allow']);
    const restrict = (ids: string[], enforced = true) =>
      one('POST', '/ip_restrictions', { type: 'api', enforced, ip_policy_ids: ids });
    lockout(await restrict([elsewhere.policy]));
    // The same restriction not enforced is harmless; enforcing it is the lockout.
    const warnOnly = await restrict([elsewhere.policy], false);
    expect(warnOnly.status).toBe(201);
    lockout(await one('PATCH', `/ip_restrictions/${warnOnly.body.id}`, { enforced: true }));

    const home = await policyWith(['127.0.0.0/31', 'allow'], ['10.0.0.0/8', 'deny']);
    const guard = await restrict([home.policy]);
    expect(guard.status).toBe(201);
    const [allowRule, denyRule] = home.ruleIds;
    lockout(await one('PATCH', `/ip_policy_rules/${allowRule}`, { cidr: '127.0.0.2/31' }));
    lockout(await one('DELETE', `/ip_policy_rules/${allowRule}`));
    lockout(await one('DELETE', `/ip_policies/${home.policy}`));
    lockout(
      await one('POST', '/ip_policy_rules', {
        cidr: '127.0.0.1',
        action: 'deny',
        ip_policy_id: home.policy,
      }),
    );
    lockout(
      await one('PATCH', `/ip_restrictions/${guard.body.id}`, {
        ip_policy_ids: [elsewhere.policy],
      }),
    );
    // Nothing of the refused changes stayed: the rules and the policy are all still there.
    for (const id of home.ruleIds) {
      expect((await one('GET', `/ip_policy_rules/${id}`)).body.ip_policy.id).toBe(home.policy);
    }
    expect((await one('GET', `/ip_restrictions/${guard.body.id}`)).body.ip_policies).toHaveLength(
      1,
    );
    // Harmless changes pass: the deny rule goes; a second policy adds addresses.
    expect((await one('DELETE', `/ip_policy_rules/${denyRule}`)).status).toBe(204);
    const both = await one('PATCH', `/ip_restrictions/${guard.body.id}`, {
      ip_policy_ids: [home.policy, elsewhere.policy],
    });
    expect(both.status).toBe(200);
    expect((await two('GET', '/ip_policies')).status).toBe(200);
    // Deleting the restriction lifts it.
    expect((await one('DELETE', `/ip_restrictions/${guard.body.id}`)).status).toBe(204);
    expect((await one('DELETE', `/ip_policies/${home.policy}`)).status).toBe(204);
  });

  it('gives agent and endpoint listeners the same decision through ipAllowed', async () => {
    const account = (await service.db.query<{ id: string }>('SELECT id FROM accounts LIMIT 1'))
      .rows[0].id;
    const restrictions = createIpRestrictions(service.db, 1000);
    expect(await restrictions.ipAllowed(account, 'agent', '127.0.0.2')).toBe(true);
    const agents = await policyWith(['127.0.0.1/32', 'allow']);
    await one('POST', '/ip_restrictions', {
      type: 'agent',
      enforced: true,
      ip_policy_ids: [agents.policy],
    });
    restrictions.invalidate(account);
    expect(await restrictions.ipAllowed(account, 'agent', '127.0.0.2')).toBe(false);
    expect(await restrictions.ipAllowed(account, 'agent', '::ffff:127.0.0.1')).toBe(true);
    expect(await restrictions.ipAllowed(account, 'endpoints', '127.0.0.2')).toBe(true);
    // An agent restriction does not touch the API.
    expect((await two('GET', '/ip_policies')).status).toBe(200);
  });
});

describe('api IP restrictions across instances sharing PostgreSQL', () => {
  let store: TestStore;
  let first: Service;
  let second: Service;

  beforeAll(async () => {
    store = await postgresStore();
    first = await startTestService(store);
    second = await startTestService(store, { IP_RESTRICTION_CACHE_TTL_MS: '500' });
  });
  afterAll(async () => {
    await second?.close();
    await first?.close();
    await store?.cleanup();
  });

  it('applies a change made on one instance on the other within the cache TTL', async () => {
    const on =
      (service: Service, address: string) => (method: string, path: string, body?: unknown) =>
        callFrom(service.url, TEST_BOOTSTRAP_KEY, address, method, path, body);
    expect((await on(second, '127.0.0.2')('GET', '/ip_policies')).status).toBe(200);
    const policy = (await on(first, '127.0.0.1')('POST', '/ip_policies', {})).body.id;
    await on(first, '127.0.0.1')('POST', '/ip_policy_rules', {
      cidr: '127.0.0.1/32',
      action: 'allow',
      ip_policy_id: policy,
    });
    const changedAt = performance.now();
    const created = await on(first, '127.0.0.1')('POST', '/ip_restrictions', {
      type: 'api',
      enforced: true,
      ip_policy_ids: [policy],
    });
    expect(created.status).toBe(201);
    // The instance that made the change applies it at once.
    expectError(await on(first, '127.0.0.2')('GET', '/ip_policies'), 403, 'ERR_IP_RESTRICTED');
    let status = 200;
    while (status === 200 && performance.now() - changedAt < 5000) {
      status = (await on(second, '127.0.0.2')('GET', '/ip_policies')).status;
      if (status === 200) await sleep(50);
    }
    expect(status).toBe(403);
    expect(performance.now() - changedAt).toBeLessThan(500 + 400);
    expect((await on(second, '127.0.0.1')('GET', '/ip_policies')).status).toBe(200);
  });
});
