import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { create, fromBinary, fromJsonString, type JsonObject, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StringListSchema } from '../../src/gen/agent_ingress/events/v0/traffic_pb.ts';
import {
  type Event,
  EventSchema,
  type PublishRequest,
  PublishRequestSchema,
  PublishResponseSchema,
} from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import type { Service } from '../../src/service.ts';
import { generateEvents } from '../helpers/events.ts';
import { TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { startTestService } from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';
import { expectAlive, FUZZ_ENV, fuzzParams, routeTrafficToFile } from './fuzz-helpers.ts';
import { acceptable, CLIENT_CODES, decode } from './publish-oracle.ts';

// Property-based bad input for Connect Publish (binary and JSON): random bytes, valid requests
// with bytes flipped, inserted or cut, a valid request cut at every byte, events with wrong
// envelopes (no account, bad ids, timestamps out of range), random JSON, huge fields, 10,000
// headers, deep nesting, bad tokens. Each answer is OK, invalid_argument, resource_exhausted or
// unauthenticated as the input deserves (never internal), and at the end the NDJSON files of a
// destination subscribed to everything hold exactly the events of the accepted requests.
// FUZZ_SEED=<n> replays a run.

const RUNS = { randomBytes: 400, mutated: 500, valid: 150, invalid: 250, json: 400, auth: 40 };

const PUBLISH = '/agent_ingress.ingest.v0.IngestService/Publish';
const MAX_INGEST_BYTES = 16 * 1024 * 1024;
const DESTINATION_PATH = 'fuzz-ingest';

/** A Publish answer: HTTP status, Connect code (errors), event ids (success). */
interface PublishAnswer {
  status: number;
  code: string | undefined;
  message: string;
  eventIds: string[];
}

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 127) {
    out.push((n & 127) | 128);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

/**
 * A PublishRequest whose one event carries `depth` nested google.protobuf.Struct values in
 * traffic_policy.logs, written inside out with the lengths computed first (linear time).
 */
function deepStructRequest(depth: number, accountId: string): Uint8Array {
  // Inner to outer: Value{null_value} ← Struct{fields{"a": Value}} ← Value{struct_value} ...
  const leaf = [0x08, 0x00];
  const headers: number[][] = [];
  let size = leaf.length;
  for (let i = 0; i < depth; i++) {
    const entry = [0x0a, 0x01, 0x61, 0x12, ...varint(size)]; // key "a", value: Value
    const entrySize = entry.length + size;
    const struct = [0x0a, ...varint(entrySize)]; // Struct.fields entry
    const structSize = struct.length + entrySize;
    const value = i === depth - 1 ? [] : [0x2a, ...varint(structSize)]; // Value.struct_value
    headers.push([...value, ...struct, ...entry]);
    size = value.length + structSize;
  }
  const account = Buffer.from(accountId);
  const logs = [0x0a, ...varint(size)]; // TrafficPolicy.logs
  const policy = [0x52, ...varint(logs.length + size)]; // HttpRequestComplete.traffic_policy
  const httpSize = policy.length + logs.length + size;
  const http = [0x52, ...varint(httpSize)]; // Event.http_request_complete
  const eventHead = [0x0a, account.length, ...account];
  const eventSize = eventHead.length + http.length + httpSize;
  const head = [0x0a, ...varint(eventSize), ...eventHead, ...http, ...policy, ...logs];
  const out = new Uint8Array(head.length + size);
  out.set(head);
  let at = head.length;
  for (let i = headers.length - 1; i >= 0; i--) {
    out.set(headers[i], at);
    at += headers[i].length;
  }
  out.set(leaf, at);
  return out;
}

describe('Connect Publish under fuzz (pglite)', () => {
  let store: TestStore;
  let service: Service;
  let account: string;
  /** Event ids of accepted events of our account: what the files must hold, each once. */
  const delivered: string[] = [];
  /** Event ids set by the client in requests that were refused: none may be in the files. */
  const refused = new Set<string>();
  let serial = 0;
  const nextId = (prefix: string) => `${prefix}-${++serial}`;

  /** Posts raw bytes to Publish and reads the answer of either protocol. */
  async function publishRaw(
    body: Uint8Array | string,
    format: 'proto' | 'json',
    headers: Record<string, string> = {},
  ): Promise<PublishAnswer> {
    const response = await fetch(`${service.url}${PUBLISH}`, {
      method: 'POST',
      headers: {
        'content-type': format === 'proto' ? 'application/proto' : 'application/json',
        authorization: `Bearer ${TEST_INGEST_TOKEN}`,
        ...headers,
      },
      body: body as unknown as RequestInit['body'],
    });
    const bytes = new Uint8Array(await response.arrayBuffer());
    if (response.status === 200) {
      const eventIds =
        format === 'proto'
          ? fromBinary(PublishResponseSchema, bytes).eventIds
          : (JSON.parse(Buffer.from(bytes).toString()).eventIds ?? []);
      return { status: 200, code: undefined, message: '', eventIds };
    }
    const text = Buffer.from(bytes).toString();
    let error: { code?: string; message?: string } = {};
    try {
      error = JSON.parse(text);
    } catch {}
    return { status: response.status, code: error.code, message: text.slice(0, 300), eventIds: [] };
  }

  /**
   * Publishes and checks the verdict: never a server-side code; accepted only when protobuf-es
   * reads a valid request (`decoded`); `mustAccept` when the request is known to be valid.
   * Accepted events of our account are remembered for the final check of the files.
   */
  async function publishChecked(
    body: Uint8Array | string,
    format: 'proto' | 'json',
    decoded: PublishRequest | undefined,
    mustAccept: boolean,
  ): Promise<PublishAnswer> {
    const answer = await publishRaw(body, format);
    const what = `${format} ${answer.status} ${answer.code} ${answer.message}`;
    if (answer.status !== 200) {
      expect(CLIENT_CODES, what).toContain(answer.code);
      expect(mustAccept, `a valid request was refused: ${what}`).toBe(false);
      for (const event of decoded?.events ?? []) if (event.eventId) refused.add(event.eventId);
      return answer;
    }
    expect(decoded, `accepted bytes that protobuf-es does not read: ${what}`).toBeDefined();
    expect(acceptable(decoded!), `accepted an invalid envelope: ${what}`).toBe(true);
    expect(answer.eventIds).toHaveLength(decoded!.events.length);
    decoded!.events.forEach((event, i) => {
      if (event.eventId !== '') expect(answer.eventIds[i]).toBe(event.eventId);
      if (event.accountId === account) delivered.push(answer.eventIds[i]);
    });
    return answer;
  }

  const publishProto = (request: PublishRequest, mustAccept: boolean) =>
    publishChecked(toBinary(PublishRequestSchema, request), 'proto', request, mustAccept);

  // ---- generators ----------------------------------------------------------------------------

  const str = fc.oneof(
    { weight: 4, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
    { weight: 1, arbitrary: fc.constantFrom('', '\u0000', '\ufffd', '😀', 'x'.repeat(1000)) },
  );
  const int32 = fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
  const int64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
  const inRange = fc.record({
    seconds: fc.bigInt({ min: -62135596800n, max: 253402300799n }),
    nanos: fc.integer({ min: 0, max: 999_999_999 }),
  });
  const anyTimestamp = fc.record({
    seconds: int64,
    nanos: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
  });
  const headerMap = fc.dictionary(str, fc.record({ values: fc.array(str, { maxLength: 3 }) }), {
    maxKeys: 4,
  });
  const logs = fc.array(
    fc.dictionary(
      fc.string({ maxLength: 8 }),
      fc.jsonValue({ maxDepth: 3 }),
    ) as fc.Arbitrary<JsonObject>,
    { maxLength: 2 },
  );
  const httpPayload = fc.record(
    {
      conn: fc.record(
        { clientIp: str, serverIp: str, serverName: str, serverPort: int32, startTs: anyTimestamp },
        { requiredKeys: [] },
      ),
      http: fc.record(
        {
          request: fc.record(
            {
              bodyLength: int64,
              headers: headerMap,
              method: str,
              url: fc.record({ host: str, path: str, query: str, raw: str, scheme: str }),
              userAgent: str,
            },
            { requiredKeys: [] },
          ),
          response: fc.record(
            { bodyLength: int64, headers: headerMap, statusCode: int32 },
            { requiredKeys: [] },
          ),
        },
        { requiredKeys: [] },
      ),
      ipPolicy: fc.record({ decision: str }),
      trafficPolicy: fc.record({ logs }),
      compression: fc.record({ algorithm: str, bytesSaved: int64 }),
    },
    { requiredKeys: [] },
  );
  const tcpPayload = fc.record(
    {
      conn: fc.record(
        {
          bytesIn: int64,
          bytesOut: int64,
          clientIp: str,
          serverIp: str,
          serverName: str,
          serverPort: int32,
          endTs: anyTimestamp,
        },
        { requiredKeys: [] },
      ),
      ipPolicy: fc.record({ decision: str }),
    },
    { requiredKeys: [] },
  );
  const payload = fc.oneof(
    httpPayload.map((value) => ({ case: 'httpRequestComplete' as const, value })),
    tcpPayload.map((value) => ({ case: 'tcpConnectionClosed' as const, value })),
  );

  /** A valid event of our account (or, sometimes, of another one: accepted, not delivered). */
  const validEvent = fc
    .tuple(payload, fc.option(inRange), fc.boolean(), fc.nat(9))
    .map(([p, ts, withId, other]) =>
      create(EventSchema, {
        accountId: other === 0 ? 'ac_someone_else' : account,
        eventId: withId ? nextId('ok') : '',
        eventTimestamp: ts ?? undefined,
        payload: p as Event['payload'],
      }),
    );

  /** An event that makes its request invalid, and why. */
  const invalidEvent = fc
    .tuple(
      payload,
      fc.constantFrom(
        'no_account',
        'long_account',
        'no_payload',
        'bad_event_id',
        'long_event_id',
        'seconds_high',
        'seconds_low',
        'nanos_negative',
        'nanos_high',
      ),
      fc.string({ unit: 'binary', minLength: 1, maxLength: 10 }),
    )
    .map(([p, why, noise]) => {
      const event = create(EventSchema, {
        accountId: account,
        eventId: '',
        payload: p as Event['payload'],
      });
      switch (why) {
        case 'no_account':
          event.accountId = '';
          break;
        case 'long_account':
          event.accountId = 'a'.repeat(129);
          break;
        case 'no_payload':
          event.payload = { case: undefined };
          break;
        case 'bad_event_id':
          // Printable ASCII only: a space, a control character or non-ASCII makes it invalid.
          event.eventId = `bad id ${noise}`;
          break;
        case 'long_event_id':
          event.eventId = 'x'.repeat(129);
          break;
        case 'seconds_high':
          event.eventTimestamp = { ...timestampFromMs(0), seconds: 253402300800n };
          break;
        case 'seconds_low':
          event.eventTimestamp = { ...timestampFromMs(0), seconds: -62135596801n };
          break;
        case 'nanos_negative':
          event.eventTimestamp = { ...timestampFromMs(0), nanos: -1 };
          break;
        case 'nanos_high':
          event.eventTimestamp = { ...timestampFromMs(0), nanos: 1_000_000_000 };
          break;
      }
      return { event, why };
    });

  beforeAll(async () => {
    store = await pgliteStore();
    service = await startTestService(store, {
      ...FUZZ_ENV,
      INGEST_TOKENS: TEST_INGEST_TOKEN,
      MAX_INGEST_BYTES: String(MAX_INGEST_BYTES),
      BATCH_LINGER_MS: '5',
    });
    account = (await service.db.query<{ id: string }>('SELECT id FROM accounts')).rows[0].id;
    await routeTrafficToFile(service, DESTINATION_PATH);
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  it('delivers a plain valid request (the baseline the file check relies on)', async () => {
    const events = generateEvents(5, { accounts: [account], seed: 3 });
    const answer = await publishProto(create(PublishRequestSchema, { events }), true);
    expect(answer.eventIds).toHaveLength(5);
  });

  it('answers random bytes with OK or invalid_argument', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 2048 }), async (bytes) => {
        await publishChecked(bytes, 'proto', decode(bytes), false);
      }),
      fuzzParams(RUNS.randomBytes),
    );
    await expectAlive(service);
  });

  it('cuts a valid request at every byte: only whole events are accepted', async () => {
    const events = generateEvents(2, { accounts: [account], seed: 11, tcpShare: 0.5 });
    events.forEach((event, i) => {
      event.eventId = nextId(`cut${i}`);
    });
    const full = toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }));
    const firstEnd = toBinary(
      PublishRequestSchema,
      create(PublishRequestSchema, { events: [events[0]] }),
    ).length;
    for (let cut = 0; cut < full.length; cut++) {
      const bytes = full.slice(0, cut);
      const decoded = decode(bytes);
      const whole = cut === 0 || cut === firstEnd;
      expect(decoded !== undefined, `protobuf-es reading of a cut at ${cut}`).toBe(whole);
      // The same event ids are sent again at each whole cut: the file keeps each acceptance.
      await publishChecked(bytes, 'proto', decoded, whole);
    }
    await expectAlive(service);
  });

  it('answers a valid request with bytes flipped, inserted or removed by protobuf-es rules', async () => {
    const mutation = fc.record({
      at: fc.nat(),
      how: fc.constantFrom('flip', 'set', 'insert', 'remove', 'truncate', 'varint'),
      byte: fc.integer({ min: 0, max: 255 }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(validEvent, { minLength: 1, maxLength: 3 }),
        fc.array(mutation, { minLength: 1, maxLength: 4 }),
        async (events, mutations) => {
          let bytes = [...toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }))];
          for (const { at, how, byte } of mutations) {
            const i = bytes.length === 0 ? 0 : at % bytes.length;
            if (how === 'flip') bytes[i] ^= 1 << (byte % 8);
            else if (how === 'set') bytes[i] = byte;
            else if (how === 'insert') bytes.splice(i, 0, byte);
            else if (how === 'remove') bytes.splice(i, 1);
            else if (how === 'truncate') bytes = bytes.slice(0, i);
            else
              bytes.splice(i, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
          }
          const body = new Uint8Array(bytes);
          await publishChecked(body, 'proto', decode(body), false);
        },
      ),
      fuzzParams(RUNS.mutated),
    );
    await expectAlive(service);
  });

  it('accepts valid events with any field values', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(validEvent, { minLength: 1, maxLength: 5 }), async (events) => {
        await publishProto(create(PublishRequestSchema, { events }), true);
      }),
      fuzzParams(RUNS.valid),
    );
  });

  it('refuses a request with one invalid envelope (invalid_argument), delivering none of it', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(validEvent, { maxLength: 3 }),
        invalidEvent,
        fc.nat(),
        async (valid, { event }, at) => {
          // Client-set ids on the valid neighbours: none of them may reach the files.
          for (const e of valid) e.eventId = nextId('refused');
          const events = [...valid];
          events.splice(at % (valid.length + 1), 0, event);
          const answer = await publishProto(create(PublishRequestSchema, { events }), false);
          expect(answer.code, answer.message).toBe('invalid_argument');
        },
      ),
      fuzzParams(RUNS.invalid),
    );
  });

  it('answers random and near-valid JSON on the Connect JSON protocol', async () => {
    const nearValid = fc
      .tuple(
        fc.array(
          fc.record(
            {
              accountId: fc.oneof(fc.constant(account), fc.jsonValue({ maxDepth: 1 })),
              eventId: fc.oneof(
                fc.constant(''),
                fc.string({ maxLength: 8 }),
                fc.jsonValue({ maxDepth: 1 }),
              ),
              eventTimestamp: fc.oneof(
                fc.constantFrom(
                  '2026-11-22T10:00:00Z',
                  '0001-01-01T00:00:00Z',
                  '9999-12-31T23:59:59.999999999Z',
                  '0000-01-01T00:00:00Z',
                  '10000-01-01T00:00:00Z',
                  '2026-13-01T00:00:00Z',
                  '2026-11-22T10:00:00+99:00',
                  'yesterday',
                ),
                fc.jsonValue({ maxDepth: 1 }),
              ),
              httpRequestComplete: fc.oneof(
                fc.constant({}),
                fc.constant({ conn: { serverPort: '443' } }),
                fc.constant({ http: { request: { bodyLength: '-9223372036854775809' } } }),
                fc.constant({ trafficPolicy: { logs: [{ a: 1e308, b: [null, { c: 'd' }] }] } }),
                fc.jsonValue({ maxDepth: 2 }),
              ),
              tcpConnectionClosed: fc.oneof(fc.constant({}), fc.jsonValue({ maxDepth: 2 })),
              [`x${'y'}`]: fc.jsonValue({ maxDepth: 1 }),
            },
            { requiredKeys: [] },
          ),
          { maxLength: 3 },
        ),
      )
      .map(([events]) => JSON.stringify({ events }));
    const deep = fc
      .constantFrom(101, 5_000, 100_000)
      .map(
        (depth) =>
          `{"events":[{"accountId":"${account}","httpRequestComplete":{"trafficPolicy":{"logs":[${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}]}}}]}`,
      );
    const body = fc.oneof(
      fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
      nearValid,
      deep,
      fc.string({ maxLength: 60 }),
      fc.constantFrom(
        '',
        '{',
        '{"events":[1]}',
        '{"events":[{}]}',
        '{"events":null}',
        'NaN',
        `{"events":[{"accountId":"${account}","httpRequestComplete":{"conn":{"serverPort":1e309}}}]}`,
        `{"events":[{"accountId":"${account}","tcpConnectionClosed":{"conn":{"bytesIn":NaN}}}]}`,
        `{"events":[{"accountId":"${account}","tcpConnectionClosed":{"conn":{"serverPort":-1}}}]}`,
        `{"events":[{"accountId":"${account}","tcpConnectionClosed":{"conn":{"serverPort":2147483648}}}]}`,
        `{"events":[{"accountId":"${account}","tcpConnectionClosed":{"conn":{"bytesIn":"1e3"}}}]}`,
        `{"events":[{"accountId":"${account}","eventId":"\\u0000","tcpConnectionClosed":{}}]}`,
        `{"events":[{"accountId":"\\ud800","tcpConnectionClosed":{}}]}`,
      ),
    );
    await fc.assert(
      fc.asyncProperty(body, async (text) => {
        let decoded: PublishRequest | undefined;
        try {
          // As the server reads it: sent as UTF-8, so a lone surrogate arrives as U+FFFD.
          decoded = fromJsonString(PublishRequestSchema, Buffer.from(text).toString());
        } catch {
          decoded = undefined;
        }
        await publishChecked(text, 'json', decoded, false);
      }),
      fuzzParams(RUNS.json),
    );
    await expectAlive(service);
  });

  it('answers bad or missing ingest tokens with unauthenticated, delivering nothing', async () => {
    const token = fc.oneof(
      fc.constant(undefined),
      fc.string({ maxLength: 40 }).map((t) => `Bearer ${t}`),
      fc.constantFrom(`Basic ${TEST_INGEST_TOKEN}`, `Bearer ${TEST_INGEST_TOKEN}x`, 'Bearer', ''),
    );
    await fc.assert(
      fc.asyncProperty(
        token,
        fc.constantFrom<'proto' | 'json'>('proto', 'json'),
        async (auth, format) => {
          const events = generateEvents(2, { accounts: [account], seed: serial });
          for (const e of events) {
            e.eventId = nextId('unauth');
            refused.add(e.eventId);
          }
          const request = create(PublishRequestSchema, { events });
          const body =
            format === 'proto'
              ? toBinary(PublishRequestSchema, request)
              : JSON.stringify({
                  events: events.map((e) => ({
                    accountId: e.accountId,
                    eventId: e.eventId,
                    tcpConnectionClosed: {},
                  })),
                });
          const headers: Record<string, string> = auth === undefined ? {} : { authorization: auth };
          const response = await fetch(`${service.url}${PUBLISH}`, {
            method: 'POST',
            headers: {
              'content-type': format === 'proto' ? 'application/proto' : 'application/json',
              ...headers,
            },
            body: body as unknown as RequestInit['body'],
          });
          const text = await response.text();
          expect(response.status, text).toBe(401);
          expect(JSON.parse(text).code).toBe('unauthenticated');
        },
      ),
      fuzzParams(RUNS.auth),
    );
  });

  it('answers deeply nested Struct values (binary) with invalid_argument', async () => {
    for (const depth of [99, 101, 1_000, 100_000]) {
      const bytes = deepStructRequest(depth, account);
      const decoded = decode(bytes);
      const answer = await publishChecked(bytes, 'proto', decoded, decoded !== undefined);
      if (decoded === undefined) expect(answer.code).toBe('invalid_argument');
    }
    await expectAlive(service);
  });

  it('accepts a 10 MB field and 10,000 headers; refuses a request over MAX_INGEST_BYTES', async () => {
    const [big, headers] = generateEvents(2, { accounts: [account], seed: 5, tcpShare: 0 });
    big.eventId = nextId('big');
    headers.eventId = nextId('headers');
    const bigHttp = big.payload.value as any;
    bigHttp.conn.serverName = 'h'.repeat(10 * 1024 * 1024);
    const headersHttp = headers.payload.value as any;
    headersHttp.http.request.headers = Object.fromEntries(
      Array.from({ length: 10_000 }, (_, i) => [
        `X-Fuzz-${i}`,
        create(StringListSchema, { values: [`v${i}`] }),
      ]),
    );
    const accepted = await publishProto(
      create(PublishRequestSchema, { events: [big, headers] }),
      true,
    );
    expect(accepted.eventIds).toEqual([big.eventId, headers.eventId]);

    const tooBig = generateEvents(1, { accounts: [account], seed: 6, tcpShare: 0 })[0];
    tooBig.eventId = nextId('too-big');
    (tooBig.payload.value as any).conn.serverName = 'h'.repeat(MAX_INGEST_BYTES);
    const refusedAnswer = await publishProto(
      create(PublishRequestSchema, { events: [tooBig] }),
      false,
    );
    expect(refusedAnswer.code, refusedAnswer.message).toBe('resource_exhausted');

    const lines = readDelivered();
    const bigLine = lines.find((l) => l.event_id === big.eventId);
    expect(bigLine?.object.conn.server_name).toHaveLength(10 * 1024 * 1024);
    const headersLine = lines.find((l) => l.event_id === headers.eventId);
    expect(Object.keys(headersLine?.object.http.request.headers ?? {})).toHaveLength(10_000);
    await expectAlive(service);
  });

  /** A gRPC-Web / Connect streaming frame: flags, big-endian length, message. */
  function frame(message: Uint8Array, flags = 0): Uint8Array {
    const out = new Uint8Array(5 + message.length);
    out[0] = flags;
    new DataView(out.buffer).setUint32(1, message.length);
    out.set(message, 5);
    return out;
  }

  /** The error code of an answer of any protocol connect-es serves (unary, streaming, gRPC-Web). */
  async function answerCode(response: Response): Promise<string | undefined> {
    const GRPC = {
      0: 'ok',
      2: 'unknown',
      3: 'invalid_argument',
      8: 'resource_exhausted',
      13: 'internal',
      16: 'unauthenticated',
    } as Record<number, string>;
    const header = response.headers.get('grpc-status');
    const bytes = Buffer.from(await response.arrayBuffer());
    if (header !== null) return GRPC[Number(header)] ?? `grpc-${header}`;
    const type = response.headers.get('content-type') ?? '';
    if (type.startsWith('application/grpc-web')) {
      // Trailers frame (flag 0x80) at the end of the body.
      const trailer = /grpc-status:\s*(\d+)/.exec(bytes.toString('latin1'));
      return trailer === null ? undefined : (GRPC[Number(trailer[1])] ?? `grpc-${trailer[1]}`);
    }
    if (type.startsWith('application/connect+')) {
      for (let at = 0; at + 5 <= bytes.length; ) {
        const flags = bytes[at];
        const length = bytes.readUInt32BE(at + 1);
        const body = bytes.subarray(at + 5, at + 5 + length);
        if (flags & 0x02) return JSON.parse(body.toString()).error?.code ?? 'ok';
        at += 5 + length;
      }
      return undefined;
    }
    try {
      return JSON.parse(bytes.toString()).code;
    } catch {
      return undefined;
    }
  }

  // Requests the fast path does not take (compressed, streaming, gRPC-Web) are served by
  // connect-es, which decodes before our handler: a body that is not a PublishRequest must still
  // be a client error, not internal.
  it('answers compressed, streaming and gRPC-Web garbage with a client error code', async () => {
    const garbage = new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0x0f, 0x01]);
    const base = { authorization: `Bearer ${TEST_INGEST_TOKEN}` };
    const stream = '/agent_ingress.ingest.v0.IngestService/PublishStream';
    const cases: [string, string, Record<string, string>, Uint8Array, string?][] = [
      [
        'Connect unary, gzip, bad protobuf',
        PUBLISH,
        { 'content-type': 'application/proto', 'content-encoding': 'gzip' },
        gzipSync(garbage),
      ],
      [
        'Connect unary, gzip, not gzip',
        PUBLISH,
        { 'content-type': 'application/proto', 'content-encoding': 'gzip' },
        garbage,
      ],
      [
        'Connect unary, br, not brotli',
        PUBLISH,
        { 'content-type': 'application/proto', 'content-encoding': 'br' },
        garbage,
      ],
      [
        'Connect unary, unknown encoding',
        PUBLISH,
        { 'content-type': 'application/proto', 'content-encoding': 'zstd' },
        garbage,
        'unimplemented', // the Connect protocol's answer to an unsupported encoding
      ],
      [
        'Connect stream, bad protobuf',
        stream,
        { 'content-type': 'application/connect+proto' },
        frame(garbage),
      ],
      [
        'Connect stream, truncated frame',
        stream,
        { 'content-type': 'application/connect+proto' },
        frame(garbage).subarray(0, 4),
      ],
      [
        'Connect stream, bad JSON',
        stream,
        { 'content-type': 'application/connect+json' },
        frame(Buffer.from('{"events":5}')),
      ],
      [
        'gRPC-Web, bad protobuf',
        PUBLISH,
        { 'content-type': 'application/grpc-web+proto' },
        frame(garbage),
      ],
      [
        'gRPC-Web, truncated frame',
        PUBLISH,
        { 'content-type': 'application/grpc-web+proto' },
        frame(garbage).subarray(0, 7),
      ],
      [
        'gRPC-Web stream, bad protobuf',
        stream,
        { 'content-type': 'application/grpc-web+proto' },
        frame(garbage),
      ],
    ];
    const failures: string[] = [];
    for (const [name, path, headers, body, expected] of cases) {
      const response = await fetch(`${service.url}${path}`, {
        method: 'POST',
        headers: { ...base, ...headers },
        body: body as unknown as RequestInit['body'],
      });
      const code = await answerCode(response);
      const allowed = expected === undefined ? CLIENT_CODES : [expected];
      if (!allowed.includes(code ?? '')) failures.push(`${name}: HTTP ${response.status}, ${code}`);
    }
    expect(failures).toEqual([]);
    await expectAlive(service);
  });

  /** Every envelope in the destination's NDJSON files. */
  function readDelivered(): any[] {
    const dir = join(store.env.DATA_DIR, 'events', account, DESTINATION_PATH);
    return readdirSync(dir)
      .flatMap((file) => readFileSync(join(dir, file), 'utf8').split('\n'))
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line));
  }

  it('has delivered exactly the events of accepted requests, and nothing of refused ones', async () => {
    const lines = readDelivered();
    const inFiles = lines.map((l) => l.event_id as string);
    expect(lines.every((l) => l.account_id === account)).toBe(true);
    expect(inFiles.filter((id) => refused.has(id))).toEqual([]);
    expect([...inFiles].sort()).toEqual([...delivered].sort());
    expect(delivered.length).toBeGreaterThan(RUNS.valid);
  });
});
