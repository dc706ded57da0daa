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

// sample_rate of an event source over the REST API: stored with the source (migration 007),
// shown in every response, handed to the pipeline, checked to lie in (0, 1].

const HTTP = 'http_request_complete.v0';
const KEY_CREATED = 'api_key_created.v0';

describe.each(STORES)('Event source sample_rate on $kind', ({ open }) => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let destinationId: string;

  beforeAll(async () => {
    store = await open();
    service = await startTestService(store);
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    const res = await api('POST', '/event_destinations', { target: { file: { path: 'sampled' } } });
    expect(res.status).toBe(201);
    destinationId = res.body.id;
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  it('stores, shows, changes and hands the pipeline a source’s sample_rate', async () => {
    const created = await api('POST', '/event_subscriptions', {
      sources: [{ type: HTTP, sample_rate: 0.25 }, { type: KEY_CREATED }],
      destination_ids: [destinationId],
    });
    expect(created.status).toBe(201);
    const id = created.body.id;
    expect(created.body.sources.map((s: { sample_rate: number }) => s.sample_rate)).toEqual([
      0.25, 1,
    ]);

    const source = await api('GET', `/event_subscriptions/${id}/sources/${HTTP}`);
    expect(source.body.sample_rate).toBe(0.25);

    const patched = await api('PATCH', `/event_subscriptions/${id}/sources/${HTTP}`, {
      sample_rate: 0.001,
    });
    expect(patched.status).toBe(200);
    expect(patched.body.sample_rate).toBe(0.001);
    const filterOnly = await api('PATCH', `/event_subscriptions/${id}/sources/${HTTP}`, {
      filter: 'conn.server_port == 443',
    });
    expect(filterOnly.body.sample_rate).toBe(0.001); // an omitted rate is unchanged

    const config = await loadPipelineConfig(service.db, service.keyring);
    const sources = config.subscriptions.find((s) => s.id === id)!.sources;
    expect(sources.map((s) => [s.type, s.sampleRate])).toEqual([
      [HTTP, 0.001],
      [KEY_CREATED, 1],
    ]);
  });

  it('rejects a rate outside (0, 1], of the wrong type, or on an audit source', async () => {
    for (const rate of [0, -0.5, 1.5]) {
      const res = await api('POST', '/event_subscriptions', {
        sources: [{ type: HTTP, sample_rate: rate }],
      });
      expectError(res, 400, 'ERR_INVALID_FIELD');
      expect(res.body.details.field).toBe('sources[0].sample_rate');
    }
    const text = await api('POST', '/event_subscriptions', {
      sources: [{ type: HTTP, sample_rate: '0.5' }],
    });
    expect(text.status).toBe(400);
    expect(text.body.details.field).toBe('sources[0].sample_rate');
    const audit = await api('POST', '/event_subscriptions', {
      sources: [{ type: KEY_CREATED, sample_rate: 0.5 }],
    });
    expectError(audit, 400, 'ERR_INVALID_FIELD');
    expect(audit.body.msg).toContain('traffic events only');
  });
});
