import type { MessageToProduce } from '@platformatic/kafka';
import { META_FIELD } from '../record-block.ts';
import type { Batch } from '../types.ts';

const EVENT_TYPE = Buffer.from('event_type');
const EVENT_ID = Buffer.from('event_id');

/**
 * One batch as Kafka messages for `topic`. The key is the record's partition key, so one host's
 * events stay in one partition, in order; the headers let consumers route without parsing the
 * value. Key, value and header values are views of their block's bytes, not copies.
 */
export function encodeMessages(batch: Batch, topic: string): MessageToProduce[] {
  const messages: MessageToProduce[] = new Array(batch.count);
  let n = 0;
  for (const block of batch.blocks) {
    for (let i = 0; i < block.count; i++) {
      messages[n++] = {
        topic,
        key: block.metaBytes(i, META_FIELD.partitionKey),
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
