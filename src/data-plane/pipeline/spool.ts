import { mkdir, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fsyncDir } from '../../shared/files/fsync-dir.ts';
import { BlockWriter, type RecordBlock } from '../sinks/record-block.ts';
import type { Batch } from '../sinks/types.ts';

/** Where a destination keeps the batches its sink could not take yet, and how much of the disk it may use. */
export interface SpoolOptions {
  dir: string;
  maxBytes: number;
}

/** The oldest spooled batch and the sequence number that remove() needs. */
export interface SpooledBatch {
  seq: number;
  batch: Batch;
}

/** A durable FIFO of batches: what lets a destination acknowledge events while its sink is down. */
export interface Spool {
  /** Durably stores the batch (fsync'd file and directory) and returns its sequence number. */
  append(batch: Batch): Promise<number>;
  /** The oldest batch, or undefined when the spool is empty. */
  peek(): Promise<SpooledBatch | undefined>;
  /** Drops a batch once the sink has it. */
  remove(seq: number): Promise<void>;
  /** Batches stored. */
  readonly count: number;
  /** Records stored, over all batches. */
  readonly events: number;
  /** Bytes on disk (encoded), bounded by maxBytes. */
  readonly bytes: number;
}

/** append() would exceed the spool's byte bound: the caller must push back, never drop. */
export class SpoolFullError extends Error {
  constructor(dir: string, bytes: number, adding: number, maxBytes: number) {
    super(`spool ${dir} full: ${bytes} + ${adding} bytes exceeds ${maxBytes}`);
    this.name = 'SpoolFullError';
  }
}

interface Entry {
  seq: number;
  events: number;
  bytes: number;
}

// File name: <seq, 16 digits>-<record count>.batch, so the index is rebuilt from names alone on restart.
const FILE_RE = /^(\d{16})-(\d+)\.batch$/;
const TMP_PREFIX = '.tmp-';

function fileName(seq: number, events: number): string {
  return `${String(seq).padStart(16, '0')}-${events}.batch`;
}

/**
 * One line per record: a JSON array [eventId, eventType, accountId, partitionKey], a tab, then the
 * record's JSON verbatim (an envelope holds no raw newline; a tab in the metadata is escaped by
 * JSON.stringify, so the first tab always separates the two parts).
 */
export function encodeSpoolBatch(batch: Batch): Buffer {
  const heads: Buffer[][] = batch.blocks.map((block) =>
    Array.from({ length: block.count }, (_, i) =>
      Buffer.from(
        `${JSON.stringify([block.eventId(i), block.eventType(i), block.accountId(i), block.partitionKey(i)])}\t`,
      ),
    ),
  );
  let size = batch.bytes;
  for (const blockHeads of heads) for (const head of blockHeads) size += head.length;
  const out = Buffer.allocUnsafe(size);
  let pos = 0;
  batch.blocks.forEach((block, b) => {
    for (let i = 0; i < block.count; i++) {
      pos += heads[b][i].copy(out, pos);
      pos += block.text.copy(out, pos, block.start(i), block.ends[i]);
    }
  });
  return out;
}

/** Inverse of encodeSpoolBatch. */
export function decodeSpoolBatch(data: Buffer): RecordBlock {
  const writer = new BlockWriter(data.length);
  let pos = 0;
  while (pos < data.length) {
    let end = data.indexOf(0x0a, pos);
    if (end < 0) end = data.length;
    if (end > pos) {
      const tab = data.indexOf(0x09, pos);
      const [eventId, eventType, accountId, partitionKey] = JSON.parse(
        data.toString('utf8', pos, tab),
      );
      writer.bytes(data, tab + 1, end);
      writer.endRecord(eventId, eventType, accountId, partitionKey);
    }
    pos = end + 1;
  }
  return writer.finish();
}

/** Opens (or creates) the spool in dir: reads the existing files so a restart resumes where it stopped. */
export async function openSpool(options: SpoolOptions): Promise<Spool> {
  const { dir, maxBytes } = options;
  await mkdir(dir, { recursive: true });
  const entries: Entry[] = [];
  for (const name of await readdir(dir)) {
    // A tmp file is an append that never returned: its batch was not acknowledged.
    if (name.startsWith(TMP_PREFIX)) {
      await rm(join(dir, name), { force: true });
      continue;
    }
    const m = FILE_RE.exec(name);
    if (!m) continue;
    const { size } = await stat(join(dir, name));
    entries.push({ seq: Number(m[1]), events: Number(m[2]), bytes: size });
  }
  entries.sort((a, b) => a.seq - b.seq);
  let nextSeq = entries.length > 0 ? entries[entries.length - 1].seq + 1 : 1;
  let bytes = entries.reduce((n, e) => n + e.bytes, 0);
  let events = entries.reduce((n, e) => n + e.events, 0);

  return {
    async append(batch) {
      const data = encodeSpoolBatch(batch);
      if (bytes + data.length > maxBytes) {
        throw new SpoolFullError(dir, bytes, data.length, maxBytes);
      }
      // Reserve before the first await so concurrent appends cannot overshoot the bound together.
      const seq = nextSeq++;
      const entry: Entry = { seq, events: batch.count, bytes: data.length };
      bytes += entry.bytes;
      events += entry.events;
      const tmp = join(dir, `${TMP_PREFIX}${seq}`);
      try {
        const fh = await open(tmp, 'w');
        try {
          await fh.writeFile(data);
          await fh.sync();
        } finally {
          await fh.close();
        }
        await rename(tmp, join(dir, fileName(seq, entry.events)));
        await fsyncDir(dir);
      } catch (err) {
        bytes -= entry.bytes;
        events -= entry.events;
        await rm(tmp, { force: true }).catch(() => {});
        throw err;
      }
      // Keep the index sorted even if two appends finish out of order.
      let i = entries.length;
      while (i > 0 && entries[i - 1].seq > seq) i--;
      entries.splice(i, 0, entry);
      return seq;
    },
    async peek() {
      const head = entries[0];
      if (!head) return undefined;
      const data = await readFile(join(dir, fileName(head.seq, head.events)));
      return { seq: head.seq, batch: decodeSpoolBatch(data) };
    },
    async remove(seq) {
      const i = entries.findIndex((e) => e.seq === seq);
      if (i < 0) return;
      const [entry] = entries.splice(i, 1);
      bytes -= entry.bytes;
      events -= entry.events;
      // No directory fsync: if the unlink is lost in a crash the batch is replayed (at-least-once).
      await rm(join(dir, fileName(entry.seq, entry.events)), { force: true });
    },
    get count() {
      return entries.length;
    },
    get events() {
      return events;
    },
    get bytes() {
      return bytes;
    },
  };
}
