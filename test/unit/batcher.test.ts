import { describe, expect, it } from 'vitest';
import { BatcherFullError, createBatcher } from '../../src/data-plane/pipeline/batcher.ts';
import { type EventRecord, RecordBlock } from '../../src/data-plane/sinks/record-block.ts';
import type { Batch } from '../../src/data-plane/sinks/types.ts';

function rec(i: number, json = `{"n":${i}}`): EventRecord {
  return { eventId: `ev_${i}`, eventType: 't.v0', accountId: 'ac_1', partitionKey: 'h', json };
}

function ids(batch: Batch): string[] {
  return batch.records().map((r) => r.eventId);
}

describe('batcher', () => {
  it('flushes when a batch reaches maxEvents, without waiting for the timer', async () => {
    const flushed: Batch[] = [];
    const b = createBatcher({
      maxEvents: 3,
      maxBytes: 1 << 20,
      lingerMs: 60_000,
      flush: async (batch) => {
        flushed.push(batch);
      },
    });
    await b.add(RecordBlock.of([rec(1), rec(2), rec(3), rec(4), rec(5), rec(6)]));
    expect(flushed.map(ids)).toEqual([
      ['ev_1', 'ev_2', 'ev_3'],
      ['ev_4', 'ev_5', 'ev_6'],
    ]);
    await b.close();
  });

  it('flushes before a record would push the batch past maxBytes and reports bytes', async () => {
    const flushed: Batch[] = [];
    const b = createBatcher({
      maxEvents: 100,
      maxBytes: 20,
      lingerMs: 60_000,
      flush: async (batch) => {
        flushed.push(batch);
      },
    });
    // 10 bytes of NDJSON: 9 of JSON and the newline.
    const tenBytes = (i: number) => rec(i, '{"a":"1"}');
    const done = b.add(RecordBlock.of([tenBytes(1), tenBytes(2), tenBytes(3)]));
    await b.close();
    await done;
    expect(flushed.map(ids)).toEqual([['ev_1', 'ev_2'], ['ev_3']]);
    expect(flushed.map((f) => f.bytes)).toEqual([20, 10]);
  });

  it('waits the linger after a recent flush, and goes at the end of the turn when idle', async () => {
    const flushed: Batch[] = [];
    const b = createBatcher({
      maxEvents: 100,
      maxBytes: 1 << 20,
      lingerMs: 30,
      flush: async (batch) => {
        flushed.push(batch);
      },
    });
    // Idle since it was made: the first batch goes at the end of this turn, with what came in it.
    const first = [b.add(RecordBlock.of([rec(1)])), b.add(RecordBlock.of([rec(2)]))];
    await new Promise((resolve) => setImmediate(resolve));
    expect(flushed.map(ids)).toEqual([['ev_1', 'ev_2']]);
    await Promise.all(first);
    // A flush just ended: records are coming, so the next batch waits the linger for more.
    const started = performance.now();
    const next = [b.add(RecordBlock.of([rec(3)]))];
    await new Promise((resolve) => setTimeout(resolve, 10));
    next.push(b.add(RecordBlock.of([rec(4)])));
    await Promise.all(next);
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);
    expect(flushed.map(ids)).toEqual([
      ['ev_1', 'ev_2'],
      ['ev_3', 'ev_4'],
    ]);
    // Idle for longer than the linger: at the end of the turn again.
    await new Promise((resolve) => setTimeout(resolve, 40));
    const idle = b.add(RecordBlock.of([rec(5)]));
    await new Promise((resolve) => setImmediate(resolve));
    expect(flushed.map(ids).at(-1)).toEqual(['ev_5']);
    await idle;
    await b.close();
  });

  it('with a linger of 0, flushes at the end of the turn what arrived during it, as one batch', async () => {
    const flushed: Batch[] = [];
    const b = createBatcher({
      maxEvents: 100,
      maxBytes: 1 << 20,
      lingerMs: 0,
      flush: async (batch) => {
        flushed.push(batch);
      },
    });
    const sameTurn = [b.add(RecordBlock.of([rec(1)])), b.add(RecordBlock.of([rec(2)]))];
    expect(flushed).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(flushed.map(ids)).toEqual([['ev_1', 'ev_2']]);
    await Promise.all(sameTurn);
    await b.add(RecordBlock.of([rec(3)]));
    expect(flushed.map(ids)).toEqual([['ev_1', 'ev_2'], ['ev_3']]);
    await b.close();
  });

  it('runs one flush at a time, in arrival order', async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    const order: string[] = [];
    const b = createBatcher({
      maxEvents: 2,
      maxBytes: 1 << 20,
      lingerMs: 5,
      flush: async (batch) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        await new Promise((r) => setTimeout(r, 5));
        order.push(...ids(batch));
        inFlight--;
      },
    });
    const adds = [];
    for (let i = 0; i < 10; i++) adds.push(b.add(RecordBlock.of([rec(i)])));
    await Promise.all(adds);
    expect(maxInFlight).toBe(1);
    expect(order).toEqual(Array.from({ length: 10 }, (_, i) => `ev_${i}`));
    await b.close();
  });

  it('gathers what arrives during a flush into one batch that goes when the flush ends', async () => {
    const flushed: string[][] = [];
    let release: () => void = () => {};
    const b = createBatcher({
      maxEvents: 100,
      maxBytes: 1 << 20,
      lingerMs: 5,
      flush: async (batch) => {
        flushed.push(ids(batch));
        if (flushed.length === 1) await new Promise<void>((r) => (release = r));
      },
    });
    const first = b.add(RecordBlock.of([rec(0)]));
    while (flushed.length === 0) await new Promise((r) => setTimeout(r, 1));
    // Four adds, each past the linger of the one before, while the first flush is held.
    const later = [];
    for (let i = 1; i <= 4; i++) {
      later.push(b.add(RecordBlock.of([rec(i)])));
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(flushed).toEqual([['ev_0']]);
    release();
    await Promise.all([first, ...later]);
    expect(flushed).toEqual([['ev_0'], ['ev_1', 'ev_2', 'ev_3', 'ev_4']]);
    await b.close();
  });

  it('rejects the callers of a failed batch only, and keeps going', async () => {
    const b = createBatcher({
      maxEvents: 1,
      maxBytes: 1 << 20,
      lingerMs: 5,
      flush: async (batch) => {
        if (batch.records()[0].eventId === 'ev_2') throw new Error('boom');
      },
    });
    const results = await Promise.allSettled([
      b.add(RecordBlock.of([rec(1)])),
      b.add(RecordBlock.of([rec(2)])),
      b.add(RecordBlock.of([rec(3)])),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    await b.close();
  });

  it('resolves an add spanning several batches only when all of them flushed', async () => {
    const gates: Array<() => void> = [];
    const b = createBatcher({
      maxEvents: 1,
      maxBytes: 1 << 20,
      lingerMs: 5,
      flush: () => new Promise<void>((r) => gates.push(r)),
    });
    let settled = false;
    const done = b.add(RecordBlock.of([rec(1), rec(2)])).then(() => {
      settled = true;
    });
    await new Promise((r) => setTimeout(r, 10));
    gates.shift()?.();
    await new Promise((r) => setTimeout(r, 10));
    expect(settled).toBe(false);
    gates.shift()?.();
    await done;
    expect(settled).toBe(true);
    await b.close();
  });

  it('rejects an add whose first batch failed only once its later batches flushed too', async () => {
    // The caller reuses a block's bytes once its add settles: no batch may still hold them.
    const gates: Array<() => void> = [];
    let flushes = 0;
    const b = createBatcher({
      maxEvents: 1,
      maxBytes: 1 << 20,
      lingerMs: 5,
      flush: () =>
        flushes++ === 0
          ? Promise.reject(new Error('boom'))
          : new Promise<void>((r) => gates.push(r)),
    });
    let settled = false;
    const done = b.add(RecordBlock.of([rec(1), rec(2)])).finally(() => {
      settled = true;
    });
    done.catch(() => {});
    await new Promise((r) => setTimeout(r, 20));
    expect(flushes).toBe(2);
    expect(settled).toBe(false);
    gates.shift()?.();
    await expect(done).rejects.toThrow('boom');
    await b.close();
  });

  it('bounds pending bytes: rejects a whole add with BatcherFullError, accepts again after flush', async () => {
    let release: () => void = () => {};
    const b = createBatcher({
      maxEvents: 1,
      maxBytes: 100,
      lingerMs: 5,
      maxPendingBytes: 20,
      flush: () =>
        new Promise<void>((r) => {
          release = r;
        }),
    });
    const first = b.add(RecordBlock.of([rec(1, '{"x":"012345"}')])); // 15 bytes with its newline
    expect(b.pendingBytes).toBe(15);
    await expect(b.add(RecordBlock.of([rec(2, '{"x":"012345"}')]))).rejects.toBeInstanceOf(
      BatcherFullError,
    );
    expect(b.pendingBytes).toBe(15);
    await new Promise((r) => setTimeout(r, 5));
    release();
    await first;
    expect(b.pendingBytes).toBe(0);
    const second = b.add(RecordBlock.of([rec(3)]));
    await new Promise((r) => setTimeout(r, 10));
    release();
    await second;
    await b.close();
  });

  it('takes a call larger than maxPendingBytes in pieces as flushes free room, never holding more', async () => {
    const flushed: Batch[] = [];
    let held = 0;
    let release: () => void = () => {};
    const b = createBatcher({
      maxEvents: 100,
      maxBytes: 20,
      lingerMs: 5,
      maxPendingBytes: 20,
      flush: (batch) =>
        new Promise<void>((resolve) => {
          held = Math.max(held, b.pendingBytes);
          release = () => {
            release = () => {};
            flushed.push(batch);
            resolve();
          };
        }),
    });
    // 10 bytes of NDJSON: 9 of JSON and the newline.
    const tenBytes = (i: number) => rec(i, '{"a":"1"}');
    let settled = false;
    const big = b.add(RecordBlock.of([1, 2, 3, 4, 5].map(tenBytes))).then(() => {
      settled = true;
    });
    expect(b.pendingBytes).toBe(20);
    // While the oversized call is being taken, another caller is refused, not queued past the bound.
    await expect(b.add(RecordBlock.of([tenBytes(6)]))).rejects.toBeInstanceOf(BatcherFullError);
    while (!settled) {
      await new Promise((r) => setTimeout(r, 10));
      expect(b.pendingBytes).toBeLessThanOrEqual(20);
      release();
    }
    await big;
    expect(held).toBeLessThanOrEqual(20);
    expect(flushed.map(ids)).toEqual([['ev_1', 'ev_2'], ['ev_3', 'ev_4'], ['ev_5']]);
    expect(b.pendingBytes).toBe(0);
    await b.close();
  });

  it('close flushes what is left and refuses new records', async () => {
    const flushed: Batch[] = [];
    const b = createBatcher({
      maxEvents: 100,
      maxBytes: 1 << 20,
      lingerMs: 60_000,
      flush: async (batch) => {
        flushed.push(batch);
      },
    });
    const pending = b.add(RecordBlock.of([rec(1), rec(2)]));
    await b.close();
    await pending;
    expect(flushed.map(ids)).toEqual([['ev_1', 'ev_2']]);
    await expect(b.add(RecordBlock.of([rec(3)]))).rejects.toMatchObject({
      code: 'ERR_UNAVAILABLE',
    });
  });
});
