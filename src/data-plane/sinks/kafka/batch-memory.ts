import { RecordBlock } from '../record-block.ts';

// The client keeps views of a batch's bytes until its request is written, which a timed-out send
// may outlive, so bytes lent by the workers' shared-memory slabs are copied first. A fresh
// buffer for every batch costs a page fault per 4 KiB (~0.4 µs a record in bench:kafka, more
// than encoding): the copies go into memory reused once a send has been acknowledged, when the
// client is done with it. A failed send's memory is never reused: its request may still be queued.

const KEEP = 4;
const NONE = Buffer.alloc(0);

/** Reusable memory for the bytes of the batches a sink has in flight. */
export class BatchMemory {
  private readonly free: Buffer[] = [];

  /** Memory for `bytes` bytes: a reused buffer if one is large enough. */
  take(bytes: number): Buffer {
    if (bytes === 0) return NONE;
    const i = this.free.findIndex((buffer) => buffer.length >= bytes);
    if (i >= 0) return this.free.splice(i, 1)[0];
    return Buffer.allocUnsafeSlow(Math.max(bytes, 64 * 1024));
  }

  /** Gives back memory whose send was acknowledged. */
  give(buffer: Buffer): void {
    if (buffer !== NONE && this.free.length < KEEP) this.free.push(buffer);
  }
}

/** Bytes `own` needs for the blocks that are in shared memory. */
export function sharedBytes(blocks: readonly RecordBlock[]): number {
  let bytes = 0;
  for (const block of blocks) {
    if (block.text.buffer instanceof SharedArrayBuffer)
      bytes += block.text.length + block.meta.length;
  }
  return bytes;
}

/**
 * The block with bytes the sink owns: a block in shared memory has its text and metadata copied
 * into `memory` from `at` (the offsets are read before the write returns: no copy); `end` says
 * where the next copy goes.
 */
export function own(
  block: RecordBlock,
  memory: Buffer,
  at: number,
): { block: RecordBlock; end: number } {
  if (!(block.text.buffer instanceof SharedArrayBuffer)) return { block, end: at };
  const text = memory.subarray(at, at + block.text.length);
  text.set(block.text);
  const meta = memory.subarray(at + text.length, at + text.length + block.meta.length);
  meta.set(block.meta);
  const copy = new RecordBlock({ text, ends: block.ends, meta, metaEnds: block.metaEnds });
  return { block: copy, end: at + text.length + meta.length };
}
