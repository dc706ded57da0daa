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
/** The state word, padded so the offset arrays after it stay 8-byte aligned. */
const HEADER = 8;
const MIN_SLAB = 2 ** 20;
const SLAB_STEP = 2 ** 18;

interface Slab {
  id: number;
  memory: SharedArrayBuffer;
  state: Int32Array;
}

const stateOf = (memory: SharedArrayBuffer) => new Int32Array(memory, 0, 1);

/** Bytes a block of `count` records needs in a slab. */
function slabBytes(count: number, textBytes: number, metaBytes: number): number {
  return HEADER + 4 * count * (1 + META) + textBytes + metaBytes;
}

/** A block's parts as views of its slab: offsets first (aligned), then text and metadata. */
export function slabParts(memory: SharedArrayBuffer, block: SlabBlock): BlockParts {
  const { count, textBytes, metaBytes } = block;
  const ends = new Uint32Array(memory, HEADER, count);
  const metaEnds = new Uint32Array(memory, HEADER + 4 * count, count * META);
  const textAt = HEADER + 4 * count * (1 + META);
  return {
    text: Buffer.from(memory, textAt, textBytes),
    ends,
    meta: Buffer.from(memory, textAt + textBytes, metaBytes),
    metaEnds,
  };
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
    const need = slabBytes(count, textBytes, metaBytes);
    const slab = this.freeSlab(need) ?? this.newSlab(need);
    if (slab === undefined) return undefined;
    Atomics.store(slab.state, 0, IN_USE);
    const block: SlabBlock = { slab: slab.id, count, textBytes, metaBytes };
    return { block, parts: slabParts(slab.memory, block) };
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
    const slab = { id, memory, state: stateOf(memory) };
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
