import type { Message } from 'kafkajs';
import type { Batch } from '../types.ts';

/**
 * One batch as Kafka messages. The key is the record's partition key, so one host's events stay
 * in one partition, in order; the headers let consumers route without parsing the value. The
 * value is a view of the batch's bytes, not a copy.
 */
export function encodeMessages(batch: Batch): Message[] {
  const messages: Message[] = new Array(batch.count);
  for (let i = 0; i < batch.count; i++) {
    messages[i] = {
      key: batch.partitionKey(i),
      value: batch.jsonBytes(i),
      headers: { event_type: batch.eventType(i), event_id: batch.eventId(i) },
    };
  }
  return messages;
}
