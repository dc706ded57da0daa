import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { afterAll, describe, expect, it } from 'vitest';
import { SlabRegistry } from '../../src/data-plane/pipeline/block-slabs.ts';
import { createRoutePool } from '../../src/data-plane/pipeline/worker-pool.ts';
import { RecordBlock } from '../../src/data-plane/sinks/record-block.ts';
import {
  PublishRequestSchema,
  PublishResponseSchema,
} from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { generateEvents } from '../helpers/events.ts';

describe('route-events worker pool', () => {
  const pool = createRoutePool({
    threads: 1,
    maxQueue: 8,
    maxEvents: 10_000,
    maxBytes: 4 * 1024 * 1024,
    maxInflightBytes: 16 * 1024 * 1024,
  });
  afterAll(() => pool.close());

  it('routes in a real worker and picks up each new configuration version', async () => {
    const events = generateEvents(4, { accounts: ['ac_pool'], tcpShare: 1, seed: 2 });
    const bytes = toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }));
    const before = await pool.route(bytes, Date.now());
    expect(before.kind === 'routed' && before.deliveries).toEqual([]);
    pool.setConfig({
      version: 2,
      subscriptions: [
        {
          id: 'esb_1',
          accountId: 'ac_pool',
          sources: [{ type: 'tcp_connection_closed.v0', filter: '', fields: [] }],
          destinationIds: ['ed_1'],
        },
      ],
    });
    const after = await pool.route(bytes, Date.now());
    if (after.kind !== 'routed') throw new Error(after.kind);
    // The block comes in one of the worker's slabs, announced with the result.
    const slabs = new SlabRegistry();
    slabs.learn(after.slabs);
    const [delivery] = after.deliveries;
    if (!('slab' in delivery)) throw new Error('expected a slab block');
    expect(delivery.destinationId).toBe('ed_1');
    expect(new RecordBlock(slabs.parts(delivery.slab)).records().map((r) => r.eventType)).toEqual(
      Array(4).fill('tcp_connection_closed.v0'),
    );
    slabs.free(delivery.slab);
    expect(fromBinary(PublishResponseSchema, after.response).accepted).toBe(4);
  });

  it('answers a bug in routing as failed, and a full queue as ERR_BACKPRESSURE', async () => {
    const events = generateEvents(2000, { accounts: ['ac_pool'], seed: 3 });
    const bytes = toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }));
    const answers = await Promise.allSettled(
      Array.from({ length: 30 }, () => pool.route(bytes, Date.now())),
    );
    const refused = answers.filter((answer) => answer.status === 'rejected');
    expect(refused.length).toBeGreaterThan(0);
    for (const answer of refused) {
      expect((answer as PromiseRejectedResult).reason).toMatchObject({ code: 'ERR_BACKPRESSURE' });
    }
    expect(answers.some((answer) => answer.status === 'fulfilled')).toBe(true);

    // A configuration routing cannot compile: a bug in the worker, not a dead pool.
    pool.setConfig({ version: 3, subscriptions: null as never });
    const failed = await pool.route(bytes, Date.now());
    expect(failed.kind).toBe('failed');
    expect(failed.kind === 'failed' && failed.message).toMatch(/TypeError/);
  });
});
