import { beforeAll, describe, expect, it } from 'vitest';
import { mintApiKey } from '../../src/control-plane/api/api-keys/mint.ts';
import {
  currentPipelineVersion,
  loadPipelineConfig,
} from '../../src/data-plane/store/pipeline-config.ts';
import { createAccount } from '../../src/store/accounts.ts';
import { expectError } from '../helpers/expect-error.ts';
import { type ApiClient, apiClient, useTestService } from '../helpers/service.ts';
import { STORES } from '../helpers/stores.ts';

const HTTP = 'http_request_complete.v0';
const TCP = 'tcp_connection_closed.v0';
const KEY_CREATED = 'api_key_created.v0';
const MISSING_ID = 'esb_06h01yx3eexeqasb5hgsrgp1e0';

describe.each(STORES)('Event subscription API on $kind', ({ open }) => {
  const t = useTestService(open);
  let destinationId: string;

  const version = () => currentPipelineVersion(t.service.db);
  const newDestination = async (path: string, call: ApiClient = t.api): Promise<string> => {
    const res = await call('POST', '/event_destinations', { target: { file: { path } } });
    expect(res.status).toBe(201);
    return res.body.id;
  };
  const createSubscription = async (body: unknown = {}) => {
    const res = await t.api('POST', '/event_subscriptions', body);
    expect(res.status).toBe(201);
    return res.body;
  };

  beforeAll(async () => {
    destinationId = await newDestination('subscriptions');
  });

  it('creates, gets, lists, updates and deletes a subscription', async () => {
    const created = await t.api('POST', '/event_subscriptions', {
      description: 'edge traffic to the audit log',
      metadata: '{"owner":"sre"}',
      sources: [
        {
          type: HTTP,
          filter: 'ev.conn.server_port == 443',
          fields: ['conn', 'http.request.method'],
        },
        { type: KEY_CREATED },
      ],
      destination_ids: [destinationId],
    });
    expect(created.status).toBe(201);
    const subscription = created.body;
    const uri = `${t.service.url}/event_subscriptions/${subscription.id}`;
    expect(subscription).toEqual({
      id: expect.stringMatching(/^esb_[0-9a-z]{26}$/),
      uri,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      description: 'edge traffic to the audit log',
      metadata: '{"owner":"sre"}',
      sources: [
        {
          type: HTTP,
          filter: 'ev.conn.server_port == 443',
          fields: ['conn', 'http.request.method'],
          sample_rate: 1,
          redact_headers: [],
          keep_credentials: false,
          uri: `${uri}/sources/${HTTP}`,
        },
        {
          type: KEY_CREATED,
          filter: '',
          fields: [],
          sample_rate: 1,
          redact_headers: [],
          keep_credentials: false,
          uri: `${uri}/sources/${KEY_CREATED}`,
        },
      ],
      destinations: [
        { id: destinationId, uri: `${t.service.url}/event_destinations/${destinationId}` },
      ],
    });

    expect((await t.api('GET', `/event_subscriptions/${subscription.id}`)).body).toEqual(
      subscription,
    );
    const list = await t.api('GET', '/event_subscriptions');
    expect(list.status).toBe(200);
    expect(list.body.event_subscriptions).toContainEqual(subscription);
    expect(list.body.uri).toBe(`${t.service.url}/event_subscriptions`);
    expect(list.body.next_page_uri).toBeNull();

    const patched = await t.api('PATCH', `/event_subscriptions/${subscription.id}`, {
      description: '',
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...subscription, description: '' });

    const second = await newDestination('second');
    const replaced = await t.api('PATCH', `/event_subscriptions/${subscription.id}`, {
      sources: [{ type: TCP, filter: 'ev.conn.server_port != 22' }],
      destination_ids: [second, destinationId],
    });
    expect(replaced.status).toBe(200);
    expect(replaced.body.sources).toEqual([
      {
        type: TCP,
        filter: 'ev.conn.server_port != 22',
        fields: [],
        sample_rate: 1,
        redact_headers: [],
        keep_credentials: false,
        uri: `${uri}/sources/${TCP}`,
      },
    ]);
    expect(replaced.body.destinations.map((d: { id: string }) => d.id)).toEqual([
      second,
      destinationId,
    ]);
    expect(replaced.body.metadata).toBe('{"owner":"sre"}');

    const emptied = await t.api('PATCH', `/event_subscriptions/${subscription.id}`, {
      sources: [],
      destination_ids: [],
    });
    expect(emptied.body.sources).toEqual([]);
    expect(emptied.body.destinations).toEqual([]);

    const deleted = await t.api('DELETE', `/event_subscriptions/${subscription.id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.body).toBeNull();
    expectError(
      await t.api('GET', `/event_subscriptions/${subscription.id}`),
      404,
      'ERR_NOT_FOUND',
    );
    expectError(
      await t.api('DELETE', `/event_subscriptions/${subscription.id}`),
      404,
      'ERR_NOT_FOUND',
    );
    expectError(
      await t.api('GET', `/event_subscriptions/${subscription.id}/sources`),
      404,
      'ERR_NOT_FOUND',
    );
    const rows = await t.service.db.query(
      'SELECT 1 FROM event_sources WHERE subscription_id = $1 UNION ALL SELECT 1 FROM event_subscription_destinations WHERE subscription_id = $1',
      [subscription.id],
    );
    expect(rows.rows).toHaveLength(0);
  });

  it('manages sources one by one under /event_subscriptions/{id}/sources', async () => {
    const subscription = await createSubscription({
      sources: [{ type: KEY_CREATED }],
      destination_ids: [destinationId],
    });
    const sourcesUri = `/event_subscriptions/${subscription.id}/sources`;
    const list = await t.api('GET', sourcesUri);
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      sources: subscription.sources,
      uri: `${t.service.url}${sourcesUri}`,
    });

    const added = await t.api('POST', sourcesUri, {
      type: HTTP,
      filter: 'ev.conn.server_name.endsWith(".example.com")',
      fields: ['http.response.status_code'],
    });
    expect(added.status).toBe(201);
    expect(added.body).toEqual({
      type: HTTP,
      filter: 'ev.conn.server_name.endsWith(".example.com")',
      fields: ['http.response.status_code'],
      sample_rate: 1,
      redact_headers: [],
      keep_credentials: false,
      uri: `${t.service.url}${sourcesUri}/${HTTP}`,
    });
    expect((await t.api('GET', `${sourcesUri}/${HTTP}`)).body).toEqual(added.body);
    expect(
      (await t.api('GET', `/event_subscriptions/${subscription.id}`)).body.sources.map(
        (s: { type: string }) => s.type,
      ),
    ).toEqual([KEY_CREATED, HTTP]);

    const patched = await t.api('PATCH', `${sourcesUri}/${HTTP}`, { fields: [] });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...added.body, fields: [] });
    const refiltered = await t.api('PATCH', `${sourcesUri}/${HTTP}`, {
      filter: 'ev.conn.client_ip == "10.0.0.1"',
    });
    expect(refiltered.body).toEqual({
      ...added.body,
      fields: [],
      filter: 'ev.conn.client_ip == "10.0.0.1"',
    });

    expectError(
      await t.api('PATCH', `${sourcesUri}/${HTTP}`, { type: TCP }),
      400,
      'ERR_FIELD_NOT_UPDATABLE',
      'type',
    );
    expectError(
      await t.api('POST', sourcesUri, { type: HTTP }),
      400,
      'ERR_INVALID_FIELD',
      'already has a source',
    );
    expectError(
      await t.api('PATCH', `${sourcesUri}/${KEY_CREATED}`, { filter: 'true' }),
      400,
      'ERR_INVALID_FILTER',
      'only traffic events',
    );
    expectError(await t.api('GET', `${sourcesUri}/${TCP}`), 404, 'ERR_NOT_FOUND', TCP);
    expectError(await t.api('PATCH', `${sourcesUri}/${TCP}`, { filter: '' }), 404, 'ERR_NOT_FOUND');
    expectError(await t.api('DELETE', `${sourcesUri}/${TCP}`), 404, 'ERR_NOT_FOUND');
    expectError(
      await t.api('GET', `/event_subscriptions/${MISSING_ID}/sources/${HTTP}`),
      404,
      'ERR_NOT_FOUND',
      MISSING_ID,
    );

    const deleted = await t.api('DELETE', `${sourcesUri}/${HTTP}`);
    expect(deleted.status).toBe(204);
    expectError(await t.api('GET', `${sourcesUri}/${HTTP}`), 404, 'ERR_NOT_FOUND');
    expect((await t.api('GET', sourcesUri)).body.sources).toEqual(subscription.sources);

    // Each source change is an update of the subscription, with the whole subscription.
    const events = await t.service.db.query<{ event_type: string; envelope: any }>(
      `SELECT event_type, envelope FROM audit_outbox
       WHERE envelope->'object'->>'id' = $1 ORDER BY seq`,
      [subscription.id],
    );
    expect(events.rows.map((r) => r.event_type)).toEqual([
      'event_subscription_created.v0',
      'event_subscription_updated.v0',
      'event_subscription_updated.v0',
      'event_subscription_updated.v0',
      'event_subscription_updated.v0',
    ]);
    expect(events.rows[0].envelope.object).toEqual(subscription);
    expect(events.rows[1].envelope.object.sources).toEqual([subscription.sources[0], added.body]);
    expect(events.rows[4].envelope.object).toEqual(subscription);
  });

  it('rejects bad filters with their position and the filterable fields', async () => {
    const post = (filter: string, type = HTTP) =>
      t.api('POST', '/event_subscriptions', { sources: [{ type, filter }] });

    const syntax = await post('ev.conn.server_port == ');
    expectError(syntax, 400, 'ERR_INVALID_FILTER', 'syntax error');
    expect(syntax.body.msg).toMatch(/at column \d+/);
    expect(syntax.body.details).toMatchObject({
      field: 'sources[0].filter',
      type: HTTP,
      reason: 'syntax',
      position: { line: 1, column: expect.any(Number) },
      allowed_fields: expect.arrayContaining(['conn.server_port']),
    });

    const notFilterable = await post('ev.http.request.method == "GET"');
    expectError(
      notFilterable,
      400,
      'ERR_INVALID_FILTER',
      "'ev.http.request.method' is not filterable",
    );
    expect(notFilterable.body.msg).toContain('at column 1');
    expect(notFilterable.body.msg).toContain('conn.client_ip');

    expectError(await post('ev.nope == 1'), 400, 'ERR_INVALID_FILTER', 'unknown field');
    expectError(await post('ev.conn.server_port'), 400, 'ERR_INVALID_FILTER', 'bool');
    expectError(
      await post('ev.conn.server_name.matches("(")'),
      400,
      'ERR_INVALID_FILTER',
      'regular expression',
    );
    expectError(await post('true', KEY_CREATED), 400, 'ERR_INVALID_FILTER', 'only traffic events');
    expectError(
      await t.api('POST', '/event_subscriptions', { sources: [{ type: HTTP, filter: 42 }] }),
      400,
      'ERR_INVALID_FIELD',
      'sources[0].filter',
    );

    // The second source is the bad one: the details say which.
    const second = await t.api('POST', '/event_subscriptions', {
      sources: [{ type: KEY_CREATED }, { type: TCP, filter: 'ev.conn.bytes_in > 0' }],
    });
    expectError(second, 400, 'ERR_INVALID_FILTER', 'not filterable');
    expect(second.body.details.field).toBe('sources[1].filter');
  });

  it('rejects bad field selections, event types, duplicates and unknown fields', async () => {
    const post = (body: unknown) => t.api('POST', '/event_subscriptions', body);

    const unknownField = await post({ sources: [{ type: HTTP, fields: ['conn', 'nope.x'] }] });
    expectError(unknownField, 400, 'ERR_INVALID_FIELDS', "unknown field 'nope.x'; valid names:");
    expect(unknownField.body.msg).toContain('http.request.method');
    expect(unknownField.body.details).toMatchObject({
      field: 'sources[0].fields',
      invalid_fields: ['nope.x'],
    });
    expectError(
      await post({ sources: [{ type: KEY_CREATED, fields: ['id'] }] }),
      400,
      'ERR_INVALID_FIELDS',
      'only traffic events',
    );
    expectError(
      await post({ sources: [{ type: HTTP, fields: 'conn' }] }),
      400,
      'ERR_INVALID_FIELD',
      'sources[0].fields',
    );

    const unknownType = await post({ sources: [{ type: 'http_request_started.v0' }] });
    expectError(unknownType, 400, 'ERR_UNKNOWN_EVENT_TYPE', 'http_request_started.v0');
    expect(unknownType.body.msg).toContain(HTTP);
    expect(unknownType.body.msg).toContain(TCP);
    expectError(
      await post({ sources: [{ type: 'http_request_complete' }] }),
      400,
      'ERR_UNKNOWN_EVENT_TYPE',
      `did you mean "${HTTP}"`,
    );
    expectError(
      await t.api('POST', `/event_subscriptions/${(await createSubscription()).id}/sources`, {
        type: 'nope.v0',
      }),
      400,
      'ERR_UNKNOWN_EVENT_TYPE',
    );
    expectError(await post({ sources: [{}] }), 400, 'ERR_MISSING_FIELD', 'sources[0].type');
    expectError(
      await post({ sources: [{ type: 7 }] }),
      400,
      'ERR_INVALID_FIELD',
      'sources[0].type',
    );

    const duplicate = await post({
      sources: [{ type: HTTP }, { type: KEY_CREATED }, { type: HTTP, filter: 'true' }],
    });
    expectError(duplicate, 400, 'ERR_INVALID_FIELD', `"${HTTP}" twice`);
    expect(duplicate.body.details.field).toBe('sources[2].type');

    const nested = await post({ sources: [{ type: HTTP, color: 'blue' }] });
    expectError(nested, 400, 'ERR_UNKNOWN_FIELD', 'sources[0].color');
    expectError(await post({ sources: HTTP }), 400, 'ERR_INVALID_FIELD', 'sources');
    expectError(await post({ sources: ['x'] }), 400, 'ERR_INVALID_FIELD', 'sources[0]');
    expectError(await post({ destinations: [] }), 400, 'ERR_UNKNOWN_FIELD', 'destinations');
    expectError(
      await post({ destination_ids: 'ed_x' }),
      400,
      'ERR_INVALID_FIELD',
      'destination_ids',
    );
    expectError(
      await post({ destination_ids: [destinationId, destinationId] }),
      400,
      'ERR_INVALID_FIELD',
      'twice',
    );
    const missing = await post({ destination_ids: ['ed_06h01yx3eexeqasb5hgsrgp1e0'] });
    expectError(missing, 400, 'ERR_INVALID_FIELD', 'ed_06h01yx3eexeqasb5hgsrgp1e0');
    expect(missing.body.details).toMatchObject({
      field: 'destination_ids',
      id: 'ed_06h01yx3eexeqasb5hgsrgp1e0',
    });
    expectError(
      await post({ destination_ids: ['not-an-id'] }),
      400,
      'ERR_INVALID_FIELD',
      'not-an-id',
    );
  });

  it('counts description and metadata limits in characters', async () => {
    const euro = '€'; // 3 bytes, 1 character
    const ok = await createSubscription({
      description: euro.repeat(255),
      metadata: euro.repeat(4096),
    });
    expect(ok.description).toBe(euro.repeat(255));
    expectError(
      await t.api('POST', '/event_subscriptions', { description: euro.repeat(256) }),
      400,
      'ERR_FIELD_TOO_LONG',
      '255 characters',
    );
    expectError(
      await t.api('PATCH', `/event_subscriptions/${ok.id}`, { metadata: 'x'.repeat(4097) }),
      400,
      'ERR_FIELD_TOO_LONG',
      '4096 characters',
    );
  });

  it('fails a change as a whole: nothing written, no event, no version bump', async () => {
    const subscription = await createSubscription({
      sources: [{ type: HTTP }],
      destination_ids: [destinationId],
    });
    const outbox = async () =>
      Number(
        (await t.service.db.query<{ n: string }>('SELECT count(*)::text AS n FROM audit_outbox'))
          .rows[0].n,
      );
    const events = await outbox();
    const before = await version();
    expectError(
      await t.api('PATCH', `/event_subscriptions/${subscription.id}`, {
        description: 'changed',
        sources: [{ type: TCP }],
        destination_ids: ['ed_06h01yx3eexeqasb5hgsrgp1e0'],
      }),
      400,
      'ERR_INVALID_FIELD',
    );
    expectError(
      await t.api('PATCH', `/event_subscriptions/${MISSING_ID}`, { description: 'x' }),
      404,
      'ERR_NOT_FOUND',
    );
    expectError(
      await t.api('POST', `/event_subscriptions/${MISSING_ID}/sources`, { type: TCP }),
      404,
      'ERR_NOT_FOUND',
    );
    expect((await t.api('GET', `/event_subscriptions/${subscription.id}`)).body).toEqual(
      subscription,
    );
    expect(await outbox()).toBe(events);
    expect(await version()).toBe(before);
  });

  it('keeps accounts apart: subscriptions, sources and destinations of A are invisible to B', async () => {
    const subscription = await createSubscription({
      sources: [{ type: HTTP }],
      destination_ids: [destinationId],
    });
    const accountB = await createAccount(t.service.db);
    const keyB = await mintApiKey(t.service.db, { accountId: accountB }, null, t.service.url);
    const apiB = apiClient(t.service.url, keyB.token!);
    const id = subscription.id;
    const sources = `/event_subscriptions/${id}/sources`;
    for (const [method, path, body] of [
      ['GET', `/event_subscriptions/${id}`, undefined],
      ['PATCH', `/event_subscriptions/${id}`, { description: 'x' }],
      ['DELETE', `/event_subscriptions/${id}`, undefined],
      ['GET', sources, undefined],
      ['POST', sources, { type: TCP }],
      ['GET', `${sources}/${HTTP}`, undefined],
      ['PATCH', `${sources}/${HTTP}`, { filter: '' }],
      ['DELETE', `${sources}/${HTTP}`, undefined],
    ] as const) {
      const res = await apiB(method, path, body);
      expectError(res, 404, 'ERR_NOT_FOUND');
      expect(res.body.msg).toContain(id);
    }
    expect((await apiB('GET', '/event_subscriptions')).body.event_subscriptions).toEqual([]);

    // B cannot name A's destination: to B it does not exist.
    const borrowed = await apiB('POST', '/event_subscriptions', {
      destination_ids: [destinationId],
    });
    expectError(borrowed, 400, 'ERR_INVALID_FIELD', destinationId);
    const own = await newDestination('b-own', apiB);
    const theirs = await apiB('POST', '/event_subscriptions', {
      sources: [{ type: KEY_CREATED }],
      destination_ids: [own],
    });
    expect(theirs.status).toBe(201);
    expectError(
      await apiB('PATCH', `/event_subscriptions/${theirs.body.id}`, {
        destination_ids: [own, destinationId],
      }),
      400,
      'ERR_INVALID_FIELD',
      destinationId,
    );
    const listA = (await t.api('GET', '/event_subscriptions')).body.event_subscriptions;
    expect(listA.map((s: { id: string }) => s.id)).not.toContain(theirs.body.id);
    expect((await t.api('GET', `/event_subscriptions/${id}`)).body).toEqual(subscription);
  });

  it('bumps pipeline_version on every change and hands the pipeline every account’s routing', async () => {
    const steps: [string, string, unknown?][] = [];
    let before = await version();
    const subscription = await createSubscription({
      sources: [{ type: HTTP, filter: 'ev.conn.server_port == 443', fields: ['conn'] }],
      destination_ids: [destinationId],
    });
    expect(await version()).toBe(before + 1);
    const sources = `/event_subscriptions/${subscription.id}/sources`;
    steps.push(
      ['PATCH', `/event_subscriptions/${subscription.id}`, { metadata: 'm' }],
      ['POST', sources, { type: TCP }],
      ['PATCH', `${sources}/${TCP}`, { filter: 'ev.conn.server_port == 22' }],
      ['POST', sources, { type: KEY_CREATED }],
      ['DELETE', `${sources}/${KEY_CREATED}`],
    );
    for (const [method, path, body] of steps) {
      before = await version();
      const res = await t.api(method, path, body);
      expect(res.status).toBeLessThan(300);
      expect(await version()).toBe(before + 1);
    }

    const config = await loadPipelineConfig(t.service.db, t.service.keyring);
    expect(config.version).toBe(await version());
    const accountId = (
      await t.service.db.query<{ account_id: string }>(
        'SELECT account_id FROM event_subscriptions WHERE id = $1',
        [subscription.id],
      )
    ).rows[0].account_id;
    expect(config.subscriptions).toContainEqual({
      id: subscription.id,
      accountId,
      sources: [
        {
          type: HTTP,
          filter: 'ev.conn.server_port == 443',
          fields: ['conn'],
          sampleRate: 1,
          redactHeaders: [],
          keepCredentials: false,
        },
        {
          type: TCP,
          filter: 'ev.conn.server_port == 22',
          fields: [],
          sampleRate: 1,
          redactHeaders: [],
          keepCredentials: false,
        },
      ],
      destinationIds: [destinationId],
    });
    expect(config.destinations).toContainEqual({
      id: destinationId,
      accountId,
      format: 'JSON',
      target: { file: { path: 'subscriptions' } },
    });
    // Every account's subscriptions are in the one snapshot.
    const accounts = new Set(config.subscriptions.map((s) => s.accountId));
    expect(accounts.size).toBeGreaterThanOrEqual(2);

    before = await version();
    expect((await t.api('DELETE', `/event_subscriptions/${subscription.id}`)).status).toBe(204);
    expect(await version()).toBe(before + 1);
    const after = await loadPipelineConfig(t.service.db, t.service.keyring);
    expect(after.subscriptions.map((s) => s.id)).not.toContain(subscription.id);
  });

  it('pages through subscriptions newest first', async () => {
    const key = await t.api('POST', '/api_keys', { description: 'pager' });
    const pager = apiClient(t.service.url, key.body.token);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await pager('POST', '/event_subscriptions', { description: `s${i}` });
      ids.push(res.body.id);
    }
    const seen: string[] = [];
    let next: string | null = `${t.service.url}/event_subscriptions?limit=2`;
    while (next !== null) {
      const page = await pager('GET', next.slice(t.service.url.length));
      expect(page.status).toBe(200);
      expect(page.body.event_subscriptions.length).toBeLessThanOrEqual(2);
      seen.push(...page.body.event_subscriptions.map((s: { id: string }) => s.id));
      next = page.body.next_page_uri;
    }
    expect(seen.slice(0, 5)).toEqual([...ids].reverse());
    expectError(
      await t.api('GET', '/event_subscriptions?before_id=ed_06h01yx3eexeqasb5hgsrgp1e0'),
      400,
      'ERR_INVALID_QUERY',
      'before_id',
    );
  });
});
