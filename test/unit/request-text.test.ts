import { create, toBinary } from '@bufbuild/protobuf';
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { filterableFields, type TrafficEventType } from '../../src/catalogue/index.ts';
import {
  compileProjection,
  compileSpanProjection,
  selectableNames,
} from '../../src/data-plane/filter/index.ts';
import { redactObject } from '../../src/data-plane/redaction/event-object.ts';
import { DEFAULT_REDACTION } from '../../src/data-plane/redaction/policy.ts';
import {
  type RequestText,
  readPublishRequest,
} from '../../src/data-plane/wire-json/request-text.ts';
import type { EventJson } from '../../src/data-plane/wire-json/to-json.ts';
import {
  type DecodedEvent,
  decodePublishRequest,
} from '../../src/data-plane/wire-json/wire-decode.ts';
import {
  type HttpRequestComplete,
  StringListSchema,
} from '../../src/gen/agent_ingress/events/v0/traffic_pb.ts';
import {
  EventSchema,
  PublishRequestSchema,
} from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { generateEvents, seededRandom } from '../helpers/events.ts';
import { fuzzParams } from '../helpers/fuzz.ts';
import { eventArb, requestBytes, rewrite } from '../helpers/wire-arbitraries.ts';

// readPublishRequest (the routing path: JSON text written straight from the wire) against the
// decoder it stands beside: for any input, it throws exactly when decodePublishRequest throws;
// otherwise every event's envelope is the decoder's, its text is JSON.stringify of the decoder's
// object byte for byte, redacted (redactObject with the default redaction), its Filterable view
// holds the object's leaves, and every field selection's span recipe gives JSON.stringify of
// compileProjection's object.

const params = fuzzParams;

function attempt<T>(fn: () => T): { ok: true; value: T } | { ok: false; error: unknown } {
  try {
    return { ok: true, value: fn() };
  } catch (error) {
    return { ok: false, error };
  }
}

function spanText(request: RequestText, spanBase: number, ops: readonly (Uint8Array | number)[]) {
  const parts = ops.map((op) =>
    typeof op === 'number'
      ? request.text.subarray(
          request.spans[spanBase + 2 * op],
          request.spans[spanBase + 2 * op + 1],
        )
      : op,
  );
  return Buffer.concat(parts).toString('utf8');
}

function filterableOf(object: EventJson, type: TrafficEventType): Record<string, unknown> {
  const view: Record<string, Record<string, unknown>> = {};
  for (const { path } of filterableFields(type)) {
    view[path[0]] ??= {};
    view[path[0]][path[1]] = (object[path[0]] as Record<string, unknown>)[path[1]];
  }
  return view;
}

/** How the events checked so far were written: straight from the wire, or from the object. */
const paths = { wire: 0, object: 0 };

/** Checks one request; `selections` are field selections to try on each event. */
function expectSameAsDecoder(bytes: Uint8Array, selections: (readonly string[])[] = []) {
  const expected = attempt(() => decodePublishRequest(bytes));
  const actual = attempt(() => readPublishRequest(bytes));
  const what = `bytes ${Buffer.from(bytes).toString('hex').slice(0, 400)}`;
  if (!expected.ok) {
    expect(actual.ok, `${what}: the decoder rejects what readPublishRequest accepted`).toBe(false);
    expect(!actual.ok && actual.error).toMatchObject(
      (expected.error as { code: string }).code === undefined
        ? {}
        : { code: (expected.error as { code: string }).code },
    );
    return;
  }
  if (!actual.ok) throw actual.error;
  const request = actual.value;
  const decoded: DecodedEvent[] = expected.value;
  expect(request.events.length, what).toBe(decoded.length);
  decoded.forEach((want, i) => {
    const event = request.events[i];
    const { accountId, eventId, eventTimestamp, type } = event;
    expect({ accountId, eventId, eventTimestamp, type }, what).toEqual({
      accountId: want.accountId,
      eventId: want.eventId,
      eventTimestamp: want.eventTimestamp,
      type: want.type,
    });
    if (want.type === undefined || want.object === undefined) return;
    paths[event.object === undefined ? 'wire' : 'object']++;
    const delivered = redactObject(want.object, DEFAULT_REDACTION);
    expect(spanText(request, event.spanBase, [0]), what).toBe(JSON.stringify(delivered));
    expect(request.filterable(i), what).toEqual(filterableOf(want.object, want.type));
    expect(JSON.stringify(request.object(i)), what).toBe(JSON.stringify(want.object));
    for (const fields of selections) {
      const names = fields.filter((f) => selectableNames(want.type!).includes(f));
      const text = spanText(request, event.spanBase, compileSpanProjection(want.type, names));
      const object = compileProjection(want.type, names)(delivered);
      expect(text, `${what} fields ${names.join(',')}`).toBe(JSON.stringify(object));
    }
  });
}

const selectionArb = fc.array(
  fc.array(
    fc.constantFrom(
      ...new Set([
        ...selectableNames('http_request_complete.v0'),
        ...selectableNames('tcp_connection_closed.v0'),
      ]),
    ),
    { maxLength: 6 },
  ),
  { maxLength: 3 },
);

describe('readPublishRequest', () => {
  it('writes the decoder’s JSON for the generated traffic of test/helpers, every selection too', () => {
    const events = generateEvents(500, { accounts: ['ac_1', 'ac_2'], seed: 11 });
    const bytes = requestBytes(events);
    const fields = [
      ['conn'],
      ['http.request.method', 'conn.client_ip', 'http.response.status_code'],
      ['conn.server_name', 'conn'],
      ['tcp.bytes_in', 'conn.bytes_out'],
    ];
    expectSameAsDecoder(bytes, fields);
    // Twice: the second request reuses the module's buffers.
    expectSameAsDecoder(bytes, fields);
    // A range inside a larger buffer.
    const pooled = new Uint8Array(bytes.length + 9);
    pooled.set(bytes, 5);
    expectSameAsDecoder(pooled.subarray(5, 5 + bytes.length));
  });

  it('writes the decoder’s JSON for random requests and field selections', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { maxLength: 4 }), selectionArb, (events, selections) => {
        expectSameAsDecoder(requestBytes(events), selections);
      }),
      params(400),
    );
  });

  it('agrees with the decoder on unknown fields, split messages and reordered fields', () => {
    // Unknown fields are skipped on the wire path; a split message takes the fallback (written
    // from the decoder's object). Both paths must be exercised.
    paths.wire = 0;
    paths.object = 0;
    fc.assert(
      fc.property(
        fc.array(eventArb, { minLength: 1, maxLength: 3 }),
        fc.integer(),
        fc.constantFrom(0.05, 0.3, 1),
        selectionArb,
        (events, seed, p, selections) => {
          const bytes = rewrite(requestBytes(events), PublishRequestSchema, seededRandom(seed), p);
          expectSameAsDecoder(bytes, selections);
        },
      ),
      params(300),
    );
    expect(paths.wire).toBeGreaterThan(0);
    expect(paths.object).toBeGreaterThan(0);
  });

  it('agrees with the decoder on two encodings of an event in one (merged by protobuf)', () => {
    fc.assert(
      fc.property(eventArb, eventArb, selectionArb, (a, b, selections) => {
        const w = new BinaryWriter();
        w.tag(1, WireType.LengthDelimited).bytes(
          new Uint8Array([...toBinary(EventSchema, a), ...toBinary(EventSchema, b)]),
        );
        expectSameAsDecoder(w.finish(), selections);
      }),
      params(200),
    );
  });

  it('throws exactly when the decoder does on truncated and mutated requests', () => {
    const bytes = requestBytes(generateEvents(3, { accounts: ['a'], seed: 5 }));
    for (let cut = 0; cut < bytes.length; cut++) expectSameAsDecoder(bytes.subarray(0, cut));
    fc.assert(
      fc.property(
        fc.array(eventArb, { minLength: 1, maxLength: 2 }),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), {
          minLength: 1,
          maxLength: 4,
        }),
        (events, flips) => {
          const mutated = Uint8Array.from(requestBytes(events));
          for (const [at, value] of flips) mutated[at % mutated.length] = value;
          expectSameAsDecoder(mutated);
        },
      ),
      params(500),
    );
  });

  it('writes header entries of every layout the fast path takes or leaves to the general one', () => {
    // One-byte lengths take the fast path; a key or value of 128 bytes or more has a two-byte
    // length and goes the general way, as do the repeated and the all-digits key (the object).
    const long = 'v'.repeat(200);
    const headerSets: Record<string, { values: string[] }>[] = [
      {
        Accept: { values: ['*/*'] },
        Authorization: { values: ['Bearer secret', 'again'] },
        Empty: { values: [] },
        'X-Escapes': { values: ['a"b\\c\n\u0001', 'é ✓ 😀'] },
        [`X-${'k'.repeat(130)}`]: { values: ['long key'] },
        'X-Long': { values: [long, 'short'] },
      },
      { Cookie: { values: [long] }, '123': { values: ['index key'] } },
      { '': { values: ['empty key'] }, 'Proxy-Authorization': { values: [] } },
    ];
    for (const headers of headerSets) {
      const [event] = generateEvents(1, { accounts: ['a'], seed: 3, tcpShare: 0 });
      const request = (event.payload.value as HttpRequestComplete).http!.request!;
      request.headers = Object.fromEntries(
        Object.entries(headers).map(([name, list]) => [name, create(StringListSchema, list)]),
      );
      expectSameAsDecoder(requestBytes([event]));
    }
  });

  it('rejects a string that is not UTF-8, as the decoder does', () => {
    const [event] = generateEvents(1, { accounts: ['a'], seed: 1, tcpShare: 0 });
    const bytes = Buffer.from(requestBytes([event]));
    // The server name is in the payload; make one of its bytes a lone continuation byte.
    const name = Buffer.from(event.payload.value!.conn!.serverName);
    const at = bytes.indexOf(name);
    expect(at).toBeGreaterThan(0);
    bytes[at] = 0x80;
    expect(() => decodePublishRequest(bytes)).toThrow();
    expect(() => readPublishRequest(bytes)).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_EVENTS' }),
    );
  });
});
