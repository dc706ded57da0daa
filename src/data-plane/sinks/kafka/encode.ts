import type { Message } from 'kafkajs';
import type { Batch } from '../types.ts';

/**
 * One batch as Kafka messages. The key is the record's partition key, so one host's events stay
 * in one partition, in order; the headers let consumers route without parsing the value. The
 * value is a view of its block's bytes, not a copy.
 */
export function encodeMessages(batch: Batch): Message[] {
  const messages: Message[] = new Array(batch.count);
  let n = 0;
  for (const block of batch.blocks) {
    for (let i = 0; i < block.count; i++) {
      messages[n++] = {
        key: block.partitionKey(i),
        value: block.jsonBytes(i),
        headers: { event_type: block.eventType(i), event_id: block.eventId(i) },
      };
    }
  }
  return messages;
}
