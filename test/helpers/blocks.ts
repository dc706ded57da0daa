import type { Delivery } from '../../src/data-plane/pipeline/worker-protocol.ts';
import {
  type BlockParts,
  type EventRecord,
  RecordBlock,
} from '../../src/data-plane/sinks/record-block.ts';

/** A delivery's buffers, as routeRequest gives them without a slab pool. */
export function partsOf(delivery: Delivery): BlockParts {
  if (!('parts' in delivery)) throw new Error('a slab block: route without a slab pool');
  return delivery.parts;
}

/** A worker's delivery as record objects, to assert on. */
export function recordsOf(delivery: Delivery): EventRecord[] {
  return new RecordBlock(partsOf(delivery)).records();
}
