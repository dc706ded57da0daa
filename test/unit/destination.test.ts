import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createDestination } from '../../src/data-plane/pipeline/destination.ts';
import { openSpool, SpoolFullError } from '../../src/data-plane/pipeline/spool.ts';
import { type EventRecord, RecordBlock } from '../../src/data-plane/sinks/record-block.ts';
import type { Batch } from '../../src/data-plane/sinks/types.ts';
import { type Sink, SinkError } from '../../src/data-plane/sinks/types.ts';
import { AppError } from '../../src/shared/errors.ts';

type Mode = 'ok' | 'retriable' | 'permanent';

/** A sink of our own interface that fails on command: drives the state machine without a network. */
function commandSink() {
  const state = { mode: 'ok' as Mode, writes: 0, written: [] as string[], closed: false };
  const sink: Sink = {
    async write(batch: Batch) {
      state.writes++;
      await new Promise((r) => setTimeout(r, 1));
      if (state.mode === 'retriable') throw new SinkError('connection refused', true);
      if (state.mode === 'permanent') throw new SinkError('authentication failed', false);
      state.written.push(...batch.records().map((r) => r.eventId));
    },
    async close() {
      state.closed = true;
    },
  };
  return { sink, state };
}

function rec(i: number): EventRecord {
  return {
    eventId: `ev_${i}`,
    eventType: 'http_request_complete.v0',
    accountId: 'ac_1',
    partitionKey: 'host',
    json: `{"event_id":"ev_${i}"}`,
  };
}

function range(from: number, to: number): string[] {
  return Array.from({ length: to - from }, (_, i) => `ev_${from + i}`);
}

async function until(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

const logger = pino({ level: 'silent' });
const batcher = { maxEvents: 3, maxBytes: 1 << 20, lingerMs: 2 };

describe('destination', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dest-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function make(
    sink: Sink,
    opts: { parkRetryMs?: number; spoolBytes?: number; lingerMs?: number } = {},
  ) {
    const spool = await openSpool({ dir, maxBytes: opts.spoolBytes ?? 1 << 20 });
    const dest = createDestination({
      id: 'ed_test',
      sink,
      spool,
      batcher: { ...batcher, lingerMs: opts.lingerMs ?? batcher.lingerMs },
      logger,
      retry: { baseMs: 5, maxMs: 40 },
      parkRetryMs: opts.parkRetryMs ?? 50,
    });
    return { dest, spool };
  }

  it('writes directly while the sink is healthy', async () => {
    const { sink, state } = commandSink();
    const { dest } = await make(sink);
    expect(await dest.deliver(RecordBlock.of([rec(0), rec(1), rec(2), rec(3)]))).toEqual({
      written: true,
      reason: null,
    });
    expect(state.written).toEqual(range(0, 4));
    const h = dest.health();
    expect(h.status).toBe('ok');
    expect(h.last_success_at).not.toBeNull();
    expect(h.backlog).toEqual({ events: 0, bytes: 0 });
    await dest.close();
  });

  it('spools on a retriable error, acknowledges, replays in order and returns to ok', async () => {
    const { sink, state } = commandSink();
    const { dest, spool } = await make(sink);
    await dest.deliver(RecordBlock.of([rec(0), rec(1)]));
    state.mode = 'retriable';
    // Every one of these resolves although the sink is down: durable in the spool; the receipt
    // says the target did not take them, and why.
    for (let i = 2; i < 20; i += 2) {
      expect(await dest.deliver(RecordBlock.of([rec(i), rec(i + 1)]))).toEqual({
        written: false,
        reason: 'connection refused',
      });
    }
    const h = dest.health();
    expect(h.status).toBe('retrying');
    expect(h.last_error).toBe('connection refused');
    expect(h.backlog.events).toBe(18);
    expect(h.backlog.bytes).toBe(spool.bytes);
    state.mode = 'ok';
    const more = dest.deliver(RecordBlock.of([rec(20), rec(21)]));
    await until(() => dest.health().status === 'ok');
    await more;
    await dest.deliver(RecordBlock.of([rec(22)]));
    expect(state.written).toEqual(range(0, 23));
    expect(dest.health().backlog).toEqual({ events: 0, bytes: 0 });
    await dest.close();
  });

  it('keeps arrival order across many concurrent delivers and a flapping sink', async () => {
    const { sink, state } = commandSink();
    const { dest } = await make(sink);
    const calls: Promise<unknown>[] = [];
    for (let i = 0; i < 200; i++) {
      if (i === 50) state.mode = 'retriable';
      if (i === 120) state.mode = 'ok';
      if (i === 150) state.mode = 'retriable';
      calls.push(dest.deliver(RecordBlock.of([rec(i)])));
      if (i % 10 === 0) await new Promise((r) => setTimeout(r, 3));
    }
    await Promise.all(calls);
    state.mode = 'ok';
    await until(() => dest.health().status === 'ok' && dest.health().backlog.events === 0);
    expect(state.written).toEqual(range(0, 200));
    await dest.close();
  });

  it('parks on a permanent error and retries on the slow schedule only', async () => {
    const { sink, state } = commandSink();
    const { dest } = await make(sink, { parkRetryMs: 300 });
    state.mode = 'permanent';
    await dest.deliver(RecordBlock.of([rec(0)]));
    await dest.deliver(RecordBlock.of([rec(1)]));
    await new Promise((r) => setTimeout(r, 200));
    expect(dest.health().status).toBe('parked');
    expect(dest.health().last_error).toBe('authentication failed');
    // One direct write and one replay attempt; new batches went to the spool without a write.
    expect(state.writes).toBe(2);
    await new Promise((r) => setTimeout(r, 300));
    expect(state.writes).toBe(3);
    state.mode = 'ok';
    await until(() => dest.health().status === 'ok');
    expect(state.written).toEqual(range(0, 2));
    await dest.close();
  });

  it('refuses with ERR_BACKPRESSURE when the spool is full; acknowledged records survive', async () => {
    const { sink, state } = commandSink();
    const { dest } = await make(sink, { spoolBytes: 200 });
    state.mode = 'retriable';
    const results = [];
    for (let i = 0; i < 10; i++) {
      results.push(
        await dest.deliver(RecordBlock.of([rec(i)])).then(
          () => 'ok',
          (e) => e,
        ),
      );
    }
    const acked = results.filter((r) => r === 'ok').length;
    expect(acked).toBeGreaterThan(0);
    expect(acked).toBeLessThan(10);
    for (const refused of results.slice(acked)) {
      expect(refused).toBeInstanceOf(AppError);
      expect(refused.code).toBe('ERR_BACKPRESSURE');
      expect(refused.cause).toBeInstanceOf(SpoolFullError);
    }
    state.mode = 'ok';
    await until(() => dest.health().status === 'ok');
    expect(state.written).toEqual(range(0, acked));
    await dest.close();
  });

  it('close flushes the open batch to the sink, closes it and refuses new records', async () => {
    const { sink, state } = commandSink();
    const { dest } = await make(sink, { lingerMs: 60_000 });
    const pending = dest.deliver(RecordBlock.of([rec(0)]));
    await dest.close();
    await pending;
    expect(state.written).toEqual(['ev_0']);
    expect(state.closed).toBe(true);
    const refused = await dest.deliver(RecordBlock.of([rec(1)])).catch((e) => e);
    expect(refused).toMatchObject({ code: 'ERR_UNAVAILABLE', message: /ed_test is closed/ });
  });

  it('after a restart replays the spool first, then new records, in order', async () => {
    const first = commandSink();
    first.state.mode = 'retriable';
    const a = await make(first.sink, { lingerMs: 60_000 });
    await a.dest.deliver(RecordBlock.of([rec(0), rec(1), rec(2)]));
    const last = a.dest.deliver(RecordBlock.of([rec(3)]));
    await a.dest.close(); // the open batch goes to the spool: the sink is down
    await last;
    expect(a.spool.events).toBe(4);

    const second = commandSink();
    const b = await make(second.sink);
    expect(b.dest.health().status).toBe('retrying');
    await b.dest.deliver(RecordBlock.of([rec(4)]));
    await until(() => b.dest.health().status === 'ok');
    expect(second.state.written).toEqual(range(0, 5));
    await b.dest.close();
  });
});
