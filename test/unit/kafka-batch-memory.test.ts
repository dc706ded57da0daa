import { describe, expect, it } from 'vitest';
import { BatchMemory, sharedBytes } from '../../src/data-plane/sinks/kafka/batch-memory.ts';
import { encodeMessages } from '../../src/data-plane/sinks/kafka/encode.ts';
import { batchOf, RecordBlock } from '../../src/data-plane/sinks/record-block.ts';

const block = (from: number, to: number) =>
  RecordBlock.of(
    Array.from({ length: to - from }, (_, k) => ({
      eventId: `ev_${from + k}`,
      eventType: 'http_request_complete.v0',
      accountId: 'ac_1',
      partitionKey: `host-${(from + k) % 3}.example.com`,
      json: JSON.stringify({ event_id: `ev_${from + k}`, n: 'x'.repeat(k) }),
    })),
  );

// A block as the workers' slabs lend it: its bytes in shared memory.
function inSlab(b: RecordBlock): RecordBlock {
  const shared = (bytes: Uint8Array) => {
    const copy = Buffer.from(new SharedArrayBuffer(bytes.byteLength));
    copy.set(bytes);
    return copy;
  };
  return new RecordBlock({ ...b.parts(), text: shared(b.text), meta: shared(b.meta) });
}

const plainMessages = (messages: ReturnType<typeof encodeMessages>) =>
  messages.map(({ topic, key, partition, value, headers }) => ({
    topic,
    key: String(key),
    partition,
    value: String(value),
    headers: [...(headers as Map<Buffer, Buffer>)].map(([k, v]) => `${k}=${v}`),
  }));

describe('kafka batch memory', () => {
  it('copies shared blocks into the memory it lends: the same messages, none in a slab', () => {
    const blocks = [block(0, 5), block(5, 12)];
    const slabBatch = batchOf([inSlab(blocks[0]), blocks[1], inSlab(block(12, 14))]);
    const memory = new BatchMemory();
    const bytes = memory.take(sharedBytes(slabBatch.blocks));
    const messages = encodeMessages(slabBatch, 'events', bytes);
    const expected = encodeMessages(batchOf([...blocks, block(12, 14)]), 'events');
    expect(plainMessages(messages)).toEqual(plainMessages(expected));
    for (const m of messages) {
      expect((m.value as Buffer).buffer).not.toBeInstanceOf(SharedArrayBuffer);
      expect((m.key as Buffer).buffer).not.toBeInstanceOf(SharedArrayBuffer);
    }
    // The first and third blocks' values are views of the lent memory, the second's of its own.
    expect((messages[0].value as Buffer).buffer).toBe(bytes.buffer);
    expect((messages[12].value as Buffer).buffer).toBe(bytes.buffer);
    expect((messages[5].value as Buffer).buffer).toBe(blocks[1].text.buffer);
  });

  it('lends memory again only once it is given back, and none for blocks not in a slab', () => {
    const memory = new BatchMemory();
    expect(memory.take(sharedBytes([block(0, 3)]))).toHaveLength(0);
    const first = memory.take(1_000);
    const second = memory.take(1_000);
    expect(second.buffer).not.toBe(first.buffer);
    memory.give(first);
    expect(memory.take(500).buffer).toBe(first.buffer);
    expect(memory.take(500).buffer).not.toBe(first.buffer);
  });
});
