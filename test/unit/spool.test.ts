import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  decodeSpoolBatch,
  encodeSpoolBatch,
  openSpool,
  SpoolFullError,
} from '../../src/data-plane/pipeline/spool.ts';
import { type EventRecord, RecordBlock } from '../../src/data-plane/sinks/record-block.ts';
import type { Batch } from '../../src/data-plane/sinks/types.ts';

function batch(from: number, n: number): Batch {
  const records: EventRecord[] = [];
  for (let i = from; i < from + n; i++) {
    records.push({
      eventId: `ev_${i}`,
      eventType: 'http_request_complete.v0',
      accountId: 'ac_1',
      partitionKey: `host\t${i % 3}`,
      json: JSON.stringify({ event_id: `ev_${i}`, object: { note: 'tab\there, "quoted", é' } }),
    });
  }
  return RecordBlock.of(records);
}

describe('spool', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'spool-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('round-trips every record field through its encoding', () => {
    const b = batch(1, 5);
    expect(decodeSpoolBatch(encodeSpoolBatch(b)).records()).toEqual(b.records());
  });

  it('keeps the exact digits of large integers in JSON it has to re-serialize', () => {
    const json =
      '{"event_id":"ev_1",\n"object":{"bytes_in":9007199254740993,"n":-9223372036854775808}}';
    const b = RecordBlock.of([{ ...batch(1, 1).records()[0], json }]);
    const [record] = decodeSpoolBatch(encodeSpoolBatch(b)).records();
    expect(record.json).toBe(
      '{"event_id":"ev_1","object":{"bytes_in":9007199254740993,"n":-9223372036854775808}}',
    );
  });

  it('returns batches oldest first and forgets removed ones', async () => {
    const spool = await openSpool({ dir, maxBytes: 1 << 20 });
    const s1 = await spool.append(batch(1, 2));
    const s2 = await spool.append(batch(3, 2));
    expect(s2).toBeGreaterThan(s1);
    expect(spool.count).toBe(2);
    expect(spool.events).toBe(4);
    const head = await spool.peek();
    expect(head?.seq).toBe(s1);
    expect(head?.batch).toEqual(batch(1, 2));
    await spool.remove(s1);
    expect((await spool.peek())?.batch).toEqual(batch(3, 2));
    await spool.remove(s2);
    expect(await spool.peek()).toBeUndefined();
    expect(spool.bytes).toBe(0);
    expect(await readdir(dir)).toEqual([]);
  });

  it('survives a restart: same batches, same order, sequence resumes after the last', async () => {
    const first = await openSpool({ dir, maxBytes: 1 << 20 });
    await first.append(batch(1, 1));
    const s2 = await first.append(batch(2, 3));
    await first.remove((await first.peek())!.seq);
    // A tmp file is an append that crashed before returning: it must vanish, not replay.
    await writeFile(join(dir, '.tmp-99'), 'garbage');

    const reopened = await openSpool({ dir, maxBytes: 1 << 20 });
    expect(reopened.count).toBe(1);
    expect(reopened.events).toBe(3);
    expect(reopened.bytes).toBe(first.bytes);
    const head = await reopened.peek();
    expect(head?.seq).toBe(s2);
    expect(head?.batch).toEqual(batch(2, 3));
    const s3 = await reopened.append(batch(5, 1));
    expect(s3).toBe(s2 + 1);
    expect((await readdir(dir)).some((n) => n.startsWith('.tmp-'))).toBe(false);
  });

  it('throws SpoolFullError when an append would exceed maxBytes, and stores nothing', async () => {
    const size = encodeSpoolBatch(batch(1, 4)).length;
    const spool = await openSpool({ dir, maxBytes: size * 2 + 20 });
    await spool.append(batch(1, 4));
    await spool.append(batch(5, 4));
    await expect(spool.append(batch(9, 4))).rejects.toBeInstanceOf(SpoolFullError);
    expect(spool.count).toBe(2);
    expect((await readdir(dir)).length).toBe(2);
    await spool.remove((await spool.peek())!.seq);
    await spool.append(batch(9, 4));
    expect(spool.count).toBe(2);
  });

  it('keeps the bound under concurrent appends', async () => {
    const size = encodeSpoolBatch(batch(1, 1)).length;
    const spool = await openSpool({ dir, maxBytes: size * 3 });
    const results = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) => spool.append(batch(i, 1))),
    );
    expect(results.filter((r) => r.status === 'fulfilled').length).toBe(3);
    expect(spool.bytes).toBeLessThanOrEqual(size * 3);
  });
});
