import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { routeRequest } from '../../src/data-plane/pipeline/route-events.ts';
import { compileRouting, type RoutingConfig } from '../../src/data-plane/pipeline/routing.ts';
import { type TapSpec, TEE_PER_REQUEST } from '../../src/data-plane/pipeline/tap-tee.ts';
import {
  PublishRequestSchema,
  PublishResponseSchema,
} from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { partsOf, recordsOf } from '../helpers/blocks.ts';
import { generateEvents } from '../helpers/events.ts';

const HTTP = 'http_request_complete.v0';

function config(subscriptions: RoutingConfig['subscriptions']): RoutingConfig {
  return { version: 1, subscriptions };
}

function request(count: number, accounts = ['ac_a']) {
  const events = generateEvents(count, { accounts, tcpShare: 0, seed: 5 });
  return {
    events,
    bytes: toBinary(PublishRequestSchema, create(PublishRequestSchema, { events })),
  };
}

describe('routeRequest', () => {
  it('serializes once per field selection and never duplicates an event in a destination', () => {
    const routing = compileRouting(
      config([
        {
          id: 's1',
          accountId: 'ac_a',
          sources: [{ type: HTTP, filter: '', fields: [] }],
          destinationIds: ['d1'],
        },
        {
          id: 's2',
          accountId: 'ac_a',
          sources: [{ type: HTTP, filter: 'conn.server_port > 0', fields: [] }],
          destinationIds: ['d1', 'd2'],
        },
        {
          id: 's3',
          accountId: 'ac_a',
          sources: [{ type: HTTP, filter: '', fields: ['conn.client_ip'] }],
          destinationIds: ['d1'],
        },
      ]),
    );
    const { bytes } = request(10);
    const result = routeRequest(routing, bytes, Date.now());
    if (result.kind !== 'routed') throw new Error(result.kind);
    const byDestination = Object.fromEntries(
      result.deliveries.map((d) => [d.destinationId, recordsOf(d)]),
    );
    expect(byDestination.d1).toHaveLength(20);
    expect(byDestination.d2).toHaveLength(10);
    expect(byDestination.d2[0]).toEqual(byDestination.d1[0]);
    expect(JSON.parse(byDestination.d1[1].json).object).toEqual({
      conn: { client_ip: expect.any(String) },
    });
    expect(result.matched).toBe(10);
  });

  it('acknowledges events of unknown accounts without routing them and keeps given event ids', () => {
    const routing = compileRouting(config([]));
    const { events } = request(3, ['ac_nobody']);
    events[1].eventId = 'edge-supplied-id-1';
    const bytes = toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }));
    const result = routeRequest(routing, bytes, Date.now());
    if (result.kind !== 'routed') throw new Error(result.kind);
    expect(result.deliveries).toEqual([]);
    const response = fromBinary(PublishResponseSchema, result.response);
    expect(response.accepted).toBe(3);
    expect(response.eventIds[1]).toBe('edge-supplied-id-1');
    expect(response.eventIds[0]).toMatch(/^ev_/);
  });

  it('rejects the whole request when one event is invalid, and undecodable bytes', () => {
    const routing = compileRouting(config([]));
    const { events } = request(3);
    events[2].accountId = '';
    const bytes = toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }));
    expect(routeRequest(routing, bytes, Date.now())).toEqual({
      kind: 'invalid',
      message: 'events[2].account_id must be 1-128 characters',
      accounts: [
        ['ac_a', 2],
        ['', 1],
      ],
    });
    expect(routeRequest(routing, new Uint8Array([0xff, 0xff, 0xff]), Date.now()).kind).toBe(
      'invalid',
    );
  });

  it('refuses a request over maxEvents before decoding past it, and counts the bytes it holds', () => {
    const routing = compileRouting(
      config([
        {
          id: 's1',
          accountId: 'ac_a',
          sources: [{ type: HTTP, filter: '', fields: [] }],
          destinationIds: ['d1', 'd2'],
        },
      ]),
    );
    const { bytes } = request(5);
    expect(routeRequest(routing, bytes, Date.now(), 4)).toEqual({
      kind: 'too-many',
      message: 'a request may carry at most 4 events (MAX_INGEST_EVENTS); split it',
    });
    const result = routeRequest(routing, bytes, Date.now(), 5);
    if (result.kind !== 'routed') throw new Error(`not routed: ${result.kind}`);
    // Each destination has its own copy of the records: both count.
    const [d1, d2] = result.deliveries.map(partsOf);
    expect(Buffer.from(d2.text).equals(Buffer.from(d1.text))).toBe(true);
    expect(result.bytes).toBe(2 * (d1.text.length + d1.meta.length));
  });
});

describe('routeRequest with taps (tap-tee.ts)', () => {
  const routing = compileRouting(
    config([
      {
        id: 's1',
        accountId: 'ac_a',
        sources: [{ type: HTTP, filter: 'conn.server_port == 443', fields: ['conn.server_port'] }],
        destinationIds: ['d1'],
      },
    ]),
  );

  it('tees nothing and adds nothing to the result while no tap is open', () => {
    const { bytes } = request(20);
    const result = routeRequest(routing, bytes, Date.now(), Number.POSITIVE_INFINITY, undefined);
    expect(result).not.toHaveProperty('tapped');
  });

  it('gives a subscription tap its delivered records and a preview its own filter’s, bounded', () => {
    const { events, bytes } = request(60, ['ac_a', 'ac_b']);
    const taps = [
      { id: 'tap_s', kind: 'subscription', subscriptionId: 's1' },
      {
        id: 'tap_other',
        kind: 'subscription',
        subscriptionId: 's1',
        type: 'tcp_connection_closed.v0',
      },
      { id: 'tap_p', kind: 'preview', accountId: 'ac_b', type: HTTP, filter: '', fields: [] },
    ] satisfies TapSpec[];
    const result = routeRequest(routing, bytes, Date.now(), Number.POSITIVE_INFINITY, taps);
    if (result.kind !== 'routed') throw new Error(result.kind);
    const byId = Object.fromEntries((result.tapped ?? []).map((c) => [c.id, c]));
    const delivered = recordsOf(result.deliveries[0]);
    expect(byId.tap_s.matched).toBe(delivered.length);
    expect(byId.tap_s.records).toEqual(
      delivered.slice(0, TEE_PER_REQUEST).map((record) => record.json),
    );
    expect(byId.tap_other).toBeUndefined();
    const ofB = events.filter((event) => event.accountId === 'ac_b').length;
    expect(byId.tap_p.matched).toBe(ofB);
    expect(byId.tap_p.records).toHaveLength(Math.min(ofB, TEE_PER_REQUEST));
    for (const json of byId.tap_p.records) expect(JSON.parse(json).account_id).toBe('ac_b');
  });

  it('tallies events per account and matches per subscription, after filter and sampling', () => {
    const tallied = compileRouting(
      config([
        {
          id: 's_all',
          accountId: 'ac_a',
          sources: [{ type: HTTP, filter: '', fields: [] }],
          destinationIds: ['d1'],
        },
        {
          id: 's_443',
          accountId: 'ac_a',
          sources: [{ type: HTTP, filter: 'conn.server_port == 443', fields: [] }],
          destinationIds: ['d1'],
        },
        {
          id: 's_half',
          accountId: 'ac_a',
          sources: [{ type: HTTP, filter: '', fields: [], sampleRate: 0.5 }],
          destinationIds: ['d2'],
        },
      ]),
    );
    // Accounts interleaved, so runs of one account are summed into one entry each.
    const { events, bytes } = request(200, ['ac_a', 'ac_b', 'ac_a', 'ac_c']);
    const ofA = events.filter((event) => event.accountId === 'ac_a');
    const on443 = ofA.filter((event) => (event.payload.value as any).conn.serverPort === 443);
    expect(on443.length).toBeGreaterThan(0);
    for (let round = 0; round < 2; round++) {
      const result = routeRequest(tallied, bytes, Date.now());
      if (result.kind !== 'routed') throw new Error(result.kind);
      const d2 = result.deliveries.find((d) => d.destinationId === 'd2');
      const half = d2 === undefined ? 0 : recordsOf(d2).length;
      expect(half).toBeGreaterThan(0);
      expect(half).toBeLessThan(ofA.length);
      const accounts = Object.fromEntries(result.tally.accounts.map(([id, ...n]) => [id, n]));
      expect(accounts).toEqual({
        ac_a: [ofA.length, ofA.length],
        ac_b: [events.filter((event) => event.accountId === 'ac_b').length, 0],
        ac_c: [events.filter((event) => event.accountId === 'ac_c').length, 0],
      });
      // Each request counts afresh (the routes' scratch counts do not carry over).
      expect(Object.fromEntries(result.tally.subscriptions)).toEqual({
        s_all: ofA.length,
        s_443: on443.length,
        s_half: half,
      });
    }
  });
});
