import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintApiKey } from '../../src/control-plane/api/api-keys/mint.ts';
import type { Service } from '../../src/service.ts';
import { createAccount } from '../../src/store/accounts.ts';
import {
  curl,
  eventually,
  type SshAgent,
  startEchoServer,
  startSshAgent,
} from '../e2e/agents-helpers.ts';
import { dig } from '../helpers/dig.ts';
import { expectError } from '../helpers/expect-error.ts';
import { freePort } from '../helpers/free-port.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
  useTestService,
} from '../helpers/service.ts';
import { postgresStore, STORES, type TestStore } from '../helpers/stores.ts';

// Who may claim a name: the probe of issue 23 as one sequence. Account A holds an Agent Ingress
// and a subdomain of the service; account B tries every claim over, under and at A's names, the
// public suffixes and the service's own names, then binds A's hostname with ssh: all refused,
// and the service's DNS still answers A's zone for A's names.

const SERVICE_DOMAIN = 'agent-ingress.example';
const INGRESS = 'agents.a-corp.test';
const ENV = {
  REGIONS: 'us,eu',
  SERVICE_DOMAIN,
  NAME_SERVERS: `ns1.${SERVICE_DOMAIN},ns2.${SERVICE_DOMAIN}`,
};

/** A client of a new account with its own API key, at `service`. */
async function newAccount(service: Service): Promise<{ id: string; api: ApiClient }> {
  const id = await createAccount(service.db);
  const key = await mintApiKey(service.db, { accountId: id }, null, service.url);
  return { id, api: apiClient(service.url, key.token!) };
}

describe.each(STORES)('who may claim a name ($kind)', ({ open }) => {
  const t = useTestService(open, async () => ({ ...ENV, DNS_PORT: String(await freePort()) }));
  let b: ApiClient;
  let echo: Awaited<ReturnType<typeof startEchoServer>>;
  const agents: SshAgent[] = [];

  beforeAll(async () => {
    expect((await t.api('POST', '/agent_ingresses', { domain: INGRESS })).status).toBe(201);
    const shop = await t.api('POST', '/reserved_domains', { domain: `shop-a.${SERVICE_DOMAIN}` });
    expect(shop.status).toBe(201);
    b = (await newAccount(t.service)).api;
    echo = await startEchoServer();
  });
  afterAll(async () => {
    for (const agent of agents) await agent.kill();
    echo?.server.close();
  });

  /** `ssh -R hostname:80:…` with a new authtoken of `api`'s account; its exit and output. */
  async function bind(api: ApiClient, hostname: string): Promise<SshAgent> {
    const user = (await api('POST', '/credentials', {})).body.token;
    const agent = startSshAgent(t.service, { user, hostname, localPort: echo.port });
    agents.push(agent);
    return agent;
  }

  it('refuses another account every claim at, above or under A’s names, public suffixes and the service’s names', async () => {
    const refused: [string, string, number, string][] = [
      ['/agent_ingresses', 'a-corp.test', 409, 'ERR_DOMAIN_TAKEN'],
      ['/agent_ingresses', `x.${INGRESS}`, 409, 'ERR_DOMAIN_TAKEN'],
      ['/reserved_domains', `*.us.${INGRESS}`, 409, 'ERR_DOMAIN_TAKEN'],
      ['/reserved_domains', `evil.${INGRESS}`, 409, 'ERR_DOMAIN_TAKEN'],
      ['/reserved_domains', '*.a-corp.test', 409, 'ERR_DOMAIN_TAKEN'],
      ['/reserved_domains', 'a-corp.test', 409, 'ERR_DOMAIN_TAKEN'],
      ['/reserved_domains', `x.shop-a.${SERVICE_DOMAIN}`, 409, 'ERR_DOMAIN_TAKEN'],
      ['/reserved_domains', 'co.uk', 400, 'ERR_INVALID_DOMAIN'],
      ['/reserved_domains', '*.co.uk', 400, 'ERR_INVALID_DOMAIN'],
      ['/agent_ingresses', 'co.uk', 400, 'ERR_INVALID_DOMAIN'],
      ['/reserved_domains', 'github.io', 400, 'ERR_INVALID_DOMAIN'],
      ['/agent_ingresses', SERVICE_DOMAIN, 409, 'ERR_DOMAIN_TAKEN'],
      ['/reserved_domains', SERVICE_DOMAIN, 409, 'ERR_DOMAIN_TAKEN'],
      ['/agent_ingresses', `ns1.${SERVICE_DOMAIN}`, 409, 'ERR_DOMAIN_TAKEN'],
      ['/reserved_domains', `ns1.${SERVICE_DOMAIN}`, 409, 'ERR_DOMAIN_TAKEN'],
      ['/agent_ingresses', `cname.${SERVICE_DOMAIN}`, 409, 'ERR_DOMAIN_TAKEN'],
      ['/reserved_domains', `x.cname.${SERVICE_DOMAIN}`, 409, 'ERR_DOMAIN_TAKEN'],
      ['/reserved_domains', `x.acme.${SERVICE_DOMAIN}`, 409, 'ERR_DOMAIN_TAKEN'],
      ['/agent_ingresses', `us.tcp.${SERVICE_DOMAIN}`, 409, 'ERR_DOMAIN_TAKEN'],
      ['/reserved_domains', `us.tcp.${SERVICE_DOMAIN}`, 409, 'ERR_DOMAIN_TAKEN'],
      ['/agent_ingresses', `mine.${SERVICE_DOMAIN}`, 409, 'ERR_DOMAIN_TAKEN'],
    ];
    for (const [path, domain, status, code] of refused) {
      const answer = await b('POST', path, { domain });
      expectError(answer, status, code);
      // The answer names no account and no name but the one asked for.
      const told = (answer.body.msg as string).replaceAll(domain, '');
      expect(told, `${path} ${domain}`).not.toMatch(/ac_|shop-a|agents\.a-corp/);
    }
    expect((await b('GET', '/agent_ingresses')).body.ingresses).toEqual([]);
    expect((await b('GET', '/reserved_domains')).body.reserved_domains).toEqual([]);
    // What stays open: B's own names, a subdomain of the service, a name under a private suffix.
    expect((await b('POST', '/agent_ingresses', { domain: 'agents.b-corp.test' })).status).toBe(
      201,
    );
    expect(
      (await b('POST', '/reserved_domains', { domain: `shop-b.${SERVICE_DOMAIN}` })).status,
    ).toBe(201);
    expect((await b('POST', '/reserved_domains', { domain: 'b-corp.github.io' })).status).toBe(201);
    // A nests its own names freely.
    expect((await t.api('POST', '/reserved_domains', { domain: `shop.${INGRESS}` })).status).toBe(
      201,
    );
    expect((await t.api('POST', '/reserved_domains', { domain: 'www.a-corp.test' })).status).toBe(
      201,
    );
  });

  it('refuses B’s ssh bind of A’s hostname, serves A’s, and DNS answers A’s zone', async () => {
    const hostname = `app.us.${INGRESS}`;
    const intruder = await bind(b, hostname);
    expect(await intruder.exited).not.toBe(0);
    expect(intruder.output()).toContain(`"${hostname}" is a name of another account`);
    expect(intruder.output()).not.toContain('ac_');
    for (const name of [`shop-a.${SERVICE_DOMAIN}`, `cname.${SERVICE_DOMAIN}`]) {
      const other = await bind(b, name);
      expect(await other.exited).not.toBe(0);
    }
    const owner = await bind(t.api, hostname);
    await eventually(async () => {
      if (owner.child.exitCode !== null) throw new Error(`ssh exited: ${owner.output()}`);
      return (await curl(t.service.edgePort!, hostname, '/')).status === 200 ? true : undefined;
    }, 'A serving its hostname');
    const soa = await dig(t.service.dns!.port, hostname, 'SOA');
    expect(soa.authority.map((record) => record.name)).toEqual([`${INGRESS}.`]);
  });

  it('tells another account’s agent only that a name is in use, not by which session', async () => {
    // C serves a name, then gives its domain up while its agent stays; D claims the domain.
    const c = await newAccount(t.service);
    const domain = 'handover.test';
    const ingress = await c.api('POST', '/agent_ingresses', { domain });
    const hostname = `app.${domain}`;
    const holder = await bind(c.api, hostname);
    const session = await eventually(async () => {
      if (holder.child.exitCode !== null) throw new Error(`ssh exited: ${holder.output()}`);
      const list = (await c.api('GET', '/tunnel_sessions')).body.tunnel_sessions;
      return list.find((s: { metadata: string }) => s.metadata === hostname);
    }, 'C’s session');
    expect((await c.api('DELETE', `/agent_ingresses/${ingress.body.id}`)).status).toBe(204);
    const d = await newAccount(t.service);
    expect((await d.api('POST', '/agent_ingresses', { domain })).status).toBe(201);
    const second = await bind(d.api, hostname);
    expect(await second.exited).not.toBe(0);
    expect(second.output()).toContain(`"${hostname}" is in use by another agent`);
    expect(second.output()).not.toContain(session.id);
  });

  it('keeps a nested name stored before overlaps were refused inert: no zone, no bind', async () => {
    // As the probe left it on an older version: B's wildcard inside A's ingress, newer than it.
    const legacy = `*.eu.${INGRESS}`;
    const accountB = (await b('GET', '/account')).body.id;
    await t.service.db.query(
      `INSERT INTO account_objects (id, account_id, kind, unique_scope, unique_key, fields, created_at)
       VALUES ('rd_legacy', $1, 'reserved_domains', '', $2, $3, now())`,
      [
        accountB,
        legacy,
        JSON.stringify({
          domain: legacy,
          region: null,
          cname_target: null,
          acme_challenge_cname_target: null,
        }),
      ],
    );
    t.service.dns?.invalidate();
    const hostname = `app.eu.${INGRESS}`;
    const soa = await dig(t.service.dns!.port, hostname, 'SOA');
    expect(soa.authority.map((record) => record.name)).toEqual([`${INGRESS}.`]);
    const intruder = await bind(b, hostname);
    expect(await intruder.exited).not.toBe(0);
    expect(intruder.output()).toContain('is a name of another account');
  });
});

describe('claims made at once on two instances of one PostgreSQL store', () => {
  let store: TestStore;
  let first: Service;
  let second: Service;

  beforeAll(async () => {
    store = await postgresStore();
    first = await startTestService(store);
    second = await startTestService(store);
  });
  afterAll(async () => {
    await second?.close();
    await first?.close();
    await store?.cleanup();
  });

  it('stores exactly one of two overlapping claims of two accounts', async () => {
    const a = apiClient(first.url, TEST_BOOTSTRAP_KEY);
    const accountB = await createAccount(second.db);
    const key = await mintApiKey(second.db, { accountId: accountB }, null, second.url);
    const b = apiClient(second.url, key.token!);
    for (let round = 0; round < 8; round += 1) {
      const parent = `race-${round}.test`;
      const answers = await Promise.all([
        a('POST', '/agent_ingresses', { domain: parent }),
        b('POST', '/reserved_domains', { domain: `*.x.${parent}` }),
        b('POST', '/agent_ingresses', { domain: `y.${parent}` }),
      ]);
      const created = answers.filter((answer) => answer.status === 201);
      const refused = answers.filter((answer) => answer.status === 409);
      // A's alone, or B's two (which nest within one account).
      expect(
        created.length === 1 || created.length === 2,
        JSON.stringify(answers.map((x) => x.body)),
      ).toBe(true);
      expect(created.length + refused.length).toBe(3);
      const owners = new Set(created.map((answer) => answer === answers[0]));
      expect(owners.size).toBe(1);
    }
  });
});
