import type { Message } from 'kafkajs';
import type { Batch } from '../types.ts';

/**
 * One batch as Kafka messages. The key is the record's partition key, so one host's events stay
 * in one partition, in order; the headers let consumers route without parsing the value.
 */
export function encodeMessages(batch: Batch): Message[] {
  return batch.records.map((r) => ({
    key: r.partitionKey,
    value: r.json,
    headers: { event_type: r.eventType, event_id: r.eventId },
  }));
}
