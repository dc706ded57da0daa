import { Ngrok } from '@ngrok/ngrok-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadPipelineConfig } from '../../src/data-plane/store/pipeline-config.ts';
import type { Service } from '../../src/service.ts';
import { expectError } from '../helpers/expect-error.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { STORES, type TestStore } from '../helpers/stores.ts';

// A source's redaction over the REST API (docs/security.md#redacted): redact_headers and
// keep_credentials stored with the source (migration 010), shown in every response, changed by
// PATCH, handed to the pipeline, refused where there are no headers; and the default for a
// client that knows neither field (ngrok's own).

const HTTP = 'http_request_complete.v0';
const TCP = 'tcp_connection_closed.v0';

describe.each(STORES)('Event source redaction on $kind', ({ open }) => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let destinationId: string;

  beforeAll(async () => {
    store = await open();
    service = await startTestService(store);
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    const res = await api('POST', '/event_destinations', { target: { file: { path: 'r' } } });
    destinationId = res.body.id;
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  it('stores, shows, changes and hands the pipeline a source’s redaction', async () => {
    const created = await api('POST', '/event_subscriptions', {
      sources: [
        { type: HTTP, redact_headers: ['X-Api-Key', 'x-api-key', 'X-Auth'] },
        { type: TCP },
      ],
      destination_ids: [destinationId],
    });
    expect(created.status).toBe(201);
    const id = created.body.id;
    expect(created.body.sources).toMatchObject([
      { type: HTTP, redact_headers: ['x-api-key', 'x-auth'], keep_credentials: false },
      { type: TCP, redact_headers: [], keep_credentials: false },
    ]);
    const path = `/event_subscriptions/${id}/sources/${HTTP}`;
    const kept = await api('PATCH', path, { keep_credentials: true });
    expect(kept.body).toMatchObject({
      keep_credentials: true,
      redact_headers: ['x-api-key', 'x-auth'],
    });
    const filterOnly = await api('PATCH', path, { filter: 'conn.server_port == 443' });
    expect(filterOnly.body).toMatchObject({ keep_credentials: true }); // omitted: unchanged
    expect((await api('GET', path)).body.keep_credentials).toBe(true);

    const config = await loadPipelineConfig(service.db, service.keyring);
    const sources = config.subscriptions.find((s) => s.id === id)!.sources;
    expect(sources.map((s) => [s.type, s.redactHeaders, s.keepCredentials])).toEqual([
      [HTTP, ['x-api-key', 'x-auth'], true],
      [TCP, [], false],
    ]);
  });

  it('refuses header names that are not tokens, too many, and redaction without headers', async () => {
    const subscribe = (source: Record<string, unknown>) =>
      api('POST', '/event_subscriptions', { sources: [source], destination_ids: [destinationId] });
    for (const name of ['', 'X Api', 'x:y', 'a'.repeat(65)]) {
      const res = await subscribe({ type: HTTP, redact_headers: [name] });
      expectError(res, 400, 'ERR_INVALID_FIELD');
      expect(res.body.details.field).toBe('sources[0].redact_headers[0]');
    }
    const many = Array.from({ length: 33 }, (_, i) => `x-h${i}`);
    expectError(await subscribe({ type: HTTP, redact_headers: many }), 400, 'ERR_INVALID_FIELD');
    expectError(await subscribe({ type: HTTP, keep_credentials: 'yes' }), 400, 'ERR_INVALID_FIELD');
    for (const field of [{ keep_credentials: true }, { redact_headers: ['x-a'] }]) {
      const res = await subscribe({ type: TCP, ...field });
      expectError(res, 400, 'ERR_INVALID_FIELD', `applies to ${HTTP} sources only`);
    }
  });

  it('gives a source made by ngrok’s client, which knows neither field, the default', async () => {
    const ngrok = new Ngrok({ baseUrl: service.url, apiToken: TEST_BOOTSTRAP_KEY });
    const subscription = await ngrok.eventSubscriptions.create({
      sources: [{ type: HTTP }],
      destinationIds: [destinationId],
    });
    const path = `/event_subscriptions/${subscription.id}/sources/${HTTP}`;
    expect((await api('GET', path)).body).toMatchObject({
      redact_headers: [],
      keep_credentials: false,
    });
    await api('PATCH', path, { keep_credentials: true });
    // ngrok's update sends no redaction field: the opt-in stays as it was.
    await ngrok.eventSources.update({ subscriptionId: subscription.id, type: HTTP });
    expect(
      (await ngrok.eventSources.get({ subscriptionId: subscription.id, type: HTTP })).type,
    ).toBe(HTTP);
    expect((await api('GET', path)).body.keep_credentials).toBe(true);
  });

  it('documents both fields in the OpenAPI document', async () => {
    const doc = (await api('GET', '/openapi.json')).body;
    const text = JSON.stringify(doc);
    expect(text).toContain('"redact_headers"');
    expect(text).toContain('"keep_credentials"');
  });
});
