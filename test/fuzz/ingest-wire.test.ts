import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { create, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Event,
  type PublishRequest,
  PublishRequestSchema,
} from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import type { Service } from '../../src/service.ts';
import { generateEvents } from '../helpers/events.ts';
import { TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { startTestService } from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';
import {
  closeRawSessions,
  type Framing,
  frame,
  type RawAnswer,
  sendRaw,
} from '../helpers/wire-client.ts';
import { expectAlive, FUZZ_ENV, fuzzParams, routeTrafficToFile } from './fuzz-helpers.ts';
import { acceptable, decode } from './publish-oracle.ts';

// Property-based bad input for the framings ingest-payloads.test.ts does not cover: unary
// Publish over gRPC-Web (plain and with grpc-encoding gzip) and gRPC (HTTP/2, GRPC_PORT), and
// PublishStream over Connect streaming, gRPC-Web and gRPC. Messages protobuf-es cannot read,
// invalid envelopes, and broken frames (cut, extra, wrong flags, wrong lengths, bad compression)
// are a client's mistake: invalid_argument on every path, never internal. Valid input is
// accepted, the service keeps serving, and nothing of a refused request reaches a destination.
// FUZZ_SEED=<n> replays a run.

const RUNS = { unary: 240, frames: 160, streams: 120 };
const DESTINATION_PATH = 'fuzz-wire';
const UNARY: Framing[] = ['grpc-web', 'grpc'];
const STREAMING: Framing[] = ['connect-stream', 'grpc-web', 'grpc'];

/** A message and how it travels: identity, or gzip-compressed with the frame's flag set. */
interface Sent {
  message: Uint8Array;
  gzip: boolean;
}

describe('gRPC, gRPC-Web and PublishStream under fuzz (pglite)', () => {
  let store: TestStore;
  let service: Service;
  let account: string;
  /** Ids of accepted events of our account, once per acceptance: the files must hold each. */
  const delivered: string[] = [];
  /** Ids the client set on events of refused messages: a refusal adds none to the files. */
  const refused = new Set<string>();
  let serial = 0;

  const target = () => ({ url: service.url, grpcUrl: service.grpcUrl });

  beforeAll(async () => {
    store = await pgliteStore();
    service = await startTestService(store, {
      ...FUZZ_ENV,
      INGEST_TOKENS: TEST_INGEST_TOKEN,
      // Bound at random by the service: no port to lose to another process before the bind.
      GRPC_PORT: '0',
      BATCH_LINGER_MS: '5',
    });
    account = (await service.db.query<{ id: string }>('SELECT id FROM accounts')).rows[0].id;
    await routeTrafficToFile(service, DESTINATION_PATH);
  });
  afterAll(async () => {
    closeRawSessions();
    await service?.close();
    await store?.cleanup();
  });

  // ---- generators ----------------------------------------------------------------------------

  /** Events of our account with fresh client-set ids (so the file check can find them). */
  function events(count: number, seed: number): Event[] {
    return generateEvents(count, { accounts: [account], seed, tcpShare: 0.5 }).map((event) => {
      event.eventId = `wire-${++serial}`;
      return event;
    });
  }

  const validMessage = fc
    .tuple(fc.integer({ min: 1, max: 4 }), fc.nat())
    .map(([count, seed]) =>
      toBinary(PublishRequestSchema, create(PublishRequestSchema, { events: events(count, seed) })),
    );
  /** A valid request with one envelope rule broken: no account, no payload, a bad id. */
  const invalidEnvelope = fc
    .tuple(fc.integer({ min: 1, max: 3 }), fc.nat(), fc.constantFrom('account', 'payload', 'id'))
    .map(([count, seed, broken]) => {
      const request = create(PublishRequestSchema, { events: events(count, seed) });
      const event = request.events[seed % count];
      if (broken === 'account') event.accountId = '';
      else if (broken === 'payload') event.payload = { case: undefined };
      else event.eventId = `bad id ${seed}`;
      return toBinary(PublishRequestSchema, request);
    });
  /** A valid message with a few bytes flipped, set, inserted or cut. */
  const mutatedMessage = fc
    .tuple(
      validMessage,
      fc.array(
        fc.record({
          at: fc.nat(),
          how: fc.constantFrom('flip', 'set', 'insert', 'truncate'),
          byte: fc.integer({ min: 0, max: 255 }),
        }),
        { minLength: 1, maxLength: 3 },
      ),
    )
    .map(([valid, mutations]) => {
      let bytes = [...valid];
      for (const { at, how, byte } of mutations) {
        const i = bytes.length === 0 ? 0 : at % bytes.length;
        if (how === 'flip') bytes[i] ^= 1 << (byte % 8);
        else if (how === 'set') bytes[i] = byte;
        else if (how === 'insert') bytes.splice(i, 0, byte);
        else bytes = bytes.slice(0, i);
      }
      return new Uint8Array(bytes);
    });
  /** A message, and whether it is known to be valid (else protobuf-es and the rules judge it). */
  const anyMessage = fc.oneof(
    { weight: 2, arbitrary: validMessage.map((bytes) => ({ bytes, valid: true })) },
    { weight: 2, arbitrary: invalidEnvelope.map((bytes) => ({ bytes, valid: false })) },
    { weight: 3, arbitrary: mutatedMessage.map((bytes) => ({ bytes, valid: false })) },
    {
      weight: 2,
      arbitrary: fc.uint8Array({ maxLength: 300 }).map((bytes) => ({ bytes, valid: false })),
    },
    {
      weight: 1,
      arbitrary: fc.constant({ bytes: new Uint8Array([0xff, 0xff, 0xff]), valid: false }),
    },
  );
  const sent = fc
    .record({ message: anyMessage, gzip: fc.boolean() })
    .map(({ message, gzip }) => ({ message: message.bytes, valid: message.valid, gzip }));

  /** A body whose framing itself is broken, with the headers it travels with. */
  const brokenFrames = fc.oneof(
    // The example: a plain frame of three 0xff bytes, sent as "gzip" (connect-es: internal).
    fc.constant({ body: frame(new Uint8Array([0xff, 0xff, 0xff])), gzip: true }),
    fc
      .tuple(validMessage, fc.nat())
      .map(([m, at]) => ({ body: frame(m).subarray(0, at % (m.length + 5)), gzip: false })),
    fc.tuple(validMessage, validMessage).map(([a, b]) => ({
      body: Buffer.concat([frame(a), frame(b)]),
      gzip: false,
    })),
    fc
      .tuple(validMessage, fc.integer({ min: 2, max: 255 }))
      .map(([m, flags]) => ({ body: frame(m, flags), gzip: false })),
    // Compressed flag without grpc-encoding, and "gzip" bytes that are not gzip.
    validMessage.map((m) => ({ body: frame(gzipSync(m), 1), gzip: false })),
    fc.tuple(fc.uint8Array({ minLength: 1, maxLength: 200 }), fc.boolean()).map(([bytes, cut]) => ({
      body: frame(cut ? gzipSync(bytes).subarray(0, 8) : bytes, 1),
      gzip: true,
    })),
    fc.tuple(validMessage, fc.integer({ min: -4, max: 4 })).map(([m, delta]) => {
      const body = frame(m);
      new DataView(body.buffer).setUint32(1, Math.max(0, m.length + (delta || 1)));
      return { body, gzip: false };
    }),
    fc.uint8Array({ minLength: 1, maxLength: 4 }).map((body) => ({ body, gzip: false })),
  );

  // ---- checks ----------------------------------------------------------------------------------

  function body(frames: Sent[]): Uint8Array {
    return Buffer.concat(
      frames.map((s) => (s.gzip ? frame(gzipSync(s.message), 1) : frame(s.message))),
    );
  }

  /**
   * What the service must answer a message: refuse what protobuf-es cannot read or the envelope
   * rules forbid, accept what is known valid; anything else it may accept or, being stricter
   * than protobuf-es in places (wire-reader.ts), refuse.
   */
  function expected(message: Uint8Array, valid: boolean): 'ok' | 'invalid_argument' | 'either' {
    const request = decode(message);
    if (request === undefined || !acceptable(request)) return 'invalid_argument';
    return valid ? 'ok' : 'either';
  }

  function expectAnswer(answer: RawAnswer, verdict: ReturnType<typeof expected>, what: string) {
    if (verdict === 'either') expect(['ok', 'invalid_argument'], what).toContain(answer.code);
    else expect(answer.code, what).toBe(verdict);
  }

  /** Checks an answer's ids against what was sent and remembers what the files must (not) hold. */
  function remember(answer: RawAnswer, accepted: PublishRequest[], refusedNow: Uint8Array[]) {
    if (answer.code === 'ok') {
      const events = accepted.flatMap((request) => request.events);
      expect(answer.eventIds).toHaveLength(events.length);
      events.forEach((event, i) => {
        if (event.eventId !== '') expect(answer.eventIds[i]).toBe(event.eventId);
        if (event.accountId === account) delivered.push(answer.eventIds[i]);
      });
    }
    for (const message of refusedNow) {
      for (const event of decode(message)?.events ?? []) {
        if (event.eventId !== '') refused.add(event.eventId);
      }
    }
  }

  it('answers any message in a gRPC or gRPC-Web Publish, compressed or not, by protobuf-es rules', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...UNARY), sent, async (framing, one) => {
        const headers: Record<string, string> = one.gzip ? { 'grpc-encoding': 'gzip' } : {};
        const answer = await sendRaw(target(), {
          framing,
          method: 'Publish',
          body: body([one]),
          headers,
        });
        const what = `${framing}${one.gzip ? ' gzip' : ''}: ${answer.code} ${answer.message}`;
        expectAnswer(answer, expected(one.message, one.valid), what);
        if (answer.code === 'ok') remember(answer, [decode(one.message)!], []);
        else remember(answer, [], [one.message]);
      }),
      fuzzParams(RUNS.unary),
    );
    await expectAlive(service);
  });

  it('answers broken frames in a gRPC or gRPC-Web Publish with invalid_argument', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...UNARY), brokenFrames, async (framing, broken) => {
        const headers: Record<string, string> = broken.gzip ? { 'grpc-encoding': 'gzip' } : {};
        const answer = await sendRaw(target(), {
          framing,
          method: 'Publish',
          body: broken.body,
          headers,
        });
        const shown = Buffer.from(broken.body.subarray(0, 12)).toString('hex');
        expect(answer.code, `${framing} ${shown}…: ${answer.message}`).toBe('invalid_argument');
      }),
      fuzzParams(RUNS.frames),
    );
    await expectAlive(service);
  });

  /**
   * The messages of a stream body as a correct server reads them (whole frames, flags 0, or 1
   * with gzip announced and gzip inside), or undefined when the framing is broken.
   */
  function readFrames(bytes: Uint8Array, gzip: boolean): Uint8Array[] | undefined {
    const view = Buffer.from(bytes);
    const messages: Uint8Array[] = [];
    for (let at = 0; at < view.length; ) {
      if (view.length - at < 5) return undefined;
      const flags = view[at];
      const length = view.readUInt32BE(at + 1);
      if (at + 5 + length > view.length) return undefined;
      let payload: Uint8Array = view.subarray(at + 5, at + 5 + length);
      if (flags === 1 && gzip) {
        try {
          payload = gunzipSync(payload);
        } catch {
          return undefined;
        }
      } else if (flags !== 0) return undefined;
      messages.push(payload);
      at += 5 + length;
    }
    return messages;
  }

  it('answers a PublishStream with a bad message or frame anywhere with invalid_argument', async () => {
    const last = fc.oneof(
      sent.map((one) => ({
        bytes: body([one]),
        gzip: one.gzip,
        message: one.message,
        valid: one.valid,
      })),
      // Broken frames that still read as a stream (two frames, none) carry valid messages.
      brokenFrames.map((broken) => ({
        bytes: broken.body,
        gzip: broken.gzip,
        message: undefined,
        valid: true,
      })),
      fc.constant(undefined),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...STREAMING),
        fc.array(validMessage, { maxLength: 3 }),
        last,
        async (framing, good, tail) => {
          const encoding =
            framing === 'connect-stream' ? 'connect-content-encoding' : 'grpc-encoding';
          const headers: Record<string, string> = tail?.gzip ? { [encoding]: 'gzip' } : {};
          const bytes = Buffer.concat([
            body(good.map((message) => ({ message, gzip: false }))),
            tail?.bytes ?? new Uint8Array(),
          ]);
          const answer = await sendRaw(target(), {
            framing,
            method: 'PublishStream',
            body: bytes,
            headers,
          });
          const messages = readFrames(bytes, tail?.gzip ?? false);
          const verdicts = (messages ?? []).map((m, i) =>
            expected(m, i < good.length || tail!.valid),
          );
          const verdict =
            messages === undefined || verdicts.includes('invalid_argument')
              ? 'invalid_argument'
              : verdicts.includes('either')
                ? 'either'
                : 'ok';
          const what = `${framing}, ${good.length} good + ${tail === undefined ? 'none' : Buffer.from(tail.bytes.subarray(0, 12)).toString('hex')}: ${answer.code} ${answer.message}`;
          expectAnswer(answer, verdict, what);
          // A refused stream may have made its earlier messages durable: only the bad one is refused.
          if (answer.code === 'ok')
            remember(
              answer,
              messages!.map((m) => decode(m)!),
              [],
            );
          else if (tail?.message !== undefined) remember(answer, [], [tail.message]);
        },
      ),
      fuzzParams(RUNS.streams),
    );
    await expectAlive(service);
  });

  it('still publishes over every framing afterwards', async () => {
    for (const framing of ['connect', ...STREAMING] as Framing[]) {
      const request = create(PublishRequestSchema, { events: events(3, serial) });
      const message = toBinary(PublishRequestSchema, request);
      const method = framing === 'connect-stream' ? 'PublishStream' : 'Publish';
      const answer = await sendRaw(target(), {
        framing,
        method,
        body: framing === 'connect' ? message : frame(message),
      });
      expect(answer.code, `${framing}: ${answer.message}`).toBe('ok');
      remember(answer, [request], []);
    }
    await expectAlive(service);
  });

  it('has delivered every accepted event and nothing of refused messages', async () => {
    const dir = join(store.env.DATA_DIR, 'events', account, DESTINATION_PATH);
    const inFiles = countOf(
      readdirSync(dir)
        .flatMap((file) => readFileSync(join(dir, file), 'utf8').split('\n'))
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line).event_id as string),
    );
    // A mutated message can carry another message's id (a changed digit: "wire-284" sent as
    // "wire-294", accepted, while the real wire-294's message was refused), so an id is checked
    // by count: the files hold it once per acceptance, and a refusal adds none.
    const accepted = countOf(delivered);
    const wrong = [...new Set([...delivered, ...refused])]
      .map((id) => ({ id, accepted: accepted.get(id) ?? 0, inFiles: inFiles.get(id) ?? 0 }))
      .filter((count) => count.accepted !== count.inFiles);
    expect(wrong).toEqual([]);
    expect(delivered.length).toBeGreaterThan(100);
  });
});

function countOf(ids: string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
  return counts;
}
