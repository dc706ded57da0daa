import { create, toBinary } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { SlabPool, SlabRegistry } from '../../src/data-plane/pipeline/block-slabs.ts';
import { routeRequest } from '../../src/data-plane/pipeline/route-events.ts';
import { compileRouting } from '../../src/data-plane/pipeline/routing.ts';
import { RecordBlock } from '../../src/data-plane/sinks/record-block.ts';
import { PublishRequestSchema } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { partsOf } from '../helpers/blocks.ts';
import { generateEvents } from '../helpers/events.ts';

const MiB = 2 ** 20;

describe('block slabs (worker → ingest thread hand-off)', () => {
  it('routes the same bytes into a slab as into buffers of its own', () => {
    const routing = compileRouting({
      version: 1,
      subscriptions: [
        {
          id: 's1',
          accountId: 'ac_a',
          sources: [{ type: 'http_request_complete.v0', filter: '', fields: [] }],
          destinationIds: ['d1', 'd2'],
        },
        {
          id: 's2',
          accountId: 'ac_a',
          sources: [{ type: 'http_request_complete.v0', filter: '', fields: ['conn'] }],
          destinationIds: ['d2'],
        },
      ],
    });
    const events = generateEvents(50, { accounts: ['ac_a'], tcpShare: 0, seed: 9 });
    // Event ids given, so both runs write the same records.
    for (const [i, event] of events.entries()) event.eventId = `ev_${i}`;
    const bytes = toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }));
    const plain = routeRequest(routing, bytes, 0);
    const pool = new SlabPool(8 * MiB);
    const slabbed = routeRequest(routing, bytes, 0, Infinity, undefined, pool);
    if (plain.kind !== 'routed' || slabbed.kind !== 'routed') throw new Error('not routed');
    const registry = new SlabRegistry();
    registry.learn(slabbed.slabs);
    expect(slabbed.slabs).toHaveLength(2);
    expect(slabbed.bytes).toBe(plain.bytes);
    for (const [i, delivery] of slabbed.deliveries.entries()) {
      if (!('slab' in delivery)) throw new Error('expected a slab block');
      const block = new RecordBlock(registry.parts(delivery.slab));
      const own = new RecordBlock(partsOf(plain.deliveries[i]));
      expect(block.text.equals(own.text)).toBe(true);
      expect(block.records()).toEqual(own.records());
      expect(block.text.buffer).toBeInstanceOf(SharedArrayBuffer);
      // A sink that may read after its write settled gets bytes of its own.
      expect(block.detached().text.buffer).not.toBeInstanceOf(SharedArrayBuffer);
      expect(block.detached().records()).toEqual(own.records());
    }
  });

  it('reuses a slab only once the ingest thread frees it, and tells of each slab once', () => {
    const pool = new SlabPool(3 * MiB);
    const registry = new SlabRegistry();
    const first = pool.take(10, 1000, 100)!;
    const second = pool.take(10, 1000, 100)!;
    expect(second.block.slab).not.toBe(first.block.slab);
    registry.learn(pool.announce());
    expect(pool.announce()).toBeUndefined();
    first.parts.text.fill(0x61);
    expect(registry.parts(first.block).text.toString()).toBe('a'.repeat(1000));
    registry.free(first.block);
    const third = pool.take(20, 2000, 200)!;
    expect(third.block.slab).toBe(first.block.slab);
    expect(pool.announce()).toBeUndefined();
    // Past its bound the pool makes no more slabs: the caller uses buffers of its own.
    expect(pool.take(10, 1000, 100)).toBeDefined();
    expect(pool.take(10, 1000, 100)).toBeUndefined();
    expect(() => new SlabRegistry().parts(first.block)).toThrow(/unknown slab/);
  });

  it('takes a block written into a reserved slab in place, and releases a slab it outgrew', () => {
    const pool = new SlabPool(1.5 * MiB); // room for one slab (1 MiB, the smallest)
    const registry = new SlabRegistry();
    const reserved = pool.reserve(1000)!;
    reserved.text.write('{"a":1}\n', 0);
    const fits = pool.commit(reserved, 1, 8, 4)!;
    registry.learn(pool.announce());
    expect(registry.parts(fits.block).text.toString()).toBe('{"a":1}\n');
    expect(pool.reserve(1)).toBeUndefined(); // its one slab is in use, the bound reached
    registry.free(fits.block);
    const again = pool.reserve(1)!;
    expect(again.slab).toBe(reserved.slab);
    // A block larger than the slab: undefined, and the slab is free for the next block.
    expect(pool.commit(again, 10, 2 * MiB, 100)).toBeUndefined();
    expect(pool.reserve(1)?.slab).toBe(reserved.slab);
  });
});
