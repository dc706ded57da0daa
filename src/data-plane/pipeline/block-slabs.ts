import { Buffer } from 'node:buffer';
import { threadId } from 'node:worker_threads';
import { type BlockParts, META } from '../sinks/record-block.ts';

// A worker's record blocks cross to the ingest thread in slabs of shared memory that are used
// again, instead of fresh ArrayBuffers transferred with every result: each transferred buffer
// was a new backing store on the ingest thread, and those bytes (~3.7 KB per event in
// bench:pipeline) drove its garbage collections. A worker owns its slabs and writes a block into
// a free one; the ingest thread learns a slab once (the first result using it carries it), reads
// the block as views of it, and frees the slab when every destination is done with its records.
// A slab's first word says whether it is in use (Atomics: the two threads share it).

/** A block written into a slab: which slab, and the sizes its layout derives from. */
export interface SlabBlock {
  slab: number;
  count: number;
  textBytes: number;
  metaBytes: number;
}

const FREE = 0;
const IN_USE = 1;
/** The state word, padded to 8 bytes. */
const HEADER = 8;
const MIN_SLAB = 2 ** 20;
const SLAB_STEP = 2 ** 18;

interface Slab {
  id: number;
  memory: SharedArrayBuffer;
  state: Int32Array;
  /** The slab past its header, made once: a reserved slab's text view. */
  text: Buffer;
}

const stateOf = (memory: SharedArrayBuffer) => new Int32Array(memory, 0, 1);

/** Where a block's offsets start: past its text and metadata, 4-byte aligned. */
const offsetsAt = (textBytes: number, metaBytes: number) =>
  (HEADER + textBytes + metaBytes + 3) & ~3;

/** Bytes a block of `count` records needs in a slab. */
export function slabBytes(count: number, textBytes: number, metaBytes: number): number {
  return offsetsAt(textBytes, metaBytes) + 4 * count * (1 + META);
}

/**
 * A block's parts as views of its slab: the text first (so a worker can write it there before
 * it knows its size, see SlabPool.reserve), then the metadata, then the offsets (aligned).
 */
export function slabParts(memory: SharedArrayBuffer, block: SlabBlock): BlockParts {
  const { count, textBytes, metaBytes } = block;
  const endsAt = offsetsAt(textBytes, metaBytes);
  return {
    text: Buffer.from(memory, HEADER, textBytes),
    ends: new Uint32Array(memory, endsAt, count),
    meta: Buffer.from(memory, HEADER + textBytes, metaBytes),
    metaEnds: new Uint32Array(memory, endsAt + 4 * count, count * META),
  };
}

/** A slab a worker claimed to write a block of sizes not yet known into. */
export interface ReservedSlab {
  /** Where the block's text goes: the slab's bytes from the text's place to its end. */
  readonly text: Buffer;
  readonly slab: Slab;
}

/**
 * A worker's slabs. `take` finds a free slab large enough (or makes one while the worker's
 * slabs stay under `maxBytes`: MAX_INFLIGHT_BYTES, which bounds the blocks held at once);
 * undefined means the caller falls back to buffers of its own.
 */
export class SlabPool {
  private readonly slabs: Slab[] = [];
  private bytes = 0;
  /** Slabs made since the last `announce`: the next result tells the ingest thread of them. */
  private unannounced: [number, SharedArrayBuffer][] = [];
  private readonly maxBytes: number;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  /** Claims a slab for a block of these sizes, and returns its parts to write into. */
  take(count: number, textBytes: number, metaBytes: number) {
    const reserved = this.reserve(slabBytes(count, textBytes, metaBytes));
    return reserved === undefined ? undefined : this.commit(reserved, count, textBytes, metaBytes);
  }

  /**
   * Claims a free slab of at least `bytes` (or makes one, within the bound) to write a block's
   * text into directly, at `text`, before its size is known: `commit` once written, or
   * `release`. Undefined: no slab; the caller writes into buffers of its own.
   */
  reserve(bytes: number): ReservedSlab | undefined {
    const slab = this.freeSlab(bytes) ?? this.newSlab(bytes);
    if (slab === undefined) return undefined;
    Atomics.store(slab.state, 0, IN_USE);
    return { text: slab.text, slab };
  }

  /**
   * The block written into a reserved slab (its text already at `text`): its parts to copy the
   * rest into. Undefined when the block does not fit: the slab is released.
   */
  commit(reserved: ReservedSlab, count: number, textBytes: number, metaBytes: number) {
    const { slab } = reserved;
    if (slabBytes(count, textBytes, metaBytes) > slab.memory.byteLength) {
      this.release(reserved);
      return undefined;
    }
    const block: SlabBlock = { slab: slab.id, count, textBytes, metaBytes };
    return { block, parts: slabParts(slab.memory, block) };
  }

  /** Gives a reserved slab back unused. */
  release(reserved: ReservedSlab): void {
    Atomics.store(reserved.slab.state, 0, FREE);
  }

  /** The smallest free slab that holds `need` bytes. */
  private freeSlab(need: number): Slab | undefined {
    let best: Slab | undefined;
    for (const slab of this.slabs) {
      const size = slab.memory.byteLength;
      if (size < need || (best !== undefined && size >= best.memory.byteLength)) continue;
      if (Atomics.load(slab.state, 0) === FREE) best = slab;
    }
    return best;
  }

  // Room for a somewhat larger block next time (requests vary), so slabs stay few.
  private newSlab(need: number): Slab | undefined {
    const size = Math.max(MIN_SLAB, Math.ceil((need * 1.25) / SLAB_STEP) * SLAB_STEP);
    if (this.bytes + size > this.maxBytes) return undefined;
    // Ids unique in the process: a replaced worker's slabs never collide with another's.
    const id = threadId * 2 ** 16 + this.slabs.length;
    const memory = new SharedArrayBuffer(size);
    const slab = { id, memory, state: stateOf(memory), text: Buffer.from(memory, HEADER) };
    this.slabs.push(slab);
    this.bytes += size;
    this.unannounced.push([id, memory]);
    return slab;
  }

  /** The slabs the ingest thread does not know yet (each told once). */
  announce(): [number, SharedArrayBuffer][] | undefined {
    if (this.unannounced.length === 0) return undefined;
    const slabs = this.unannounced;
    this.unannounced = [];
    return slabs;
  }
}

/** The ingest thread's side: every slab the workers announced, by id. */
export class SlabRegistry {
  private readonly slabs = new Map<number, { memory: SharedArrayBuffer; state: Int32Array }>();

  /** Takes note of the slabs a result announces. */
  learn(slabs: readonly [number, SharedArrayBuffer][] | undefined): void {
    if (slabs === undefined) return;
    for (const [id, memory] of slabs) this.slabs.set(id, { memory, state: stateOf(memory) });
  }

  /** A slab block's parts, views of the slab (valid until `free`). */
  parts(block: SlabBlock): BlockParts {
    const slab = this.slabs.get(block.slab);
    if (slab === undefined) throw new Error(`record block in unknown slab ${block.slab}`);
    return slabParts(slab.memory, block);
  }

  /** Gives the slab back to its worker: nothing may read the block's views after this. */
  free(block: SlabBlock): void {
    const slab = this.slabs.get(block.slab);
    if (slab !== undefined) Atomics.store(slab.state, 0, FREE);
  }
}
