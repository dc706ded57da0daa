import { Ngrok } from '@ngrok/ngrok-api';
import type { EventTarget } from '@ngrok/ngrok-api/lib/datatypes.js';
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

// ngrok's official TypeScript client, unmodified, pointed at the service: every operation it has
// on the resources this service implements. Its `delete` parses the empty 204 answer as JSON
// and so rejects against api.ngrok.com too (README: "ngrok's API clients"); each test checks
// with a GET that the object is gone.

/** A target of this deployment, typed as ngrok's model (which has no file/kafka/clickhouse). */
const fileTarget = (path: string) => ({ file: { path } }) as unknown as EventTarget;

const SOURCE = 'http_request_complete.v0';
const OTHER_SOURCE = 'tcp_connection_closed.v0';

describe('ngrok’s official API client against the service', () => {
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

  it('creates, gets, lists, updates and deletes API keys', async () => {
    const created = await ngrok.apiKeys.create({ description: 'ngrok', metadata: 'm' });
    expect(created.token).toMatch(/^aik_/);
    expect((await ngrok.apiKeys.get(created.id)).description).toBe('ngrok');
    const updated = await ngrok.apiKeys.update({ id: created.id, description: 'renamed' });
    expect(updated.description).toBe('renamed');
    expect((await ngrok.apiKeys.list()).map((key) => key.id)).toContain(created.id);
    await clientDelete(() => ngrok.apiKeys.delete(created.id));
    expectError(await api('GET', `/api_keys/${created.id}`), 404, 'ERR_NOT_FOUND');
  });

  it('pages through a list with its beforeId parameter', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await ngrok.apiKeys.create({ description: `p${i}` })).id);
    const listed = (await ngrok.apiKeys.list(undefined, '1')).map((key) => key.id);
    expect(listed).toEqual(expect.arrayContaining(ids));
    expect(new Set(listed).size).toBe(listed.length);
  });

  it('creates, gets, lists, updates and deletes agent ingresses', async () => {
    const created = await ngrok.agentIngresses.create({
      domain: `ngrok-${Date.now()}.example.org`,
      certificateManagementPolicy: { authority: 'letsencrypt', privateKeyType: 'ecdsa' },
    });
    expect(created.certificateManagementPolicy?.privateKeyType).toBe('ecdsa');
    expect((await ngrok.agentIngresses.get(created.id)).domain).toBe(created.domain);
    const updated = await ngrok.agentIngresses.update({ id: created.id, description: 'd' });
    expect(updated.description).toBe('d');
    expect((await ngrok.agentIngresses.list()).map((i) => i.id)).toContain(created.id);
    await clientDelete(() => ngrok.agentIngresses.delete(created.id));
    expectError(await api('GET', `/agent_ingresses/${created.id}`), 404, 'ERR_NOT_FOUND');
  });

  it('creates, gets, lists, updates and deletes event destinations', async () => {
    const created = await ngrok.eventDestinations.create({
      format: 'json',
      target: fileTarget('ngrok-client'),
    });
    expect(created.format).toBe('JSON');
    expect((await ngrok.eventDestinations.get(created.id)).id).toBe(created.id);
    const updated = await ngrok.eventDestinations.update({ id: created.id, metadata: 'x' });
    expect(updated.metadata).toBe('x');
    expect((await ngrok.eventDestinations.list()).map((d) => d.id)).toContain(created.id);
    await clientDelete(() => ngrok.eventDestinations.delete(created.id));
    expectError(await api('GET', `/event_destinations/${created.id}`), 404, 'ERR_NOT_FOUND');
  });

  it('creates, gets, lists, updates and deletes event subscriptions and their sources', async () => {
    const destination = await ngrok.eventDestinations.create({
      format: 'JSON',
      target: fileTarget('ngrok-subscribed'),
    });
    const created = await ngrok.eventSubscriptions.create({
      sources: [{ type: SOURCE }],
      destinationIds: [destination.id],
    });
    expect(created.sources.map((s) => s.type)).toEqual([SOURCE]);
    expect((await ngrok.eventSubscriptions.get(created.id)).destinations[0].id).toBe(
      destination.id,
    );
    const updated = await ngrok.eventSubscriptions.update({ id: created.id, description: 'd' });
    expect(updated.description).toBe('d');
    expect((await ngrok.eventSubscriptions.list()).map((s) => s.id)).toContain(created.id);

    const subscriptionId = created.id;
    const source = await ngrok.eventSources.create({ subscriptionId, type: OTHER_SOURCE });
    expect(source.type).toBe(OTHER_SOURCE);
    expect((await ngrok.eventSources.get({ subscriptionId, type: OTHER_SOURCE })).type).toBe(
      OTHER_SOURCE,
    );
    const listed = await ngrok.eventSources.list({ subscriptionId });
    expect(listed.sources.map((s) => s.type)).toEqual([SOURCE, OTHER_SOURCE]);
    const same = await ngrok.eventSources.update({ subscriptionId, type: OTHER_SOURCE });
    expect(same.type).toBe(OTHER_SOURCE);
    await clientDelete(() => ngrok.eventSources.delete({ subscriptionId, type: OTHER_SOURCE }));
    expect((await ngrok.eventSources.list({ subscriptionId })).sources).toHaveLength(1);

    await clientDelete(() => ngrok.eventSubscriptions.delete(created.id));
    expectError(await api('GET', `/event_subscriptions/${created.id}`), 404, 'ERR_NOT_FOUND');
  });

  it('creates, gets, lists, updates and deletes tunnel credentials', async () => {
    const created = await ngrok.credentials.create({
      description: 'agent',
      acl: ['bind:*.example.com'],
    });
    expect(created.token).toMatch(/^cr_/);
    expect((await ngrok.credentials.get(created.id)).token).toBeFalsy();
    const updated = await ngrok.credentials.update({ id: created.id, acl: ['*'] });
    expect(updated.acl).toEqual(['*']);
    expect((await ngrok.credentials.list()).map((c) => c.id)).toContain(created.id);
    await clientDelete(() => ngrok.credentials.delete(created.id));
    expectError(await api('GET', `/credentials/${created.id}`), 404, 'ERR_NOT_FOUND');
  });

  it('creates, gets, lists, updates and deletes reserved domains and their certificate parts', async () => {
    const created = await ngrok.reservedDomains.create({
      domain: `ngrok-${Date.now()}.example.org`,
      region: '',
      certificateManagementPolicy: { authority: 'letsencrypt', privateKeyType: 'ecdsa' },
    });
    expect(created.cnameTarget).toMatch(/\.cname\./);
    expect((await ngrok.reservedDomains.get(created.id)).domain).toBe(created.domain);
    const updated = await ngrok.reservedDomains.update({ id: created.id, description: 'd' });
    expect(updated.description).toBe('d');
    expect((await ngrok.reservedDomains.list()).map((d) => d.id)).toContain(created.id);
    await clientDelete(() => ngrok.reservedDomains.deleteCertificateManagementPolicy(created.id));
    expect((await ngrok.reservedDomains.get(created.id)).certificateManagementPolicy).toBeFalsy();
    await clientDelete(() => ngrok.reservedDomains.deleteCertificate(created.id));
    await clientDelete(() => ngrok.reservedDomains.delete(created.id));
    expectError(await api('GET', `/reserved_domains/${created.id}`), 404, 'ERR_NOT_FOUND');
  });

  it('answers errors the client decodes, with the operation id in Ngrok-Operation-Id', async () => {
    const error = await ngrok.apiKeys.get('ak_missing').catch((e: unknown) => e);
    expect(error).toMatchObject({ errorCode: 'ERR_NOT_FOUND', statusCode: 404 });
    expect((error as { details: Map<string, unknown> }).details.get('id')).toBe('ak_missing');
    const raw = await api('PATCH', '/api_keys/ak_x', { description: 'x'.repeat(300) });
    expect(raw.headers.get('ngrok-operation-id')).toBe(raw.body.details.operation_id);
  });
});

describe('what ngrok’s clients send, answered like any other request', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;

  beforeAll(async () => {
    store = await pgliteStore();
    service = await startTestService(store);
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  it('deletes when a DELETE says Content-Type: application/json but sends no body', async () => {
    const key = await api('POST', '/api_keys', {});
    const response = await fetch(`${service.url}/api_keys/${key.body.id}`, {
      method: 'DELETE',
      headers: {
        authorization: `Bearer ${TEST_BOOTSTRAP_KEY}`,
        'content-type': 'application/json',
      },
    });
    expect(response.status).toBe(204);
    expect(response.headers.get('ngrok-operation-id')).toMatch(/^op_/);
  });

  it('accepts an "id" in a PATCH body equal to the path id and refuses another as unknown', async () => {
    const key = await api('POST', '/api_keys', {});
    const ok = await api('PATCH', `/api_keys/${key.body.id}`, { id: key.body.id, metadata: 'm' });
    expect(ok.status).toBe(200);
    const other = await api('PATCH', `/api_keys/${key.body.id}`, { id: 'ak_other' });
    expectError(other, 400, 'ERR_UNKNOWN_FIELD', '"id"');
  });

  it('accepts subscription_id and type on sources when they equal the path', async () => {
    const sub = await api('POST', '/event_subscriptions', {});
    const base = `/event_subscriptions/${sub.body.id}/sources`;
    const created = await api('POST', base, { subscription_id: sub.body.id, type: SOURCE });
    expect(created.status).toBe(201);
    const wrong = await api('POST', base, { subscription_id: 'esb_other', type: OTHER_SOURCE });
    expectError(wrong, 400, 'ERR_UNKNOWN_FIELD', '"subscription_id"');
    const same = await api('PATCH', `${base}/${SOURCE}`, {
      subscription_id: sub.body.id,
      type: SOURCE,
      filter: '',
    });
    expect(same.status).toBe(200);
    const changed = await api('PATCH', `${base}/${SOURCE}`, { type: OTHER_SOURCE });
    expectError(changed, 400, 'ERR_FIELD_NOT_UPDATABLE');
  });

  it.each(['datadog', 'azure_logs_ingestion'])('answers target %s as unsupported', async (kind) => {
    const response = await api('POST', '/event_destinations', { target: { [kind]: {} } });
    expectError(response, 400, 'ERR_UNSUPPORTED_TARGET');
    expect(response.body.details.field).toBe(`target.${kind}`);
  });

  it('refuses owner_id on API keys: a key belongs to the account of the key that made it', async () => {
    const response = await api('POST', '/api_keys', { owner_id: 'usr_x' });
    expectError(response, 400, 'ERR_UNKNOWN_FIELD', 'owner_id');
  });

  it('takes before_id and beforeId alike', async () => {
    const first = await api('POST', '/api_keys', {});
    await api('POST', '/api_keys', {});
    const ids = (await api('GET', '/api_keys')).body.keys.map((k: { id: string }) => k.id);
    const last = ids.at(-1);
    const snake = await api('GET', `/api_keys?before_id=${ids[0]}`);
    const camel = await api('GET', `/api_keys?beforeId=${ids[0]}`);
    expect(camel.body.keys).toEqual(snake.body.keys);
    expect(snake.body.keys.map((k: { id: string }) => k.id)).toContain(last);
    expect(first.status).toBe(201);
  });
});
