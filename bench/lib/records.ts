import { create, toBinary } from '@bufbuild/protobuf';
import { routeRequest } from '../../src/data-plane/pipeline/route-events.ts';
import { compileRouting } from '../../src/data-plane/pipeline/routing.ts';
import { batchOf, RecordBlock } from '../../src/data-plane/sinks/record-block.ts';
import type { Batch } from '../../src/data-plane/sinks/types.ts';
import { PublishRequestSchema } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { partsOf } from '../../test/helpers/blocks.ts';
import { generateEvents } from '../../test/helpers/events.ts';

// Delivery records exactly as the route-events worker makes them (routeRequest over binary
// PublishRequests of generated traffic, one catch-all subscription), cut into sink batches.

/** `batches` batches of `size` records (both traffic kinds, envelopes serialized by the worker). */
export function recordBatches(size: number, batches: number): Batch[] {
  const account = 'ac_bench';
  const routing = compileRouting({
    version: 1,
    subscriptions: [
      {
        id: 'sub_bench',
        accountId: account,
        sources: ['http_request_complete.v0', 'tcp_connection_closed.v0'].map((type) => ({
          type,
          filter: '',
          fields: [],
        })),
        destinationIds: ['dest_bench'],
      },
    ],
  });
  const events = generateEvents(size * batches, { accounts: [account], seed: 7 });
  const blocks: RecordBlock[] = [];
  for (let i = 0; i < events.length; i += 500) {
    const bytes = toBinary(
      PublishRequestSchema,
      create(PublishRequestSchema, { events: events.slice(i, i + 500) }),
    );
    const result = routeRequest(routing, bytes, Date.now());
    if (result.kind !== 'routed') throw new Error(`routeRequest: ${JSON.stringify(result)}`);
    for (const delivery of result.deliveries) blocks.push(new RecordBlock(partsOf(delivery)));
  }
  // Batches as the batcher makes them: pieces of the workers' blocks, not copies.
  const out: Batch[] = [];
  let pieces: RecordBlock[] = [];
  let n = 0;
  for (const block of blocks) {
    for (let from = 0; from < block.count && out.length < batches; ) {
      const take = Math.min(size - n, block.count - from);
      pieces.push(block.slice(from, from + take));
      from += take;
      n += take;
      if (n === size) {
        out.push(batchOf(pieces));
        pieces = [];
        n = 0;
      }
    }
  }
  return out;
}
