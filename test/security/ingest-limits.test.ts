import { readdirSync, readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { create, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Event,
  PublishRequestSchema,
  PublishResponseSchema,
} from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import type { Service } from '../../src/service.ts';
import { until } from '../faults/support.ts';
import { generateEvents } from '../helpers/events.ts';
import { ingestClient, TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { apiClient, startTestService, TEST_BOOTSTRAP_KEY } from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';

// The ingest's bounds on what a client may make the service hold: request slots shared by unary
// Publish and open PublishStreams (MAX_INFLIGHT_REQUESTS), one byte budget for all of them
// (MAX_INFLIGHT_BYTES, taken before a body is read), events per request (MAX_INGEST_EVENTS) and
// per stream (MAX_STREAM_EVENTS), and an idle timeout for streams. Beyond a bound the answer is
// RESOURCE_EXHAUSTED (or UNAVAILABLE for an idle stream) and nothing is half-accepted: a stream
// ended early names, in its error's details, the events it made durable.

const PUBLISH = '/agent_ingress.ingest.v0.IngestService/Publish';
const DESTINATION = 'limits';

/** A service on a fresh embedded store with the given limits and one file destination for all. */
async function limitedService(env: Record<string, string>) {
  const store = await pgliteStore();
  const service = await startTestService(store, { INGEST_TOKENS: TEST_INGEST_TOKEN, ...env });
  const api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
  const account = (await service.db.query<{ id: string }>('SELECT id FROM accounts')).rows[0].id;
  const destination = await api('POST', '/event_destinations', {
    target: { file: { path: DESTINATION } },
  });
  await api('POST', '/event_subscriptions', {
    sources: [{ type: 'tcp_connection_closed.v0' }, { type: 'http_request_complete.v0' }],
    destination_ids: [destination.body.id],
  });
  await service.pipeline.reload();
  return { store, service, account };
}

/** Every event id in the file destination's NDJSON files. */
function deliveredIds(store: TestStore, account: string): Set<string> {
  const dir = join(store.env.DATA_DIR, 'events', account, DESTINATION);
  return new Set(
    readdirSync(dir)
      .flatMap((file) => readFileSync(join(dir, file), 'utf8').split('\n'))
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line).event_id),
  );
}

/** `count` small events with client-set ids `<prefix>-<i>`. */
function namedEvents(account: string, count: number, prefix: string): Event[] {
  return generateEvents(count, { accounts: [account], tcpShare: 1, seed: count }).map((e, i) => {
    e.eventId = `${prefix}-${i}`;
    return e;
  });
}

/** A PublishStream that sends `batches` and then stays open until end(). */
function openStream(url: string, batches: Event[][]) {
  let end!: () => void;
  const ended = new Promise<void>((resolve) => {
    end = resolve;
  });
  async function* messages() {
    for (const events of batches) yield { events };
    await ended;
  }
  const answer = ingestClient(url, TEST_INGEST_TOKEN)
    .publishStream(messages())
    .then(
      (response) => response,
      (error: unknown) => ConnectError.from(error),
    );
  return { answer, end };
}

/** The value of one gauge on /metrics. */
async function gauge(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
}

/** The Connect code of a settled call: Code.Ok-like 0 for a response, else the error's code. */
function codeOf(settled: unknown): Code | 0 {
  return settled instanceof ConnectError ? settled.code : 0;
}

describe('request slots: unary Publish and open PublishStreams share MAX_INFLIGHT_REQUESTS', () => {
  let store: TestStore;
  let service: Service;
  let account: string;

  beforeAll(async () => {
    ({ store, service, account } = await limitedService({ MAX_INFLIGHT_REQUESTS: '2' }));
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  it('counts an open stream as a request in flight until it ends', async () => {
    const streams = [0, 1].map((i) =>
      openStream(service.url, [namedEvents(account, 5, `slot-${i}`)]),
    );
    await until(
      'two open streams in flight',
      async () => (await gauge(service.url, 'agent_ingress_ingest_inflight_requests')) === 2,
      10_000,
      50,
    );
    const client = ingestClient(service.url, TEST_INGEST_TOKEN);
    const refused = await client.publish(namedEvents(account, 1, 'slot-unary')).then(
      () => undefined,
      (error: unknown) => ConnectError.from(error),
    );
    expect(refused?.code, refused?.message).toBe(Code.ResourceExhausted);
    const third = openStream(service.url, [namedEvents(account, 1, 'slot-third')]);
    third.end();
    expect(codeOf(await third.answer)).toBe(Code.ResourceExhausted);

    streams[0].end();
    const first = await streams[0].answer;
    expect(codeOf(first), String(first)).toBe(0);
    expect((await client.publish(namedEvents(account, 1, 'slot-after'))).accepted).toBe(1);
    streams[1].end();
    expect(codeOf(await streams[1].answer)).toBe(0);
    expect(deliveredIds(store, account).has('slot-third-0')).toBe(false);
  });
});

describe('the in-flight byte budget: MAX_INFLIGHT_BYTES', () => {
  const BUDGET = 131_072;
  const HELD = 60_000;
  let store: TestStore;
  let service: Service;
  let account: string;

  beforeAll(async () => {
    ({ store, service, account } = await limitedService({
      MAX_INGEST_BYTES: String(HELD),
      MAX_INFLIGHT_BYTES: String(BUDGET),
    }));
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  /** A Publish that announces `length` bytes and sends only a few: the service holds `length`. */
  function holder(length: number) {
    const request = httpRequest(`${service.url}${PUBLISH}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/proto',
        'content-length': String(length),
        authorization: `Bearer ${TEST_INGEST_TOKEN}`,
      },
    });
    request.on('error', () => {});
    request.write(Buffer.alloc(10));
    return request;
  }

  it('takes a request’s bytes before reading it and refuses what does not fit, losing nothing', async () => {
    const holders = [holder(HELD), holder(HELD)];
    await until(
      'two holders counted',
      async () => (await gauge(service.url, 'agent_ingress_ingest_inflight_bytes')) >= 2 * HELD,
      10_000,
      50,
    );
    // A real request of ~20 kB: 120 kB are held, so it does not fit in 128 KiB.
    const events = namedEvents(account, 150, 'budget');
    const body = toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }));
    expect(body.length).toBeGreaterThan(BUDGET - 2 * HELD);
    const refused = await fetch(`${service.url}${PUBLISH}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/proto',
        authorization: `Bearer ${TEST_INGEST_TOKEN}`,
      },
      body,
    });
    const error = (await refused.json()) as { code?: string };
    expect({ status: refused.status, code: error.code }).toEqual({
      status: 429,
      code: 'resource_exhausted',
    });
    const stream = openStream(service.url, [events]);
    stream.end();
    expect(codeOf(await stream.answer)).toBe(Code.ResourceExhausted);
    expect([...deliveredIds(store, account)].filter((id) => id.startsWith('budget-'))).toEqual([]);

    // A client that goes away gives its bytes back.
    for (const request of holders) request.destroy();
    await until(
      'holders released',
      async () => (await gauge(service.url, 'agent_ingress_ingest_inflight_bytes')) === 0,
      10_000,
      50,
    );
    const response = await ingestClient(service.url, TEST_INGEST_TOKEN).publish(events);
    expect(response.accepted).toBe(150);
  });
});

describe('event limits and the stream idle timeout', () => {
  const IDLE_MS = 600;
  let store: TestStore;
  let service: Service;
  let account: string;

  beforeAll(async () => {
    ({ store, service, account } = await limitedService({
      MAX_INGEST_EVENTS: '100',
      MAX_STREAM_EVENTS: '250',
      STREAM_IDLE_TIMEOUT_MS: String(IDLE_MS),
    }));
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  it('refuses a request over MAX_INGEST_EVENTS with RESOURCE_EXHAUSTED, delivering none of it', async () => {
    const client = ingestClient(service.url, TEST_INGEST_TOKEN);
    const tooMany = await client.publish(namedEvents(account, 101, 'many')).then(
      () => undefined,
      (error: unknown) => ConnectError.from(error),
    );
    expect(tooMany?.code, tooMany?.message).toBe(Code.ResourceExhausted);
    expect(tooMany?.rawMessage).toContain('MAX_INGEST_EVENTS');
    expect((await client.publish(namedEvents(account, 100, 'enough'))).accepted).toBe(100);
    const files = deliveredIds(store, account);
    expect([...files].filter((id) => id.startsWith('many-'))).toEqual([]);
    expect(files.has('enough-99')).toBe(true);
  });

  it('ends a stream past MAX_STREAM_EVENTS with RESOURCE_EXHAUSTED naming what it made durable', async () => {
    const batches = [0, 1, 2].map((i) => namedEvents(account, 100, `stream-${i}`));
    const stream = openStream(service.url, batches);
    const answer = await stream.answer;
    stream.end();
    expect(answer).toBeInstanceOf(ConnectError);
    const error = answer as ConnectError;
    expect(error.code, error.message).toBe(Code.ResourceExhausted);
    expect(error.rawMessage).toContain('MAX_STREAM_EVENTS');
    const [durable] = error.findDetails(PublishResponseSchema);
    const sent = batches.slice(0, 2).flatMap((events) => events.map((e) => e.eventId));
    expect(durable?.eventIds).toEqual(sent);
    expect(durable?.accepted).toBe(200);
    const files = deliveredIds(store, account);
    expect(sent.filter((id) => !files.has(id))).toEqual([]);
    expect([...files].filter((id) => id.startsWith('stream-2-'))).toEqual([]);
  });

  it('ends a stream idle for STREAM_IDLE_TIMEOUT_MS with UNAVAILABLE naming what it made durable', async () => {
    const events = namedEvents(account, 10, 'idle');
    const started = Date.now();
    const stream = openStream(service.url, [events]);
    const answer = await stream.answer;
    stream.end();
    expect(Date.now() - started).toBeGreaterThanOrEqual(IDLE_MS);
    expect(answer).toBeInstanceOf(ConnectError);
    const error = answer as ConnectError;
    expect(error.code, error.message).toBe(Code.Unavailable);
    expect(error.findDetails(PublishResponseSchema)[0]?.eventIds).toEqual(
      events.map((e) => e.eventId),
    );
    expect(deliveredIds(store, account).has('idle-9')).toBe(true);
  });

  it('hangs up on a client that keeps sending after its stream was answered', async () => {
    const request = httpRequest(
      `${service.url}/agent_ingress.ingest.v0.IngestService/PublishStream`,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/connect+proto',
          authorization: `Bearer ${TEST_INGEST_TOKEN}`,
        },
      },
    );
    request.on('error', () => {});
    request.flushHeaders();
    const answered = new Promise<number>((resolve) => {
      request.on('response', (response) => {
        response.resume();
        resolve(Date.now());
      });
    });
    const closed = new Promise<number>((resolve) => {
      request.on('socket', (socket) => socket.once('close', () => resolve(Date.now())));
    });
    // Idle until the service answers, then a trickle that never ends the body.
    const at = await answered;
    const trickle = setInterval(() => request.write(Buffer.alloc(1)), 100);
    try {
      expect((await closed) - at).toBeLessThan(5_000);
    } finally {
      clearInterval(trickle);
    }
  });
});
