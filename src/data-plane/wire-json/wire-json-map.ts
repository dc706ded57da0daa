import { StringListSchema } from '../../gen/agent_ingress/events/v0/traffic_pb.ts';
import { checkUtf8 } from './json-bytes.ts';
import {
  type Cursor,
  overrun,
  RECURSION_LIMIT,
  skip,
  tag,
  tooDeep,
  varint32,
} from './wire-reader.ts';
import {
  ENTRY_INFO,
  ENTRY_KEY,
  ENTRY_VALUE,
  STRING_LIST_INFO,
  STRING_LIST_VALUES_TAG,
} from './wire-struct.ts';

// The map<string, StringList> entries (header maps) of wire-json.ts: where an entry's key and
// values lie in the wire bytes, read with the bounds and checks of wire-struct.ts's decoder.

// [key start, key end (-1 -1: no key), value count, then each value's start and end].
let entry = new Int32Array(64);

function push(at: number, start: number, end: number): void {
  if (at + 2 > entry.length) {
    const next = new Int32Array(entry.length * 2);
    next.set(entry);
    entry = next;
  }
  entry[at] = start;
  entry[at + 1] = end;
}

/**
 * Reads one map entry, bytes[pos, end): the last key wins (an earlier one is still checked to
 * be UTF-8, as the decoder reads every string), the values of every value field in order. The
 * answer is reused by the next call.
 */
export function readMapEntry(
  c: Cursor,
  buf: Uint8Array,
  pos: number,
  end: number,
  depth: number,
): Int32Array {
  entry[0] = -1;
  entry[1] = -1;
  let values = 0;
  while (pos < end) {
    let t = buf[pos];
    if (t < 0x80) pos++;
    else {
      t = tag(c, buf, pos, end);
      pos = c.pos;
    }
    if (t !== ENTRY_KEY && t !== ENTRY_VALUE) {
      pos = skip(c, buf, pos, end, t, depth, ENTRY_INFO);
      continue;
    }
    let n = buf[pos];
    if (n < 0x80 && pos < end) pos++;
    else {
      n = varint32(c, buf, pos, end);
      pos = c.pos;
    }
    if (n > end - pos) overrun(n, pos, end);
    if (t === ENTRY_KEY) {
      if (entry[0] >= 0) checkUtf8(buf, entry[0], entry[1]);
      entry[0] = pos;
      entry[1] = pos + n;
    } else {
      values = readValues(c, buf, pos, pos + n, depth + 1, values);
    }
    pos += n;
  }
  entry[2] = values;
  return entry;
}

// A StringList's values, appended after the `count` already read.
function readValues(
  c: Cursor,
  buf: Uint8Array,
  pos: number,
  end: number,
  depth: number,
  count: number,
): number {
  if (depth > RECURSION_LIMIT) tooDeep(StringListSchema.typeName);
  while (pos < end) {
    let t = buf[pos];
    if (t < 0x80) pos++;
    else {
      t = tag(c, buf, pos, end);
      pos = c.pos;
    }
    if (t !== STRING_LIST_VALUES_TAG) {
      pos = skip(c, buf, pos, end, t, depth, STRING_LIST_INFO);
      continue;
    }
    let n = buf[pos];
    if (n < 0x80 && pos < end) pos++;
    else {
      n = varint32(c, buf, pos, end);
      pos = c.pos;
    }
    if (n > end - pos) overrun(n, pos, end);
    push(3 + 2 * count, pos, pos + n);
    count++;
    pos += n;
  }
  return count;
}

/**
 * Whether a map key cannot be written where it arrives: it repeats an earlier key of the map
 * (`keys[0, 2·count)`: their byte ranges; the decoder's object keeps the first position and
 * the last value), or it is all digits (an array index, which JS objects put first).
 */
export function sameOrIndexKey(
  buf: Uint8Array,
  start: number,
  end: number,
  keys: Int32Array,
  count: number,
): boolean {
  const length = end - start;
  let digits = length > 0;
  for (let i = start; i < end && digits; i++) digits = buf[i] >= 0x30 && buf[i] <= 0x39;
  if (digits) return true;
  for (let k = 0; k < count; k++) {
    const s = keys[2 * k];
    if (keys[2 * k + 1] - s !== length) continue;
    let i = 0;
    while (i < length && buf[s + i] === buf[start + i]) i++;
    if (i === length) return true;
  }
  return false;
}
