import type { Batch } from '../../pipeline/types.ts';

/** One batch as NDJSON: each record's envelope JSON verbatim, one per line, newline-terminated. */
export function encodeNdjson(batch: Batch): Buffer {
  let out = '';
  for (const r of batch.records) out += `${r.json}\n`;
  return Buffer.from(out);
}
