import type { MessageToProduce } from '@platformatic/kafka';
import { META_FIELD, type RecordBlock } from '../record-block.ts';
import type { Batch } from '../types.ts';
import { own } from './batch-memory.ts';
import { keyPartition } from './partition.ts';

const EVENT_TYPE = Buffer.from('event_type');
const EVENT_ID = Buffer.from('event_id');

/**
 * One batch as Kafka messages for `topic`. The key is the record's partition key, so one host's
 * events stay in one partition, in order; the headers let consumers route without parsing the
 * value. Key, value and header values are views of the batch's own bytes: blocks in shared
 * memory are copied into `memory` (sharedBytes long, see batch-memory.ts), or into fresh
 * buffers without it. The partition is the one the client's compatibilityPartitioner would
 * choose, computed faster.
 */
export function encodeMessages(batch: Batch, topic: string, memory?: Buffer): MessageToProduce[] {
  const messages: MessageToProduce[] = new Array(batch.count);
  let n = 0;
  let at = 0;
  for (const shared of batch.blocks) {
    let block: RecordBlock;
    if (memory) ({ block, end: at } = own(shared, memory, at));
    else block = shared.detached();
    for (let i = 0; i < block.count; i++) {
      const key = block.metaBytes(i, META_FIELD.partitionKey);
      messages[n++] = {
        topic,
        key,
        partition: keyPartition(key),
        value: block.jsonBytes(i),
        headers: new Map([
          [EVENT_TYPE, block.metaBytes(i, META_FIELD.eventType)],
          [EVENT_ID, block.metaBytes(i, META_FIELD.eventId)],
        ]),
      };
    }
  }
  return messages;
}
