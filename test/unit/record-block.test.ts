import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  BlockWriter,
  batchOf,
  type EventRecord,
  META_FIELD,
  type MetaField,
  RecordBlock,
} from '../../src/data-plane/sinks/record-block.ts';

const text = fc.string({ unit: 'binary', maxLength: 40 });
const recordArb: fc.Arbitrary<EventRecord> = fc.record({
  eventId: text,
  eventType: text,
  accountId: text,
  partitionKey: text,
  json: fc.jsonValue().map((v) => JSON.stringify({ v })),
});

describe('RecordBlock', () => {
  it('gives back every record as written, as NDJSON text and as objects', () => {
    fc.assert(
      fc.property(fc.array(recordArb, { maxLength: 30 }), (records) => {
        const block = RecordBlock.of(records);
        expect(block.count).toBe(records.length);
        expect(block.records()).toEqual(records);
        expect(block.text.toString()).toBe(records.map((r) => `${r.json}\n`).join(''));
        expect(block.bytes).toBe(Buffer.byteLength(block.text.toString()));
      }),
    );
  });

  it('gives each metadata value as bytes that are a view of the block', () => {
    fc.assert(
      fc.property(fc.array(recordArb, { minLength: 1, maxLength: 20 }), (records) => {
        const block = RecordBlock.of(records);
        records.forEach((r, i) => {
          const bytes = (field: MetaField) => block.metaBytes(i, field);
          expect(bytes(META_FIELD.eventId)).toEqual(Buffer.from(r.eventId));
          expect(bytes(META_FIELD.eventType)).toEqual(Buffer.from(r.eventType));
          expect(bytes(META_FIELD.accountId)).toEqual(Buffer.from(r.accountId));
          expect(bytes(META_FIELD.partitionKey)).toEqual(Buffer.from(r.partitionKey));
          expect(bytes(META_FIELD.partitionKey).buffer).toBe(block.meta.buffer);
        });
      }),
    );
  });

  it('slices, and batches the slices, without losing or reordering a record', () => {
    fc.assert(
      fc.property(fc.array(recordArb, { maxLength: 30 }), fc.nat(), fc.nat(), (records, a, b) => {
        const block = RecordBlock.of(records);
        const cut1 = a % (records.length + 1);
        const cut2 = cut1 + (b % (records.length - cut1 + 1));
        const pieces = [block.slice(0, cut1), block.slice(cut1, cut2), block.slice(cut2)];
        expect(pieces.map((p) => p.count)).toEqual([cut1, cut2 - cut1, records.length - cut2]);
        expect(pieces[1].records()).toEqual(records.slice(cut1, cut2));
        const joined = batchOf(pieces);
        expect(joined.count).toBe(records.length);
        expect(joined.bytes).toBe(block.bytes);
        expect(joined.records()).toEqual(records);
        expect(Buffer.concat(joined.blocks.map((b) => b.text)).equals(block.text)).toBe(true);
      }),
    );
  });

  it('copies a record between writers byte for byte, metadata included', () => {
    const first = new BlockWriter(8, 1);
    const second = new BlockWriter(8, 1);
    first.string('{"a":1}');
    first.endRecord('ev_1', 't.v0', 'ac_é', 'host\n1');
    first.string('{"b":"ü"}');
    first.endRecord('ev_2', 't.v0', 'ac_1', '');
    second.copyRecord(first, 1);
    second.copyRecord(first, 0);
    expect(first.recordText(1)).toBe('{"b":"ü"}');
    expect(second.finish().records()).toEqual([
      {
        eventId: 'ev_2',
        eventType: 't.v0',
        accountId: 'ac_1',
        partitionKey: '',
        json: '{"b":"ü"}',
      },
      {
        eventId: 'ev_1',
        eventType: 't.v0',
        accountId: 'ac_é',
        partitionKey: 'host\n1',
        json: '{"a":1}',
      },
    ]);
  });

  it('crosses a thread boundary as its parts, the buffers moved, not copied', () => {
    const block = RecordBlock.of([
      { eventId: 'e', eventType: 't', accountId: 'a', partitionKey: 'k', json: '{}' },
    ]);
    const parts = block.parts();
    const moved = structuredClone(parts, {
      transfer: [parts.text, parts.ends, parts.meta, parts.metaEnds].map(
        (part) => part.buffer as ArrayBuffer,
      ),
    });
    expect(parts.text.byteLength).toBe(0);
    expect(new RecordBlock(moved).records()).toEqual([
      { eventId: 'e', eventType: 't', accountId: 'a', partitionKey: 'k', json: '{}' },
    ]);
  });

  it('puts a pretty-printed record on one line, its large integers exact', () => {
    const json = '{"event_id":"ev_1",\n"object":{"bytes_in":9007199254740993}}';
    const block = RecordBlock.of([
      { eventId: 'ev_1', eventType: 't', accountId: 'a', partitionKey: 'k', json },
    ]);
    expect(block.json(0)).toBe('{"event_id":"ev_1","object":{"bytes_in":9007199254740993}}');
    expect(block.text.toString()).toBe(`${block.json(0)}\n`);
  });

  it('writes text into a given buffer while it fits, then moves it to its own', () => {
    const into = Buffer.alloc(64);
    const writer = new BlockWriter(16);
    writer.writeInto(into);
    writer.string('{"a":1}');
    writer.endRecord('ev_1', 't.v0', 'ac_a', '');
    expect(writer.writesInto(into)).toBe(true);
    expect(into.toString('utf8', 0, 8)).toBe('{"a":1}\n');
    writer.string(`{"b":"${'x'.repeat(100)}"}`);
    writer.endRecord('ev_2', 't.v0', 'ac_a', '');
    expect(writer.writesInto(into)).toBe(false);
    const block = writer.copyOut();
    expect(block.json(0)).toBe('{"a":1}');
    expect(block.json(1)).toBe(`{"b":"${'x'.repeat(100)}"}`);
    expect(block.eventId(1)).toBe('ev_2');
    // Emptied, the writer writes into its own buffer again.
    writer.string('{}');
    writer.endRecord('ev_3', 't.v0', 'ac_a', '');
    expect(writer.writesInto(into)).toBe(false);
    expect(writer.copyOut().json(0)).toBe('{}');
  });
});
