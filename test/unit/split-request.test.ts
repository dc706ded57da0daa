import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { afterAll, describe, expect, it } from 'vitest';
import { SlabRegistry } from '../../src/data-plane/pipeline/block-slabs.ts';
import {
  MIN_SPLIT_EVENTS,
  routeByIdleWorkers,
  splitPoint,
} from '../../src/data-plane/pipeline/split-request.ts';
import { createRoutePool } from '../../src/data-plane/pipeline/worker-pool.ts';
import type { RouteResult } from '../../src/data-plane/pipeline/worker-protocol.ts';
import { RecordBlock } from '../../src/data-plane/sinks/record-block.ts';
import {
  PublishRequestSchema,
  PublishResponseSchema,
} from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { generateEvents } from '../helpers/events.ts';

const ACCOUNT = 'ac_split';

/** `n` events with ids of their own, so that routed text does not depend on who routed it. */
function request(n: number, change?: (events: ReturnType<typeof generateEvents>) => void) {
  const events = generateEvents(n, { accounts: [ACCOUNT], seed: 5 }).map((event, i) => ({
    ...event,
    eventId: `ev_split_${i}`,
  }));
  change?.(events);
  return toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }));
}

/** Each destination's NDJSON, the blocks' slabs given back. */
function texts(result: RouteResult, slabs: SlabRegistry): Map<string, string> {
  if (result.kind !== 'routed') throw new Error(`expected routed, got ${result.kind}`);
  slabs.learn(result.slabs);
  const out = new Map<string, string>();
  for (const delivery of result.deliveries) {
    const parts = 'slab' in delivery ? slabs.parts(delivery.slab) : delivery.parts;
    const text = new RecordBlock(parts).text.toString('utf8');
    out.set(delivery.destinationId, (out.get(delivery.destinationId) ?? '') + text);
    if ('slab' in delivery) slabs.free(delivery.slab);
  }
  return out;
}

describe('a request split between idle workers', () => {
  const pool = createRoutePool({
    threads: 2,
    maxQueue: 8,
    maxEvents: 1000,
    maxBytes: 4 * 1024 * 1024,
    maxInflightBytes: 16 * 1024 * 1024,
  });
  pool.setConfig({
    version: 1,
    subscriptions: [
      {
        id: 'esb_all',
        accountId: ACCOUNT,
        sources: [
          { type: 'http_request_complete.v0', filter: '', fields: [] },
          { type: 'tcp_connection_closed.v0', filter: '', fields: [] },
        ],
        destinationIds: ['ed_all'],
      },
      {
        id: 'esb_443',
        accountId: ACCOUNT,
        sources: [
          {
            type: 'http_request_complete.v0',
            filter: 'conn.server_port == 443',
            fields: ['conn.client_ip'],
          },
        ],
        destinationIds: ['ed_443'],
      },
    ],
  });
  const slabs = new SlabRegistry();
  afterAll(() => pool.close());

  it('cuts at an event boundary near the middle, only plain requests large enough', () => {
    const bytes = request(200);
    const at = splitPoint(bytes, MIN_SPLIT_EVENTS, 1000)!;
    expect(Math.abs(at - bytes.length / 2)).toBeLessThan(bytes.length / 20);
    const halves = [bytes.subarray(0, at), bytes.subarray(at)].map(
      (half) => fromBinary(PublishRequestSchema, half).events,
    );
    expect(halves.map((events) => events.length).reduce((a, b) => a + b)).toBe(200);
    expect(halves[1][0].eventId).toBe(`ev_split_${halves[0].length}`);
    expect(splitPoint(request(MIN_SPLIT_EVENTS - 1))).toBeUndefined();
    expect(splitPoint(bytes, MIN_SPLIT_EVENTS, 199)).toBeUndefined();
    // Truncated framing, or a field other than events: the worker answers it whole.
    expect(splitPoint(bytes.subarray(0, bytes.length - 1))).toBeUndefined();
    expect(splitPoint(Buffer.concat([bytes, Uint8Array.of(0x10, 0x01)]))).toBeUndefined();
  });

  it('answers and delivers exactly what one worker routing it whole does, in order', async () => {
    const bytes = request(300);
    const at = Date.now();
    const whole = await pool.route(bytes, at);
    expect(pool.idle()).toBe(2);
    const split = await routeByIdleWorkers(pool, slabs, bytes, at);
    if (whole.kind !== 'routed' || split.kind !== 'routed') throw new Error('not routed');
    // Two workers routed it: each destination got a block from each half.
    expect(split.deliveries).toHaveLength(2 * whole.deliveries.length);
    expect(Buffer.from(split.response)).toEqual(Buffer.from(whole.response));
    expect(fromBinary(PublishResponseSchema, split.response).accepted).toBe(300);
    expect([split.accepted, split.matched]).toEqual([whole.accepted, whole.matched]);
    expect(split.bytes).toBe(whole.bytes);
    const wholeTexts = texts(whole, slabs);
    expect(wholeTexts.size).toBe(2);
    expect(texts(split, slabs)).toEqual(wholeTexts);
    const count = (result: typeof split) =>
      result.tally.subscriptions.reduce((n, [, matched]) => n + matched, 0);
    expect(count(split)).toBe(count(whole));
  });

  it('answers an invalid event in either half as the whole request, naming its index', async () => {
    const bytes = request(300, (events) => {
      events[250] = { ...events[250], accountId: '' };
    });
    const result = await routeByIdleWorkers(pool, slabs, bytes, Date.now());
    expect(result).toMatchObject({
      kind: 'invalid',
      message: 'events[250].account_id must be 1-128 characters',
    });
  });
});
