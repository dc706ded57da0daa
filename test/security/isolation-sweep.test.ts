import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintApiKey } from '../../src/control-plane/api/api-keys/mint.ts';
import { RESOURCES as DECLARED } from '../../src/control-plane/api/resource-list.ts';
import { TOP_LEVEL_ROUTES } from '../../src/control-plane/api/resources.ts';
import type { Service } from '../../src/service.ts';
import { createAccount } from '../../src/store/accounts.ts';
import { eventually, type SshAgent, startSshAgent } from '../e2e/agents-helpers.ts';
import { expectError } from '../helpers/expect-error.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { STORES, type TestStore } from '../helpers/stores.ts';

// Generated from the service's own route table: every REST route is called by account B against
// account A's objects. A route this file cannot map to a fixture fails the suite, so a new route
// is covered the day it is added (or the author says here how to call it).

/** Each collection, from the declarations: the prefix its routes start with, its list key. */
type Resource = (typeof DECLARED)[number]['path'];
const RESOURCES = Object.fromEntries(
  DECLARED.map((resource) => [resource.path, { listKey: resource.listKey }]),
) as Record<Resource, { listKey: string }>;

const SOURCE_TYPE = 'http_request_complete.v0';

/**
 * Bodies that pass validation, for routes that read one: B must reach the ownership check (and
 * get 404 there), not be stopped earlier by a 400. Routes not listed are called without a body.
 */
const BODIES: Record<string, unknown> = {
  'PATCH /api_keys/:id': { description: 'stolen', metadata: 'stolen' },
  'PATCH /agent_ingresses/:id': { description: 'stolen', certificate_management_policy: null },
  'PATCH /event_destinations/:id': {
    description: 'stolen',
    target: { file: { path: 'stolen' } },
  },
  'PATCH /event_subscriptions/:id': { description: 'stolen', destination_ids: [] },
  'POST /event_subscriptions/:id/sources': { type: 'tcp_connection_closed.v0' },
  'PATCH /event_subscriptions/:id/sources/:type': { filter: 'conn.server_port == 1', fields: [] },
};

const DECLARATIONS = Object.fromEntries(DECLARED.map((resource) => [resource.path, resource]));

/** Declared actions on a collection (no object in the path), e.g. POST /endpoints/validate_policy. */
const COLLECTION_ACTIONS = new Set(
  DECLARED.flatMap((resource) =>
    (resource.extraRoutes ?? [])
      .filter((route) => !route.path.includes('{'))
      .map((route) => `/${resource.path}${route.path}`),
  ),
);

/** The body of a collection POST (create), from the declaration's example. */
function createBody(
  resource: Resource,
  tag: string,
  ids: Partial<Record<Resource, string>>,
  held?: string,
) {
  const unique = `${tag}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
  return DECLARATIONS[resource].example({
    tag: unique,
    idOf: (path) => ids[path as Resource] ?? `no object of ${path} yet`,
    held,
  });
}

/** Each account's Agent Ingress domain, once created: names its cloud endpoints live under. */
const heldBy: Record<string, string> = {};

/**
 * Routes over what agents make, not the API (live tunnel sessions, their tunnels): A's fixture is
 * a real agent session (ssh -R), its ids kept with A's objects.
 */
const LIVE = ['tunnel_sessions', 'tunnels'] as const;

/** The resource a route belongs to, from its first path segment; throws for an unknown one. */
function resourceOf(url: string): Resource {
  const first = url.split('/')[1];
  if (!Object.hasOwn(RESOURCES, first) && !LIVE.includes(first as never)) {
    throw new Error(
      `isolation sweep: route prefix "/${first}" has no fixture; declare it in src/control-plane/api/resources.ts and add its fixtures to ${import.meta.filename}`,
    );
  }
  return first as Resource;
}

/** A route's path with A's object filled in; throws for a parameter it does not know. */
function fillParams(url: string, ids: Record<Resource, string>): string {
  return url.replace(/:(\w+)/g, (_match, name: string) => {
    if (name === 'id') return ids[resourceOf(url)];
    if (name === 'type' && resourceOf(url) === 'event_subscriptions') return SOURCE_TYPE;
    throw new Error(
      `isolation sweep: parameter ":${name}" of ${url} has no fixture; add it to fillParams`,
    );
  });
}

describe.each(STORES)('account isolation sweep over every REST route on $kind', ({ open }) => {
  let store: TestStore;
  let service: Service;
  let a: ApiClient;
  let b: ApiClient;
  let accountA: string;
  let accountB: string;
  /** One object of every resource, owned by A. */
  const idsA = {} as Record<Resource, string>;
  /** B's own objects, so its lists are not trivially empty. */
  const idsB = {} as Record<Resource, string>;
  const exercised = new Set<string>();
  let agentA: SshAgent | undefined;

  beforeAll(async () => {
    store = await open();
    service = await startTestService(store);
    a = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    accountA = (await service.db.query<{ id: string }>('SELECT id FROM accounts')).rows[0].id;
    accountB = await createAccount(service.db);
    const keyB = await mintApiKey(service.db, { accountId: accountB }, null, service.url);
    b = apiClient(service.url, keyB.token!);

    // Creates go through the route table too: every collection POST is exercised here.
    for (const [who, call, ids] of [
      ['a', a, idsA],
      ['b', b, idsB],
    ] as const) {
      for (const resource of Object.keys(RESOURCES) as Resource[]) {
        const body = createBody(resource, `iso-${who}`, ids, heldBy[who]);
        const created = await call('POST', `/${resource}`, body);
        expect(created.status, JSON.stringify(created.body)).toBe(201);
        if (resource === 'agent_ingresses') heldBy[who] = created.body.domain;
        ids[resource] = created.body.id;
        exercised.add(`POST /${resource}`);
      }
    }
    // A live session of A's: an agent binding a name under A's Agent Ingress domain.
    const ingress = await a('GET', `/agent_ingresses/${idsA.agent_ingresses}`);
    const credential = await a('POST', '/credentials', {});
    agentA = startSshAgent(service, {
      user: credential.body.token,
      hostname: `app.${ingress.body.domain}`,
      localPort: 9,
    });
    const session = await eventually(async () => {
      if (agentA!.child.exitCode !== null) throw new Error(`ssh exited: ${agentA!.output()}`);
      return (await a('GET', '/tunnel_sessions')).body.tunnel_sessions[0];
    }, 'the session of A');
    (idsA as Record<string, string>).tunnel_sessions = session.id;
    (idsA as Record<string, string>).tunnels = session.id.replace(/^ts_/, 'tn_');
    // Health appears once the pipeline has loaded the destinations: snapshot after that.
    await service.pipeline.reload();
  });
  afterAll(async () => {
    await agentA?.kill();
    await service?.close();
    await store?.cleanup();
  });

  /** What A sees of each of its objects (and the subscription's source). */
  async function snapshotA() {
    const out: Record<string, unknown> = {};
    for (const resource of Object.keys(RESOURCES) as Resource[]) {
      const got = await a('GET', `/${resource}/${idsA[resource]}`);
      expect(got.status).toBe(200);
      out[resource] = got.body;
    }
    const sources = await a('GET', `/event_subscriptions/${idsA.event_subscriptions}/sources`);
    out.sources = sources.body;
    out.tunnelSessions = (await a('GET', '/tunnel_sessions')).body;
    out.tunnels = (await a('GET', '/tunnels')).body;
    const audit = await service.db.query(
      'SELECT count(*)::int AS n FROM audit_outbox WHERE account_id = $1',
      [accountA],
    );
    out.auditEvents = audit.rows[0];
    return out;
  }

  it('answers 404 ERR_NOT_FOUND to B on every route that names one of A’s objects', async () => {
    const before = await snapshotA();
    const withParams = service.routes.filter((route) => route.url.includes(':'));
    expect(withParams.length).toBeGreaterThan(0);
    const answers: string[] = [];
    for (const route of withParams) {
      const path = fillParams(route.url, idsA);
      const key = `${route.method} ${route.url}`;
      const body =
        BODIES[key] ?? (route.method === 'PATCH' ? { description: 'stolen' } : undefined);
      const response = await b(route.method, path, body);
      answers.push(`${key} -> ${response.status} ${response.body?.error_code ?? ''}`);
      expectError(response, 404, 'ERR_NOT_FOUND');
      expect(JSON.stringify(response.body)).not.toContain(accountA);
      exercised.add(key);
    }
    expect(await snapshotA(), answers.join('\n')).toEqual(before);
    // The test action sent nothing to A's destination.
    const dir = join(store.env.DATA_DIR, 'events', accountA);
    const files = (() => {
      try {
        return readdirSync(dir, { recursive: true }).map(String);
      } catch {
        return [];
      }
    })();
    expect(files.filter((file) => file.includes('.ndjson'))).toEqual([]);
  });

  it('names to each caller its own account (GET /account), never another', async () => {
    const [whoami] = TOP_LEVEL_ROUTES;
    expect((await a('GET', whoami.path)).body).toEqual({
      id: accountA,
      uri: `${service.url}${whoami.path}`,
    });
    const ofB = await b('GET', whoami.path);
    expect(ofB.body.id).toBe(accountB);
    expect(JSON.stringify(ofB.body)).not.toContain(accountA);
    exercised.add(`GET ${whoami.path}`);
  });

  it('shows B no trace of A in the live views (filter preview, pipeline counters)', async () => {
    // The preview is B's own (its account's events only; test/integration/tap.test.ts publishes
    // into it); here: it opens, ends at its bound, and names nothing of A.
    const preview = await b('POST', '/filters/preview?max_seconds=1', {
      type: SOURCE_TYPE,
      filter: '',
    });
    expect(preview.status).toBe(200);
    expect(preview.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(JSON.stringify(preview.body)).not.toContain(accountA);
    exercised.add('POST /filters/preview');
    const stats = await b('GET', '/pipeline/stats');
    expect(stats.status).toBe(200);
    expect(JSON.stringify(stats.body)).not.toContain(accountA);
    exercised.add('GET /pipeline/stats');
  });

  it('checks B’s policy for B alone: nothing of A in the answer, nothing saved', async () => {
    const before = await snapshotA();
    const checked = await b('POST', '/endpoints/validate_policy', {
      traffic_policy: DECLARATIONS.endpoints.example({ tag: 'iso', idOf: () => '' }).traffic_policy,
    });
    expect(checked.status).toBe(200);
    expect(JSON.stringify(checked.body)).not.toContain(accountA);
    expect(await snapshotA()).toEqual(before);
    exercised.add('POST /endpoints/validate_policy');
  });

  it('never lists A’s live tunnel sessions, tunnels or agent endpoints to B', async () => {
    const sessionA = (idsA as Record<string, string>).tunnel_sessions;
    expect((await a('GET', '/tunnel_sessions')).body.tunnel_sessions[0].id).toBe(sessionA);
    for (const query of ['', '?limit=100', `?before_id=ts_${'z'.repeat(26)}`]) {
      const page = await b('GET', `/tunnel_sessions${query}`);
      expect(page.status).toBe(200);
      expect(page.body.tunnel_sessions).toEqual([]);
      const tunnels = await b('GET', `/tunnels${query.replace('ts_', 'tn_')}`);
      expect(tunnels.status).toBe(200);
      expect(tunnels.body.tunnels).toEqual([]);
      // Nor its agent endpoint among B's endpoints.
      const endpoints = await b('GET', `/endpoints${query.replace('ts_', 'ep_')}`);
      expect(JSON.stringify(endpoints.body)).not.toContain(sessionA.slice('ts_'.length));
    }
    exercised.add('GET /tunnel_sessions');
    exercised.add('GET /tunnels');
  });

  it('never lists A’s objects to B, whatever the cursor', async () => {
    const topLevel = new Set(TOP_LEVEL_ROUTES.map((route) => route.path));
    const lists = service.routes.filter(
      (r) => r.method === 'GET' && !r.url.includes(':') && !topLevel.has(r.url),
    );
    expect(lists.length).toBe(Object.keys(RESOURCES).length);
    for (const route of lists) {
      const resource = resourceOf(route.url);
      const { listKey } = RESOURCES[resource];
      for (const query of ['', '?limit=100', `?before_id=${idsA[resource]}`]) {
        const page = await b('GET', `${route.url}${query}`);
        expect(page.status).toBe(200);
        const ids = page.body[listKey].map((item: { id: string }) => item.id);
        expect(ids).not.toContain(idsA[resource]);
        if (query !== '') continue;
        expect(ids).toContain(idsB[resource]);
        expect(JSON.stringify(page.body)).not.toContain(accountA);
      }
      exercised.add(`${route.method} ${route.url}`);
    }
  });

  it('refuses B’s references to A’s objects in its own creates and updates', async () => {
    // A subscription of B pointing at A's destination: the destination does not exist for B.
    const topLevel = new Set(TOP_LEVEL_ROUTES.map((route) => route.path));
    const creates = service.routes.filter(
      (r) =>
        r.method === 'POST' &&
        !r.url.includes(':') &&
        !topLevel.has(r.url) &&
        !COLLECTION_ACTIONS.has(r.url),
    );
    expect(creates.map((r) => resourceOf(r.url)).sort()).toEqual(Object.keys(RESOURCES).sort());
    const stolen = createBody('event_subscriptions', 'iso-b', idsA);
    expectError(
      await b('POST', '/event_subscriptions', stolen),
      400,
      'ERR_INVALID_FIELD',
      'was not found',
    );
    expectError(
      await b('PATCH', `/event_subscriptions/${idsB.event_subscriptions}`, {
        destination_ids: [idsA.event_destinations],
      }),
      400,
      'ERR_INVALID_FIELD',
      'was not found',
    );
    // Every declared reference, in every resource that has one.
    for (const resource of DECLARED) {
      for (const [name, field] of Object.entries(resource.fields)) {
        const theirs = field.ref && idsA[field.ref.path as Resource];
        if (theirs === undefined) continue;
        const body = {
          ...createBody(resource.path as Resource, 'iso-b', idsB, heldBy.b),
          [name]: field.schema.type === 'array' ? [theirs] : theirs,
        };
        const answer = await b('POST', `/${resource.path}`, body);
        expectError(answer, 400, 'ERR_INVALID_FIELD', 'was not found');
      }
    }
    const own = await b('GET', `/event_subscriptions/${idsB.event_subscriptions}`);
    const named = own.body.destinations.map((d: { id: string }) => d.id);
    expect(named).toEqual([idsB.event_destinations]);
    // The creates above (beforeAll) were B's own and made objects in B's account only.
    for (const resource of Object.keys(RESOURCES) as Resource[]) {
      expectError(await a('GET', `/${resource}/${idsB[resource]}`), 404, 'ERR_NOT_FOUND');
    }
  });

  it('has exercised every route of the route table (add a fixture for a new route)', () => {
    const all = service.routes.map((route) => `${route.method} ${route.url}`).sort();
    expect(all.length).toBeGreaterThan(0);
    expect([...exercised].sort()).toEqual(all);
    // Every body fixture still names a route: a renamed route does not leave a silent gap.
    for (const key of Object.keys(BODIES)) expect(all).toContain(key);
  });
});
