import { Buffer } from 'node:buffer';
import { parseExact } from '../wire-json/int64-json.ts';

// Records travel from the route-events workers to the sinks as blocks of bytes, never as one
// object per record: a block is the records' envelopes as NDJSON (what a file destination writes
// verbatim) and, beside it, each record's metadata as UTF-8. A worker fills one block per
// destination and hands its buffers to the ingest thread by transfer (no copy, no per-record
// clone to collect); a batch is the blocks as they came (never copied into one), which spools and
// sinks read block by block.

/** One event ready for delivery, as code that is not on the hot path builds and reads it. */
export interface EventRecord {
  eventId: string;
  eventType: string;
  accountId: string;
  /** Keeps one host's events together (Kafka partition key). */
  partitionKey: string;
  /** The envelope as one JSON document, no newline. */
  json: string;
}

/** A block's buffers as they cross a thread boundary (structured clone keeps typed arrays). */
export interface BlockParts {
  /** The envelopes, each followed by '\n'. */
  text: Uint8Array;
  /** Per record, the offset in `text` just past its '\n'. */
  ends: Uint32Array;
  /** Per record: event id, event type, account id and partition key, UTF-8, back to back. */
  meta: Uint8Array;
  /** Per record, four offsets in `meta`: the end of each of its four values. */
  metaEnds: Uint32Array;
}

/**
 * What a sink receives: one destination's records in arrival order, as the blocks they came in
 * (a block alone is a batch of one block).
 */
export interface Batch {
  readonly count: number;
  /** Bytes of NDJSON text, newlines included. */
  readonly bytes: number;
  readonly blocks: readonly RecordBlock[];
  /** Every record as an object (for code off the hot path, and tests). */
  records(): EventRecord[];
}

/** How many metadata values a record has (event id, event type, account id, partition key). */
export const META = 4;

/** A record's metadata values, by their place in the block. */
export const META_FIELD = { eventId: 0, eventType: 1, accountId: 2, partitionKey: 3 } as const;
export type MetaField = (typeof META_FIELD)[keyof typeof META_FIELD];
const NEWLINE = 0x0a;

const asBuffer = (u: Uint8Array): Buffer =>
  Buffer.isBuffer(u) ? u : Buffer.from(u.buffer, u.byteOffset, u.byteLength);

/** Records of one destination, in order: NDJSON text and per-record metadata. Immutable. */
export class RecordBlock implements Batch {
  /** The envelopes as NDJSON, each line newline-terminated. */
  readonly text: Buffer;
  readonly ends: Uint32Array;
  readonly meta: Buffer;
  readonly metaEnds: Uint32Array;

  constructor(parts: BlockParts) {
    if (parts.metaEnds.length !== parts.ends.length * META) {
      throw new RangeError('record block: metaEnds must hold four offsets per record');
    }
    this.text = asBuffer(parts.text);
    this.ends = parts.ends;
    this.meta = asBuffer(parts.meta);
    this.metaEnds = parts.metaEnds;
  }

  /** Records in the block. */
  get count(): number {
    return this.ends.length;
  }

  /** Bytes of NDJSON text (the envelopes and their newlines). */
  get bytes(): number {
    return this.text.length;
  }

  /** The block as a batch's blocks. */
  get blocks(): readonly RecordBlock[] {
    return [this];
  }

  /** Where record i's envelope starts in `text`. */
  start(i: number): number {
    return i === 0 ? 0 : this.ends[i - 1];
  }

  /** Record i's envelope as bytes (a view, no newline). */
  jsonBytes(i: number): Buffer {
    return this.text.subarray(this.start(i), this.ends[i] - 1);
  }

  /** Record i's envelope as text. */
  json(i: number): string {
    return this.text.toString('utf8', this.start(i), this.ends[i] - 1);
  }

  private metaValue(i: number, k: number): string {
    const at = i * META + k;
    const from = at === 0 ? 0 : this.metaEnds[at - 1];
    return this.meta.toString('utf8', from, this.metaEnds[at]);
  }

  /** Metadata value k of record i as UTF-8 bytes: a view of the block, not a copy. */
  metaBytes(i: number, k: MetaField): Buffer {
    const at = i * META + k;
    const from = at === 0 ? 0 : this.metaEnds[at - 1];
    return this.meta.subarray(from, this.metaEnds[at]);
  }

  eventId(i: number): string {
    return this.metaValue(i, 0);
  }

  eventType(i: number): string {
    return this.metaValue(i, 1);
  }

  accountId(i: number): string {
    return this.metaValue(i, 2);
  }

  partitionKey(i: number): string {
    return this.metaValue(i, 3);
  }

  /** Record i as an object (for code off the hot path, and tests). */
  record(i: number): EventRecord {
    return {
      eventId: this.eventId(i),
      eventType: this.eventType(i),
      accountId: this.accountId(i),
      partitionKey: this.partitionKey(i),
      json: this.json(i),
    };
  }

  /** Every record as an object (for code off the hot path, and tests). */
  records(): EventRecord[] {
    return Array.from({ length: this.count }, (_, i) => this.record(i));
  }

  /** The buffers, to hand to another thread. */
  parts(): BlockParts {
    return { text: this.text, ends: this.ends, meta: this.meta, metaEnds: this.metaEnds };
  }

  /**
   * The block with bytes of its own: a copy when its bytes are views of a slab the ingest
   * thread gives back to a worker once delivery settles (pipeline/block-slabs.ts), for a sink
   * whose client might still read them after its write() settled.
   */
  detached(): RecordBlock {
    if (!(this.text.buffer instanceof SharedArrayBuffer)) return this;
    return new RecordBlock({
      text: Buffer.from(this.text),
      ends: this.ends.slice(),
      meta: Buffer.from(this.meta),
      metaEnds: this.metaEnds.slice(),
    });
  }

  /** Records [from, to) as a block of their own: views of the same bytes, offsets rebased. */
  slice(from: number, to: number = this.count): RecordBlock {
    if (from === 0 && to === this.count) return this;
    const textStart = this.start(from);
    const textEnd = to === 0 ? 0 : this.ends[to - 1];
    const metaStart = from === 0 ? 0 : this.metaEnds[from * META - 1];
    const metaEnd = to === 0 ? 0 : this.metaEnds[to * META - 1];
    return new RecordBlock({
      text: this.text.subarray(textStart, Math.max(textStart, textEnd)),
      ends: rebased(this.ends.subarray(from, to), textStart),
      meta: this.meta.subarray(metaStart, Math.max(metaStart, metaEnd)),
      metaEnds: rebased(this.metaEnds.subarray(from * META, to * META), metaStart),
    });
  }

  /**
   * A block of records given as objects (audit events, test events, tests). A record's JSON with
   * a raw newline (pretty-printed) is rewritten on one line: a record is one line of NDJSON.
   */
  static of(records: readonly EventRecord[]): RecordBlock {
    const writer = new BlockWriter(records.reduce((n, r) => n + r.json.length + 1, 0));
    for (const r of records) {
      writer.string(r.json.includes('\n') ? JSON.stringify(parseExact(r.json)) : r.json);
      writer.endRecord(r.eventId, r.eventType, r.accountId, r.partitionKey);
    }
    return writer.finish();
  }
}

/** Blocks as one batch, without copying them. */
export function batchOf(blocks: readonly RecordBlock[]): Batch {
  if (blocks.length === 1) return blocks[0];
  let count = 0;
  let bytes = 0;
  for (const block of blocks) {
    count += block.count;
    bytes += block.bytes;
  }
  return { count, bytes, blocks, records: () => blocks.flatMap((block) => block.records()) };
}

function rebased(offsets: Uint32Array, base: number): Uint32Array {
  const out = new Uint32Array(offsets.length);
  for (let i = 0; i < offsets.length; i++) out[i] = offsets[i] - base;
  return out;
}

/**
 * Builds a block record by record: the envelope's bytes are written into growing buffers (by the
 * caller through `string`, `bytes`, `ensure`/`buf`, or copied from another writer's record),
 * then `endRecord` adds the newline and the metadata.
 */
export class BlockWriter {
  /** The text buffer; valid up to `pos`. Call `ensure` before writing into it directly. */
  buf: Buffer;
  pos = 0;
  private ends: Uint32Array;
  private count = 0;
  private meta: Buffer;
  private metaPos = 0;
  private metaEnds: Uint32Array;
  /** The writer's own text buffer while `buf` is another's (`writeInto`). */
  private own: Buffer | undefined;

  // allocUnsafeSlow: never a slice of Node's shared pool, whose ArrayBuffer must not be
  // transferred to another thread with the block.
  constructor(textBytes = 64 * 1024, records = 64) {
    this.buf = Buffer.allocUnsafeSlow(Math.max(64, textBytes));
    this.ends = new Uint32Array(Math.max(1, records));
    this.meta = Buffer.allocUnsafeSlow(Math.max(64, records * 48));
    this.metaEnds = new Uint32Array(this.ends.length * META);
  }

  /** Room for `n` more bytes of text at `pos`. */
  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const own = this.own;
    this.own = undefined;
    const next =
      own !== undefined && own.length >= this.pos + n
        ? own
        : Buffer.allocUnsafeSlow(Math.max((own ?? this.buf).length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  /**
   * Writes the next block's text into `into` (a reserved slab, say: no copy of the text at the
   * end) for as long as it fits; past that, into the writer's own buffer. The writer is empty.
   */
  writeInto(into: Buffer): void {
    this.own ??= this.buf;
    this.buf = into;
  }

  /** Whether the text written so far is all in `into` (given to `writeInto`). */
  writesInto(into: Buffer): boolean {
    return this.buf === into;
  }

  /** Bytes this writer's buffers hold (what keeping it for reuse costs). */
  get capacity(): number {
    return (this.own ?? this.buf).length + this.meta.length + this.ends.length * (1 + META) * 4;
  }

  /** Records written so far. */
  get records(): number {
    return this.count;
  }

  /** Where record i's envelope starts in `buf`. */
  private start(i: number): number {
    return i === 0 ? 0 : this.ends[i - 1];
  }

  /** Record i's envelope as text (for a tap). */
  recordText(i: number): string {
    return this.buf.toString('utf8', this.start(i), this.ends[i] - 1);
  }

  /** Appends text (UTF-8). */
  string(s: string): void {
    this.ensure(s.length * 3);
    this.pos += this.buf.write(s, this.pos);
  }

  /** Appends bytes [from, to) of `src`. */
  bytes(src: Uint8Array, from: number, to: number): void {
    const n = to - from;
    this.ensure(n);
    if (n < 32) {
      const buf = this.buf;
      let p = this.pos;
      for (let i = from; i < to; i++) buf[p++] = src[i];
    } else if (src instanceof Buffer) {
      // Buffer's copy does not make a view of the source first, as set(subarray) must.
      src.copy(this.buf, this.pos, from, to);
    } else {
      this.buf.set(src.subarray(from, to), this.pos);
    }
    this.pos += n;
  }

  /** Ends the record whose envelope was written last: its newline, and its metadata. */
  endRecord(eventId: string, eventType: string, accountId: string, partitionKey: string): void {
    scratchMeta.set(eventId, eventType, accountId, partitionKey);
    this.endRecordMeta(scratchMeta);
  }

  /** endRecord with the metadata already encoded (once per event, for all of its records). */
  endRecordMeta(meta: RecordMeta): void {
    this.ensure(1);
    this.buf[this.pos++] = NEWLINE;
    this.pushEnd();
    this.ensureMeta(meta.length);
    meta.bytes.copy(this.meta, this.metaPos, 0, meta.length);
    const at = (this.count - 1) * META;
    for (let k = 0; k < META; k++) this.metaEnds[at + k] = this.metaPos + meta.ends[k];
    this.metaPos += meta.length;
  }

  /**
   * Appends record i of `from` (another writer, finished or not): its envelope and metadata
   * copied byte for byte. What a record shared by several destinations costs the second one.
   */
  copyRecord(from: BlockWriter, i: number): void {
    this.bytes(from.buf, from.start(i), from.ends[i]);
    this.pushEnd();
    const at = i * META;
    const metaStart = at === 0 ? 0 : from.metaEnds[at - 1];
    const metaEnd = from.metaEnds[at + META - 1];
    this.ensureMeta(metaEnd - metaStart);
    from.meta.copy(this.meta, this.metaPos, metaStart, metaEnd);
    const base = (this.count - 1) * META;
    for (let k = 0; k < META; k++) {
      this.metaEnds[base + k] = from.metaEnds[at + k] - metaStart + this.metaPos;
    }
    this.metaPos += metaEnd - metaStart;
  }

  /** The block written: views of this writer's buffers (the writer must not be used after). */
  finish(): RecordBlock {
    return new RecordBlock({
      text: this.buf.subarray(0, this.pos),
      ends: this.ends.subarray(0, this.count),
      meta: this.meta.subarray(0, this.metaPos),
      metaEnds: this.metaEnds.subarray(0, this.count * META),
    });
  }

  /**
   * The block written, copied into buffers of its exact size that belong to it alone (to be
   * transferred to another thread), and the writer emptied for the next block. A writer kept
   * for reuse costs one copy per block; fresh, growing buffers for each block cost far more
   * (page faults and garbage collections triggered by external memory, measured in a worker).
   */
  copyOut(): RecordBlock {
    const parts: BlockParts = {
      text: Buffer.allocUnsafeSlow(this.pos),
      ends: new Uint32Array(this.count),
      meta: Buffer.allocUnsafeSlow(this.metaPos),
      metaEnds: new Uint32Array(this.count * META),
    };
    this.copyTo(parts);
    return new RecordBlock(parts);
  }

  /** The sizes of the block written: what `copyTo` needs room for. */
  get sizes(): { count: number; textBytes: number; metaBytes: number } {
    return { count: this.count, textBytes: this.pos, metaBytes: this.metaPos };
  }

  /**
   * Copies the block written into `parts` (each exactly the size `sizes` gives: a slab's views,
   * say) and empties the writer for the next block.
   */
  copyTo(parts: BlockParts): void {
    // Text written in place (writeInto) is already there.
    if (parts.text.buffer !== this.buf.buffer || parts.text.byteOffset !== this.buf.byteOffset) {
      parts.text.set(this.buf.subarray(0, this.pos));
    }
    parts.ends.set(this.ends.subarray(0, this.count));
    parts.meta.set(this.meta.subarray(0, this.metaPos));
    parts.metaEnds.set(this.metaEnds.subarray(0, this.count * META));
    if (this.own !== undefined) {
      this.buf = this.own;
      this.own = undefined;
    }
    this.pos = 0;
    this.count = 0;
    this.metaPos = 0;
  }

  private pushEnd(): void {
    if (this.count === this.ends.length) {
      const ends = new Uint32Array(this.ends.length * 2);
      ends.set(this.ends);
      this.ends = ends;
      const metaEnds = new Uint32Array(ends.length * META);
      metaEnds.set(this.metaEnds);
      this.metaEnds = metaEnds;
    }
    this.ends[this.count++] = this.pos;
  }

  private ensureMeta(n: number): void {
    if (this.metaPos + n <= this.meta.length) return;
    const next = Buffer.allocUnsafeSlow(Math.max(this.meta.length * 2, this.metaPos + n));
    this.meta.copy(next, 0, 0, this.metaPos);
    this.meta = next;
  }
}

/** A record's metadata encoded as a block holds it: four UTF-8 values and where each ends. */
export class RecordMeta {
  bytes = Buffer.allocUnsafeSlow(256);
  length = 0;
  readonly ends = new Uint32Array(META);

  set(eventId: string, eventType: string, accountId: string, partitionKey: string): void {
    const room = 3 * (eventId.length + eventType.length + accountId.length + partitionKey.length);
    if (room > this.bytes.length) this.bytes = Buffer.allocUnsafeSlow(room);
    let p = writeShort(this.bytes, eventId, 0);
    this.ends[0] = p;
    p = writeShort(this.bytes, eventType, p);
    this.ends[1] = p;
    p = writeShort(this.bytes, accountId, p);
    this.ends[2] = p;
    p = writeShort(this.bytes, partitionKey, p);
    this.ends[3] = p;
    this.length = p;
  }
}

/**
 * Writes `s` as UTF-8 at `at`, returning where it ends. Metadata values are short and mostly
 * ASCII: a loop writes them for less than a call into Buffer's native write costs.
 */
function writeShort(buf: Buffer, s: string, at: number): number {
  const n = s.length;
  if (n > 64) return at + buf.write(s, at);
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) return at + buf.write(s, at);
    buf[at + i] = c;
  }
  return at + n;
}

const scratchMeta = new RecordMeta();
