import type { Delivery } from '../../src/pipeline/worker-protocol.ts';
import { type EventRecord, RecordBlock } from '../../src/sinks/record-block.ts';

/** A worker's delivery as record objects, to assert on. */
export function recordsOf(delivery: Delivery): EventRecord[] {
  return new RecordBlock(delivery.parts).records();
}
