import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { mintApiKey } from '../../src/control-plane/api/api-keys/mint.ts';
import { restApi } from '../../src/control-plane/api/index.ts';
import {
  currentPipelineVersion,
  loadPipelineConfig,
} from '../../src/data-plane/store/pipeline-config.ts';
import { installErrorHandlers } from '../../src/shared/http/http-errors.ts';
import { newId } from '../../src/shared/ids.ts';
import { createAccount } from '../../src/store/accounts.ts';
import { expectError } from '../helpers/expect-error.ts';
import { apiClient, TEST_BOOTSTRAP_KEY, useTestService } from '../helpers/service.ts';
import { STORES } from '../helpers/stores.ts';

// Secrets used in this file; none may appear in a response or an audit event.
const KAFKA_SECRET = 'kafka-sasl-secret-7f3a9c';
const CLICKHOUSE_SECRET = 'clickhouse-secret-2b8e41';

const kafkaTarget = (extra: Record<string, unknown> = {}) => ({
  kafka: {
    brokers: ['127.0.0.1:9092', 'kafka-2.internal:9093'],
    topic: 'agent-events',
    client_id: 'agent-ingress-test',
    compression: 'gzip',
    sasl: { mechanism: 'scram-sha-256', username: 'ingress', password: KAFKA_SECRET },
    tls: true,
    ...extra,
  },
});

const clickhouseTarget = (extra: Record<string, unknown> = {}) => ({
  clickhouse: {
    url: 'http://127.0.0.1:8123',
    database: 'events',
    table_prefix: 'agin_',
    user: 'writer',
    password: CLICKHOUSE_SECRET,
    ...extra,
  },
});

/** A destination without `health`, which the running pipeline adds once it has loaded it. */
function bare(destination: Record<string, unknown>) {
  const { health: _health, ...rest } = destination;
  return rest;
}

describe.each(STORES)('Event destination API on $kind', ({ open }) => {
  const t = useTestService(open);

  const version = () => currentPipelineVersion(t.service.db);

  it('creates, gets, lists, updates and deletes a file destination', async () => {
    const created = await t.api('POST', '/event_destinations', {
      description: 'local audit log',
      metadata: '{"team":"sec"}',
      format: 'json',
      target: { file: { path: 'audit', max_file_bytes: 1048576 } },
    });
    expect(created.status).toBe(201);
    const destination = created.body;
    expect(destination).toEqual({
      id: expect.stringMatching(/^ed_[0-9a-z]{26}$/),
      uri: `${t.service.url}/event_destinations/${destination.id}`,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      description: 'local audit log',
      metadata: '{"team":"sec"}',
      format: 'JSON',
      target: { file: { path: 'audit', max_file_bytes: 1048576 } },
    });

    expect(bare((await t.api('GET', `/event_destinations/${destination.id}`)).body)).toEqual(
      destination,
    );
    const list = await t.api('GET', '/event_destinations');
    expect(list.status).toBe(200);
    expect(list.body.event_destinations.map(bare)).toContainEqual(destination);
    expect(list.body.uri).toBe(`${t.service.url}/event_destinations`);
    expect(list.body.next_page_uri).toBeNull();

    const patched = await t.api('PATCH', `/event_destinations/${destination.id}`, {
      description: '',
      format: 'JSON',
      target: { file: { path: 'audit/v2' } },
    });
    expect(patched.status).toBe(200);
    expect(bare(patched.body)).toEqual({
      ...destination,
      description: '',
      target: { file: { path: 'audit/v2' } },
    });

    const deleted = await t.api('DELETE', `/event_destinations/${destination.id}`);
    expect(deleted.status).toBe(204);
    const events = await t.service.db.query<{ event_type: string; envelope: any }>(
      `SELECT event_type, envelope FROM audit_outbox
       WHERE envelope->'object'->>'id' = $1 ORDER BY seq`,
      [destination.id],
    );
    expect(events.rows.map((r) => r.event_type)).toEqual([
      'event_destination_created.v0',
      'event_destination_updated.v0',
      'event_destination_deleted.v0',
    ]);
    expect(events.rows[0].envelope.object).toEqual(destination);
    expect(events.rows[1].envelope.object).toEqual(bare(patched.body));
    expect(events.rows[2].envelope.object).toEqual(bare(patched.body));
    expect(deleted.body).toBeNull();
    expectError(await t.api('GET', `/event_destinations/${destination.id}`), 404, 'ERR_NOT_FOUND');
    expectError(
      await t.api('DELETE', `/event_destinations/${destination.id}`),
      404,
      'ERR_NOT_FOUND',
    );
    expectError(
      await t.api('PATCH', `/event_destinations/${destination.id}`, { description: 'x' }),
      404,
      'ERR_NOT_FOUND',
    );
  });

  it('defaults the format to JSON and pages with limit and before_id', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await t.api('POST', '/event_destinations', {
        target: { file: { path: `pages/${i}` } },
      });
      expect(res.status).toBe(201);
      expect(res.body.format).toBe('JSON');
      expect(res.body.description).toBe('');
      ids.push(res.body.id);
    }
    const first = await t.api('GET', '/event_destinations?limit=2');
    expect(first.body.event_destinations.map((d: { id: string }) => d.id)).toEqual([
      ids[2],
      ids[1],
    ]);
    expect(first.body.uri).toBe(`${t.service.url}/event_destinations?limit=2`);
    expect(first.body.next_page_uri).toBe(
      `${t.service.url}/event_destinations?limit=2&before_id=${ids[1]}`,
    );
    const second = await t.api('GET', first.body.next_page_uri.slice(t.service.url.length));
    expect(second.body.event_destinations[0].id).toBe(ids[0]);
    expectError(
      await t.api('GET', '/event_destinations?before_id=esb_06h01yx3eexeqasb5hgsrgp1e0'),
      400,
      'ERR_INVALID_QUERY',
      'before_id',
    );
  });

  it('takes every setting each sink declares, shows it back and documents it in /openapi.json', async () => {
    const PEM_KEY = '-----BEGIN PRIVATE KEY-----\nkafka-tls-key-5d1e\n-----END PRIVATE KEY-----\n';
    const PEM_CERT = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
    const full: Record<string, Record<string, unknown>> = {
      file: { path: 'every/setting', max_file_bytes: 4096, max_file_age_ms: 60_000 },
      kafka: {
        ...kafkaTarget().kafka,
        tls: { ca: PEM_CERT, cert: PEM_CERT, key: PEM_KEY, reject_unauthorized: false },
        max_in_flight_requests: 5,
        allow_auto_topic_creation: true,
        request_timeout_ms: 5_000,
        connection_timeout_ms: 1_000,
      },
      clickhouse: {
        ...clickhouseTarget().clickhouse,
        compression: { request: true },
        request_timeout_ms: 7_000,
      },
    };
    // Every declared setting is in `full`, so a setting added to a sink must be added here.
    const taken = (schema: Record<string, unknown>, prefix = ''): string[] =>
      Object.entries(schema.properties as Record<string, Record<string, unknown>>)
        .filter(([, property]) => property.readOnly !== true)
        .flatMap(([name, property]) =>
          property.properties === undefined
            ? [`${prefix}${name}`]
            : [`${prefix}${name}`, ...taken(property, `${prefix}${name}.`)],
        );
    const given = (value: Record<string, unknown>, prefix = ''): string[] =>
      Object.entries(value).flatMap(([name, inner]) =>
        inner !== null && typeof inner === 'object' && !Array.isArray(inner)
          ? [`${prefix}${name}`, ...given(inner as Record<string, unknown>, `${prefix}${name}.`)]
          : [`${prefix}${name}`],
      );
    const openapi = (await (await fetch(`${t.service.url}/openapi.json`)).json()) as {
      components: { schemas: Record<string, { properties: Record<string, unknown> }> };
    };
    const documented = Object.values(openapi.components.schemas).find(
      (schema) => schema.properties?.target !== undefined,
    )?.properties.target as { properties: Record<string, Record<string, unknown>> };
    expect(Object.keys(documented.properties).sort()).toEqual(Object.keys(full).sort());

    for (const [kind, settings] of Object.entries(full)) {
      expect(given(settings).sort()).toEqual(taken(documented.properties[kind]).sort());
      const created = await t.api('POST', '/event_destinations', { target: { [kind]: settings } });
      expect(created.status).toBe(201);
      const shown = (await t.api('GET', `/event_destinations/${created.body.id}`)).body.target[
        kind
      ];
      for (const name of given(settings)) {
        const [head, tail] = name.split('.');
        const value = tail === undefined ? settings[head] : (settings[head] as never)[tail];
        const at = tail === undefined ? shown : shown[head];
        const key = tail ?? head;
        if (['password', 'key'].includes(key)) {
          expect(at).not.toHaveProperty(key);
          expect(at[`${key}_set`]).toBe(true);
        } else if (typeof value !== 'object') {
          expect(at[key]).toEqual(value);
        }
      }
      expect(JSON.stringify(shown)).not.toMatch(/secret|kafka-tls-key/);
      const stored = (await loadPipelineConfig(t.service.db, t.service.keyring)).destinations.find(
        (d) => d.id === created.body.id,
      )?.target;
      expect(stored).toEqual({ [kind]: settings });
    }
  });

  it('never shows secrets: create, get, list, patch and audit events', async () => {
    const kafka = await t.api('POST', '/event_destinations', { target: kafkaTarget() });
    expect(kafka.status).toBe(201);
    expect(kafka.body.target).toEqual({
      kafka: {
        brokers: ['127.0.0.1:9092', 'kafka-2.internal:9093'],
        topic: 'agent-events',
        client_id: 'agent-ingress-test',
        compression: 'gzip',
        sasl: { mechanism: 'scram-sha-256', username: 'ingress', password_set: true },
        tls: true,
      },
    });
    const clickhouse = await t.api('POST', '/event_destinations', { target: clickhouseTarget() });
    expect(clickhouse.status).toBe(201);
    expect(clickhouse.body.target).toEqual({
      clickhouse: {
        url: 'http://127.0.0.1:8123',
        database: 'events',
        table_prefix: 'agin_',
        user: 'writer',
        password_set: true,
      },
    });

    // Responses show the target's keys in one fixed order, whatever the store kept.
    const fetched = await t.api('GET', `/event_destinations/${kafka.body.id}`);
    expect(JSON.stringify(fetched.body.target)).toBe(JSON.stringify(kafka.body.target));

    const responses = [
      kafka,
      clickhouse,
      await t.api('GET', `/event_destinations/${kafka.body.id}`),
      await t.api('GET', `/event_destinations/${clickhouse.body.id}`),
      await t.api('GET', '/event_destinations'),
      await t.api('PATCH', `/event_destinations/${kafka.body.id}`, { description: 'kafka' }),
      await t.api('PATCH', `/event_destinations/${clickhouse.body.id}`, {
        target: clickhouseTarget({ password: undefined }),
      }),
    ];
    for (const response of responses) {
      expect(response.status).toBeLessThan(300);
      const text = JSON.stringify(response.body);
      expect(text).not.toContain(KAFKA_SECRET);
      expect(text).not.toContain(CLICKHOUSE_SECRET);
      expect(text).not.toMatch(/"password"/);
    }
    await t.api('DELETE', `/event_destinations/${clickhouse.body.id}`);

    const outbox = await t.service.db.query<{ event_type: string; text: string }>(
      "SELECT event_type, envelope::text AS text FROM audit_outbox WHERE event_type LIKE 'event_destination_%'",
    );
    expect(outbox.rows.map((r) => r.event_type)).toEqual(
      expect.arrayContaining([
        'event_destination_created.v0',
        'event_destination_updated.v0',
        'event_destination_deleted.v0',
      ]),
    );
    for (const row of outbox.rows) {
      expect(row.text).not.toContain(KAFKA_SECRET);
      expect(row.text).not.toContain(CLICKHOUSE_SECRET);
      expect(row.text).not.toMatch(/"password"/);
    }
  });

  it('keeps an omitted password on PATCH only while the target kind stays the same', async () => {
    const created = await t.api('POST', '/event_destinations', { target: kafkaTarget() });
    const { id } = created.body;
    const stored = async () =>
      (await loadPipelineConfig(t.service.db, t.service.keyring)).destinations.find(
        (d) => d.id === id,
      )?.target;

    // Same kind, sasl without password: the stored password stays.
    const sameKind = await t.api('PATCH', `/event_destinations/${id}`, {
      target: {
        kafka: {
          brokers: ['127.0.0.1:9094'],
          topic: 'renamed',
          sasl: { mechanism: 'plain', username: 'other' },
        },
      },
    });
    expect(sameKind.status).toBe(200);
    expect(sameKind.body.target.kafka.sasl).toEqual({
      mechanism: 'plain',
      username: 'other',
      password_set: true,
    });
    expect(await stored()).toEqual({
      kafka: {
        brokers: ['127.0.0.1:9094'],
        topic: 'renamed',
        sasl: { mechanism: 'plain', username: 'other', password: KAFKA_SECRET },
      },
    });

    // A new password replaces it; a target without sasl drops it.
    await t.api('PATCH', `/event_destinations/${id}`, {
      target: kafkaTarget({ sasl: { mechanism: 'plain', username: 'u', password: 'new-pass' } }),
    });
    expect(await stored()).toMatchObject({ kafka: { sasl: { password: 'new-pass' } } });
    const noSasl = await t.api('PATCH', `/event_destinations/${id}`, {
      target: { kafka: { brokers: ['127.0.0.1:9092'], topic: 't' } },
    });
    expect(noSasl.body.target).toEqual({ kafka: { brokers: ['127.0.0.1:9092'], topic: 't' } });
    const noPassword = await t.api('PATCH', `/event_destinations/${id}`, {
      target: {
        kafka: {
          brokers: ['127.0.0.1:9092'],
          topic: 't',
          sasl: { mechanism: 'plain', username: 'u' },
        },
      },
    });
    expectError(noPassword, 400, 'ERR_INVALID_TARGET', 'sasl.password is required');
    expect(noPassword.body.details.field).toBe('target.kafka.sasl.password');

    // Kind changes: nothing is carried over.
    const toClickhouse = await t.api('PATCH', `/event_destinations/${id}`, {
      target: { clickhouse: { url: 'https://ch.example.com:8443' } },
    });
    expect(toClickhouse.status).toBe(200);
    expect(toClickhouse.body.target).toEqual({
      clickhouse: { url: 'https://ch.example.com:8443', password_set: false },
    });
    expect(await stored()).toEqual({ clickhouse: { url: 'https://ch.example.com:8443' } });
    await t.api('PATCH', `/event_destinations/${id}`, { target: clickhouseTarget() });
    await t.api('PATCH', `/event_destinations/${id}`, {
      target: clickhouseTarget({ password: undefined, user: 'reader' }),
    });
    expect(await stored()).toMatchObject({
      clickhouse: { user: 'reader', password: CLICKHOUSE_SECRET },
    });
    const cleared = await t.api('PATCH', `/event_destinations/${id}`, {
      target: clickhouseTarget({ password: '' }),
    });
    expect(cleared.body.target.clickhouse.password_set).toBe(false);
    expectError(
      await t.api('PATCH', `/event_destinations/${id}`, {
        target: kafkaTarget({ sasl: { mechanism: 'plain', username: 'u' } }),
      }),
      400,
      'ERR_INVALID_TARGET',
      'password',
    );
  });

  it('rejects unsupported, missing, doubled and invalid targets', async () => {
    const post = (body: unknown) => t.api('POST', '/event_destinations', body);
    for (const kind of ['firehose', 'kinesis', 'cloudwatch_logs']) {
      const res = await post({
        target: { [kind]: { auth: { role: { role_arn: 'arn:aws:iam::1:role/x' } } } },
      });
      expectError(
        res,
        400,
        'ERR_UNSUPPORTED_TARGET',
        `"${kind}" is not supported by this deployment; supported: file, kafka, clickhouse`,
      );
      expect(res.body.details.field).toBe(`target.${kind}`);
    }
    expectError(
      await post({ target: { file: { path: 'a' }, ...kafkaTarget() } }),
      400,
      'ERR_INVALID_TARGET',
      'file and kafka',
    );
    expectError(await post({ target: {} }), 400, 'ERR_INVALID_TARGET', 'exactly one');
    expectError(await post({ target: 'file' }), 400, 'ERR_INVALID_TARGET', 'target');
    expectError(await post({ target: null }), 400, 'ERR_INVALID_TARGET', 'target');
    expectError(await post({ target: { file: null } }), 400, 'ERR_INVALID_TARGET', 'target.file');
    expectError(await post({ description: 'none' }), 400, 'ERR_MISSING_FIELD', 'target');

    // Kafka values, checked by the Kafka sink's own parser.
    for (const brokers of [[], ['no-port'], ['host:port'], ['a:1', 'bad host:1']]) {
      expectError(
        await post({ target: kafkaTarget({ brokers }) }),
        400,
        'ERR_INVALID_TARGET',
        'brokers',
      );
    }
    expectError(
      await post({ target: kafkaTarget({ brokers: '127.0.0.1:9092' }) }),
      400,
      'ERR_INVALID_TARGET',
      'target.kafka.brokers',
    );
    expectError(
      await post({ target: kafkaTarget({ topic: 'no spaces' }) }),
      400,
      'ERR_INVALID_TARGET',
      'topic',
    );
    expectError(
      await post({ target: kafkaTarget({ compression: 'zstd' }) }),
      400,
      'ERR_INVALID_TARGET',
      'compression',
    );
    expectError(
      await post({
        target: kafkaTarget({ sasl: { mechanism: 'gssapi', username: 'u', password: 'p' } }),
      }),
      400,
      'ERR_INVALID_TARGET',
      'sasl.mechanism',
    );
    expectError(
      await post({ target: kafkaTarget({ tls: 'yes' }) }),
      400,
      'ERR_INVALID_TARGET',
      'target.kafka.tls',
    );

    // ClickHouse values.
    for (const url of ['not a url', 'ftp://ch.example.com', 'http://user:pw@ch.example.com']) {
      expectError(
        await post({ target: clickhouseTarget({ url }) }),
        400,
        'ERR_INVALID_TARGET',
        'url',
      );
    }
    expectError(
      await post({ target: clickhouseTarget({ database: 'drop table' }) }),
      400,
      'ERR_INVALID_TARGET',
      'database',
    );
    expectError(
      await post({ target: { clickhouse: { user: 'u' } } }),
      400,
      'ERR_INVALID_TARGET',
      'target.clickhouse.url',
    );

    // File paths stay inside the account's directory, DATA_DIR/events/<account_id>.
    for (const path of ['../escape', 'a/../../escape', '/tmp/absolute', '', '.']) {
      expectError(await post({ target: { file: { path } } }), 400, 'ERR_INVALID_TARGET', 'path');
    }
    expectError(
      await post({ target: { file: { path: 'ok', max_file_bytes: 0 } } }),
      400,
      'ERR_INVALID_TARGET',
      'max_file_bytes',
    );

    // Format and unknown fields at any depth.
    for (const format of ['XML', 'ndjson', 42]) {
      expectError(
        await post({ format, target: { file: { path: 'x' } } }),
        400,
        'ERR_INVALID_FIELD',
        'format',
      );
    }
    for (const [target, field] of [
      [
        kafkaTarget({ sasl: { mechanism: 'plain', username: 'u', password: 'p', token: 't' } }),
        'target.kafka.sasl.token',
      ],
      [kafkaTarget({ acks: 'all' }), 'target.kafka.acks'],
      [{ file: { path: 'x', rotate: true } }, 'target.file.rotate'],
      [
        clickhouseTarget({ compression: { response: true } }),
        'target.clickhouse.compression.response',
      ],
      [kafkaTarget({ tls: { ca: 'x', verify: true } }), 'target.kafka.tls.verify'],
      [{ s3: { bucket: 'b' } }, 'target.s3'],
    ] as const) {
      const res = await post({ target });
      expectError(res, 400, 'ERR_UNKNOWN_FIELD', field);
      expect(res.body.details.field).toBe(field);
    }
    expectError(
      await post({ target: { file: { path: 'x' } }, status: 'ok' }),
      400,
      'ERR_UNKNOWN_FIELD',
      'status',
    );
    expectError(
      await post({ target: { file: { path: 'x' } }, description: 'é'.repeat(128) }),
      400,
      'ERR_FIELD_TOO_LONG',
      '255 bytes',
    );
    expectError(
      await post({ target: { file: { path: 'x' } }, metadata: 'x'.repeat(4097) }),
      400,
      'ERR_FIELD_TOO_LONG',
      '4096 bytes',
    );

    // The same checks apply to PATCH, and a failed PATCH changes nothing.
    const created = await post({ target: { file: { path: 'kept' } } });
    expectError(
      await t.api('PATCH', `/event_destinations/${created.body.id}`, {
        target: { kinesis: { stream_arn: 'arn' } },
      }),
      400,
      'ERR_UNSUPPORTED_TARGET',
    );
    expectError(
      await t.api('PATCH', `/event_destinations/${created.body.id}`, {
        target: { file: { path: '../../etc' } },
      }),
      400,
      'ERR_INVALID_TARGET',
      'escapes',
    );
    expectError(
      await t.api('PATCH', `/event_destinations/${created.body.id}`, { id: 'ed_x' }),
      400,
      'ERR_UNKNOWN_FIELD',
    );
    expect(bare((await t.api('GET', `/event_destinations/${created.body.id}`)).body)).toEqual(
      bare(created.body),
    );
  });

  it('refuses to delete a destination a subscription still uses (409)', async () => {
    const destination = await t.api('POST', '/event_destinations', {
      target: { file: { path: 'in-use' } },
    });
    const subscription = await t.api('POST', '/event_subscriptions', {
      sources: [{ type: 'api_key_created.v0' }],
      destination_ids: [destination.body.id],
    });
    expect(subscription.status).toBe(201);
    const conflict = await t.api('DELETE', `/event_destinations/${destination.body.id}`);
    expectError(conflict, 409, 'ERR_DESTINATION_IN_USE', subscription.body.id);
    expect(conflict.body.details.subscription_ids).toEqual([subscription.body.id]);
    expect((await t.api('GET', `/event_destinations/${destination.body.id}`)).status).toBe(200);

    await t.api('PATCH', `/event_subscriptions/${subscription.body.id}`, { destination_ids: [] });
    expect((await t.api('DELETE', `/event_destinations/${destination.body.id}`)).status).toBe(204);
  });

  it('gives a file directory to one destination of an account; other accounts have their own', async () => {
    const first = await t.api('POST', '/event_destinations', {
      target: { file: { path: 'shared/dir' } },
    });
    expect(first.status).toBe(201);
    expect(first.body.target.file.path).toBe('shared/dir');
    for (const path of ['shared/dir', 'shared/./dir/', 'shared//dir']) {
      expectError(
        await t.api('POST', '/event_destinations', { target: { file: { path } } }),
        400,
        'ERR_INVALID_TARGET',
        'already used',
      );
    }
    // Paths are per account (DATA_DIR/events/<account_id>/<path>): B's is a directory of its own.
    const accountB = await createAccount(t.service.db);
    const keyB = await mintApiKey(t.service.db, { accountId: accountB }, null, t.service.url);
    const b = apiClient(t.service.url, keyB.token!);
    expect(
      (await b('POST', '/event_destinations', { target: { file: { path: 'shared/dir' } } })).status,
    ).toBe(201);
    const other = await t.api('POST', '/event_destinations', {
      target: { file: { path: 'shared/other' } },
    });
    expectError(
      await t.api('PATCH', `/event_destinations/${other.body.id}`, {
        target: { file: { path: 'shared/dir' } },
      }),
      400,
      'ERR_INVALID_TARGET',
    );
    expect(
      (
        await t.api('PATCH', `/event_destinations/${first.body.id}`, {
          target: { file: { path: 'shared/dir' } },
        })
      ).status,
    ).toBe(200);
  });

  it('keeps accounts apart: another account’s destinations are 404 and never listed', async () => {
    const mine = await t.api('POST', '/event_destinations', { target: { file: { path: 'mine' } } });
    const accountB = await createAccount(t.service.db);
    const keyB = await mintApiKey(t.service.db, { accountId: accountB }, null, t.service.url);
    const apiB = apiClient(t.service.url, keyB.token!);
    const id = mine.body.id;
    expectError(await apiB('GET', `/event_destinations/${id}`), 404, 'ERR_NOT_FOUND');
    expectError(
      await apiB('PATCH', `/event_destinations/${id}`, { description: 'x' }),
      404,
      'ERR_NOT_FOUND',
    );
    expectError(await apiB('DELETE', `/event_destinations/${id}`), 404, 'ERR_NOT_FOUND');
    expect((await apiB('GET', '/event_destinations')).body.event_destinations).toEqual([]);
    const theirs = await apiB('POST', '/event_destinations', {
      target: { file: { path: 'theirs' } },
    });
    expect(theirs.status).toBe(201);
    const listA = (await t.api('GET', '/event_destinations')).body.event_destinations;
    expect(listA.map((d: { id: string }) => d.id)).not.toContain(theirs.body.id);
    expect((await t.api('GET', `/event_destinations/${id}`)).body.description).toBe('');
  });

  it('bumps pipeline_version on every change and hands the pipeline the full targets', async () => {
    let before = await version();
    const created = await t.api('POST', '/event_destinations', { target: kafkaTarget() });
    expect(await version()).toBeGreaterThan(before);
    before = await version();
    await t.api('PATCH', `/event_destinations/${created.body.id}`, { metadata: 'm' });
    expect(await version()).toBeGreaterThan(before);

    // Failed changes leave the version where it was.
    before = await version();
    await t.api('POST', '/event_destinations', { target: {} });
    await t.api('PATCH', `/event_destinations/${created.body.id}`, {
      target: { file: { path: '..' } },
    });
    await t.api('DELETE', '/event_destinations/ed_06h01yx3eexeqasb5hgsrgp1e0');
    expect(await version()).toBe(before);

    const config = await loadPipelineConfig(t.service.db, t.service.keyring);
    expect(config.version).toBe(before);
    const account = (
      await t.service.db.query<{ account_id: string }>(
        'SELECT account_id FROM event_destinations WHERE id = $1',
        [created.body.id],
      )
    ).rows[0].account_id;
    expect(config.destinations).toContainEqual({
      id: created.body.id,
      accountId: account,
      format: 'JSON',
      target: kafkaTarget(),
    });

    await t.api('DELETE', `/event_destinations/${created.body.id}`);
    expect(await version()).toBe(before + 1);
    const after = await loadPipelineConfig(t.service.db, t.service.keyring);
    expect(after.destinations.map((d) => d.id)).not.toContain(created.body.id);
  });

  it('shows the pipeline’s health and notifies it after each committed change', async () => {
    const config = loadConfig({
      ...t.store.env,
      PUBLIC_URL: 'http://api.test',
      LOG_LEVEL: 'silent',
    });
    const notified: number[] = [];
    const health = new Map<string, unknown>();
    const app = Fastify({ genReqId: () => newId('op') });
    installErrorHandlers(app);
    await app.register(restApi, {
      db: t.service.db,
      config,
      keyring: t.service.keyring,
      routes: [],
      destinationHealth: (id: string) => health.get(id),
      onPipelineChange: () => {
        notified.push(Date.now());
      },
    });
    const call = async (
      method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
      url: string,
      body?: object,
    ) => {
      const res = await app.inject({
        method,
        url,
        headers: { authorization: `Bearer ${TEST_BOOTSTRAP_KEY}` },
        ...(body === undefined ? {} : { payload: body }),
      });
      return { status: res.statusCode, body: res.body === '' ? null : res.json() };
    };
    try {
      const created = await call('POST', '/event_destinations', {
        target: { file: { path: 'h' } },
      });
      expect(created.status).toBe(201);
      expect(created.body).not.toHaveProperty('health');
      expect(created.body.uri).toBe(`http://api.test/event_destinations/${created.body.id}`);
      health.set(created.body.id, { state: 'delivering', backlog_bytes: 0 });
      expect((await call('GET', `/event_destinations/${created.body.id}`)).body.health).toEqual({
        state: 'delivering',
        backlog_bytes: 0,
      });
      const listed = (await call('GET', '/event_destinations')).body.event_destinations;
      expect(listed.find((d: { id: string }) => d.id === created.body.id).health).toEqual({
        state: 'delivering',
        backlog_bytes: 0,
      });
      const patched = await call('PATCH', `/event_destinations/${created.body.id}`, {
        description: 'd',
      });
      expect(patched.body.health).toEqual({ state: 'delivering', backlog_bytes: 0 });
      const outbox = await t.service.db.query<{ envelope: { object: object } }>(
        'SELECT envelope FROM audit_outbox ORDER BY seq DESC LIMIT 1',
      );
      expect(outbox.rows[0].envelope.object).not.toHaveProperty('health');
      expect(notified.length).toBe(2);
      await call('PATCH', `/event_destinations/${created.body.id}`, { target: {} });
      expect(notified.length).toBe(2);
      const subscription = await call('POST', '/event_subscriptions', {
        destination_ids: [created.body.id],
      });
      expect(subscription.status).toBe(201);
      await call('POST', `/event_subscriptions/${subscription.body.id}/sources`, {
        type: 'tcp_connection_closed.v0',
      });
      await call('DELETE', `/event_subscriptions/${subscription.body.id}`);
      await call('DELETE', `/event_destinations/${created.body.id}`);
      expect(notified.length).toBe(6);
    } finally {
      await app.close();
    }
  });
});
