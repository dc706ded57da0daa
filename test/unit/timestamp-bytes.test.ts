import { BinaryWriter } from '@bufbuild/protobuf/wire';
import { TimestampSchema } from '@bufbuild/protobuf/wkt';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { writeTimestamp } from '../../src/data-plane/wire-json/timestamp-bytes.ts';
import { formatTimestamp, wireToJson } from '../../src/data-plane/wire-json/wire-decode.ts';
import { fuzzParams } from '../helpers/fuzz.ts';

// writeTimestamp reads the layout encoders write and leaves any other to the decoder: for any
// Timestamp bytes its text must be JSON.stringify of what the decoder and formatTimestamp give
// (null included), and the decoder must not be asked for the layout it reads itself.

const decode = wireToJson(TimestampSchema);
const slow = (buf: Uint8Array, start: number, end: number) =>
  formatTimestamp(decode(buf, start, end) as never);

/** The source: `bytes` at offset 3, between bytes that are tags (reading past them would show). */
function placed(bytes: Uint8Array): Uint8Array {
  const src = new Uint8Array(bytes.length + 6).fill(0x08);
  src.set(bytes, 3);
  return src;
}

function written(bytes: Uint8Array): { text: string; slow: boolean } {
  const out = Buffer.alloc(48);
  let asked = false;
  const end = writeTimestamp(out, 2, placed(bytes), 3, 3 + bytes.length, (b, s, e) => {
    asked = true;
    return slow(b, s, e);
  });
  return { text: out.toString('latin1', 2, end), slow: asked };
}

const MAX_SECONDS = 253402300799n;
const secondsArb = fc.oneof(
  fc.bigInt({ min: 0n, max: 2n ** 35n - 1n }),
  fc.bigInt({ min: -62135596800n, max: MAX_SECONDS + 10n }),
  fc.constantFrom(0n, 1n, 86399n, 86400n, 2n ** 35n - 1n, 2n ** 35n, -1n, 2n ** 63n - 1n),
);
const nanosArb = fc.oneof(
  fc.integer({ min: 0, max: 999_999_999 }),
  fc.constantFrom(0, 1, 1_000, 1_000_000, 999_000_000, 999_999_999, 1e9, -1, 2 ** 31 - 1),
  fc.integer({ min: 0, max: 999 }).map((n) => n * 1_000_000),
);

/** The Timestamp's bytes as an encoder writes them: seconds, then nanos, zeros left out. */
function canonical(seconds: bigint, nanos: number): Uint8Array {
  const w = new BinaryWriter();
  if (seconds !== 0n) w.uint32(0x08).int64(seconds);
  if (nanos !== 0) w.uint32(0x10).int32(nanos);
  return w.finish();
}

const layoutArb = fc
  .tuple(
    secondsArb,
    nanosArb,
    fc.constantFrom('canonical', 'reversed', 'twice', 'unknown', 'long varint', 'truncated'),
  )
  .map(([seconds, nanos, layout]) => {
    const w = new BinaryWriter();
    const s = () => w.uint32(0x08).int64(seconds);
    const n = () => w.uint32(0x10).int32(nanos);
    if (layout === 'canonical') return { bytes: canonical(seconds, nanos), layout, seconds, nanos };
    // Each layout as a sequence of fields written in turn.
    const fields: Record<string, (() => unknown)[]> = {
      reversed: [n, s],
      twice: [s, n, s],
      unknown: [s, () => w.uint32(0x18).uint32(7), n],
      'long varint': [() => w.raw(Uint8Array.of(0x08, 0x81, 0x80, 0x80, 0x80, 0x80, 0)), n],
      truncated: [s, n],
    };
    for (const field of fields[layout]) field();
    const bytes = w.finish();
    const kept = layout === 'truncated' ? bytes.subarray(0, bytes.length - 1) : bytes;
    return { bytes: kept, layout, seconds, nanos };
  });

describe('writeTimestamp', () => {
  it('writes what the decoder and formatTimestamp give, for any layout', () => {
    fc.assert(
      fc.property(layoutArb, ({ bytes, layout, seconds, nanos }) => {
        let expected: string;
        try {
          expected = JSON.stringify(slow(placed(bytes), 3, 3 + bytes.length));
        } catch (error) {
          expect(() => written(bytes)).toThrow((error as Error).message);
          return;
        }
        const { text, slow: asked } = written(bytes);
        expect(text).toBe(expected);
        const read = seconds >= 0n && seconds < 2n ** 35n && nanos >= 0 && nanos < 1e9;
        if (layout === 'canonical' && read) expect(asked).toBe(false);
      }),
      fuzzParams(3000),
    );
  });

  it('writes the epoch, a day boundary and every fraction length itself', () => {
    for (const [seconds, nanos, text] of [
      [0n, 0, '1970-01-01T00:00:00Z'],
      [86399n, 1_000_000, '1970-01-01T23:59:59.001Z'],
      [1_764_000_000n, 5_000, '2025-11-24T16:00:00.000005Z'],
      [2n ** 35n - 1n, 123_456_789, '3058-10-26T03:46:07.123456789Z'],
    ] as const) {
      expect(written(canonical(seconds, nanos))).toEqual({ text: `"${text}"`, slow: false });
    }
  });
});
