import type { Delivery } from '../../src/data-plane/pipeline/worker-protocol.ts';
import { type EventRecord, RecordBlock } from '../../src/data-plane/sinks/record-block.ts';

/** A worker's delivery as record objects, to assert on. */
export function recordsOf(delivery: Delivery): EventRecord[] {
  return new RecordBlock(delivery.parts).records();
}
