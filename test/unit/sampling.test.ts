import { create, toBinary } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { routeRequest } from '../../src/data-plane/pipeline/route-events.ts';
import { compileRouting, type RoutingConfig } from '../../src/data-plane/pipeline/routing.ts';
import { eventIdHash, sampleBound, sampled } from '../../src/data-plane/pipeline/sampling.ts';
import { PublishRequestSchema } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { recordsOf } from '../helpers/blocks.ts';
import { generateEvents } from '../helpers/events.ts';

// A source's sample_rate keeps r of the events passing its filter, chosen by event id: the same
// events on every worker, instance and retry.

const HTTP = 'http_request_complete.v0';
const TOTAL = 100_000;
const BATCH = 2_000;

function config(sampleRate: number): RoutingConfig {
  return {
    version: 1,
    subscriptions: [
      {
        id: 'sampled',
        accountId: 'ac_a',
        sources: [{ type: HTTP, filter: 'conn.server_port > 0', fields: [], sampleRate }],
        destinationIds: ['d_sampled'],
      },
      {
        id: 'all',
        accountId: 'ac_a',
        sources: [{ type: HTTP, filter: '', fields: ['conn.server_port'] }],
        destinationIds: ['d_all'],
      },
    ],
  };
}

/** The event ids each destination receives when `routing` routes all batches. */
function deliveredIds(routing: ReturnType<typeof compileRouting>, batches: Uint8Array[]) {
  const ids = new Map<string, string[]>([
    ['d_sampled', []],
    ['d_all', []],
  ]);
  for (const bytes of batches) {
    const result = routeRequest(routing, bytes, Date.UTC(2026, 10, 23), BATCH);
    if (result.kind !== 'routed') throw new Error(result.kind);
    for (const d of result.deliveries)
      ids.get(d.destinationId)!.push(...recordsOf(d).map((r) => r.eventId));
  }
  return ids;
}

describe('sampling', () => {
  it('keeps 10 % ± 1 % of 100 k events at r = 0.1, the same ones on two instances', () => {
    const batches: Uint8Array[] = [];
    const events = generateEvents(BATCH, { accounts: ['ac_a'], tcpShare: 0, seed: 1 });
    for (let start = 0; start < TOTAL; start += BATCH) {
      // Sequential edge-supplied ids: the hardest case for a weak hash.
      events.forEach((e, i) => {
        e.eventId = `edge-${start + i}`;
      });
      batches.push(toBinary(PublishRequestSchema, create(PublishRequestSchema, { events })));
    }
    // Two instances: each compiles its own routing from the same stored configuration.
    const one = deliveredIds(compileRouting(config(0.1)), batches);
    const two = deliveredIds(compileRouting(config(0.1)), batches);
    const kept = one.get('d_sampled')!;
    expect(one.get('d_all')).toHaveLength(TOTAL);
    expect(kept.length).toBeGreaterThanOrEqual(0.09 * TOTAL);
    expect(kept.length).toBeLessThanOrEqual(0.11 * TOTAL);
    expect(two.get('d_sampled')).toEqual(kept);
    // A retry of the same events decides the same way; rate 1 keeps everything.
    expect(deliveredIds(compileRouting(config(0.1)), batches.slice(0, 3)).get('d_sampled')).toEqual(
      kept.filter((id) => Number(id.slice(5)) < 3 * BATCH),
    );
    expect(
      deliveredIds(compileRouting(config(1)), batches.slice(0, 1)).get('d_sampled'),
    ).toHaveLength(BATCH);
  });

  it('applies the filter first: sampling keeps r of the matching events only', () => {
    const routing = compileRouting({
      version: 1,
      subscriptions: [
        {
          id: 's',
          accountId: 'ac_a',
          sources: [{ type: HTTP, filter: 'conn.server_port == 443', fields: [], sampleRate: 0.5 }],
          destinationIds: ['d'],
        },
      ],
    });
    const events = generateEvents(BATCH, { accounts: ['ac_a'], tcpShare: 0, seed: 9 });
    events.forEach((e, i) => {
      e.eventId = `f-${i}`;
    });
    const bytes = toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }));
    const result = routeRequest(routing, bytes, Date.now(), BATCH);
    if (result.kind !== 'routed') throw new Error(result.kind);
    const delivery = result.deliveries[0];
    const records = delivery === undefined ? [] : recordsOf(delivery);
    for (const r of records) expect(JSON.parse(r.json).object.conn.server_port).toBe(443);
    const matching = events.filter(
      (e) => e.payload.case === 'httpRequestComplete' && e.payload.value.conn?.serverPort === 443,
    );
    const expected = matching.filter((e) => sampled(e.eventId, sampleBound(0.5)));
    expect(records.map((r) => r.eventId)).toEqual(expected.map((e) => e.eventId));
    expect(records.length).toBeGreaterThan(0);
    expect(records.length).toBeLessThan(matching.length);
  });

  it('spreads ids over the whole hash range at any rate', () => {
    const ids = Array.from({ length: 50_000 }, (_, i) => `ev_${i.toString(36)}`);
    for (const rate of [0.5, 0.25, 0.01]) {
      const bound = sampleBound(rate);
      const kept = ids.filter((id) => sampled(id, bound)).length;
      expect(Math.abs(kept / ids.length - rate)).toBeLessThan(Math.max(0.01, rate * 0.2));
    }
    expect(sampleBound(1)).toBeUndefined();
    expect(eventIdHash('a')).toBe(eventIdHash('a'));
    expect(eventIdHash('a')).not.toBe(eventIdHash('b'));
    expect(eventIdHash('x'.repeat(200))).toBeGreaterThanOrEqual(0);
  });
});
