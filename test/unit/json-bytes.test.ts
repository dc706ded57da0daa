import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { writeString } from '../../src/data-plane/wire-json/json-bytes.ts';
import { fuzzParams } from '../helpers/fuzz.ts';

// writeString copies a string's bytes four at a time when none of them escapes, and goes back
// to the byte loop when one does: for any bytes, at any offsets, its text must be
// JSON.stringify of the string the bytes decode to (fatal UTF-8), and it must throw
// ERR_INVALID_EVENTS exactly when they are not UTF-8, writing nothing outside its own text.

const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const FILL = 0xa5;

function expected(bytes: Uint8Array): Buffer | 'invalid' {
  try {
    return Buffer.from(JSON.stringify(strict.decode(bytes)), 'utf8');
  } catch {
    return 'invalid';
  }
}

/**
 * writeString of `bytes` placed at `offset` in a larger source with `after` bytes after it,
 * the rest `around` (a byte that escapes, or a plain one), written at `at` of an output.
 */
function written(
  bytes: Uint8Array,
  offset: number,
  at: number,
  after = 0,
  around = 0x22,
): Buffer | 'invalid' {
  // Reading past the string's ends would show: as an escape that is not in it, or as a plain
  // byte copied into it; none after it unless asked (reading past the source would throw).
  // Both arrays start inside their ArrayBuffers, as pooled Buffers and subarrays do.
  const src = new Uint8Array(3 + offset + bytes.length + after).fill(around).subarray(3);
  src.set(bytes, offset);
  const out = Buffer.alloc(5 + at + 6 * bytes.length + 2 + 16, FILL).subarray(5);
  let end: number;
  try {
    end = writeString(out, at, src, offset, offset + bytes.length);
  } catch (error) {
    expect(error).toMatchObject({ code: 'ERR_INVALID_EVENTS' });
    return 'invalid';
  }
  expect(out.subarray(0, at).every((b) => b === FILL)).toBe(true);
  expect(out.subarray(end).every((b) => b === FILL)).toBe(true);
  return out.subarray(at, end);
}

// Bytes weighted toward what the fast path must notice: controls, ", \, DEL, and bytes of
// multi-byte characters (valid or not), mixed with plain ASCII.
const byteArb = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0x20, max: 0x7e }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 0x1f }) },
  { weight: 1, arbitrary: fc.constantFrom(0x22, 0x5c, 0x7f) },
  { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }) },
);
const bytesArb = fc.oneof(
  fc.array(byteArb, { maxLength: 40 }).map((a) => Uint8Array.from(a)),
  fc.array(byteArb, { minLength: 100, maxLength: 600 }).map((a) => Uint8Array.from(a)),
  fc.string({ unit: 'grapheme', maxLength: 60 }).map((s) => new TextEncoder().encode(s)),
  // Plain ASCII with at most one byte to escape, anywhere (the word test must see every lane).
  fc
    .tuple(
      fc.string({ unit: 'grapheme-ascii', maxLength: 300 }),
      fc.nat(),
      fc.constantFrom(0, 0x0a, 0x1f, 0x22, 0x5c, 0x80, 0xc3, 0xff),
    )
    .map(([s, at, b]) => {
      const bytes = Buffer.from(s, 'latin1').map((c) =>
        c < 0x20 || c === 0x22 || c === 0x5c ? 0x61 : c,
      );
      if (bytes.length > 0) bytes[at % bytes.length] = b;
      return Uint8Array.from(bytes);
    }),
);

describe('writeString', () => {
  it('writes JSON.stringify of the UTF-8 string, or throws when it is not UTF-8', () => {
    fc.assert(
      fc.property(
        bytesArb,
        fc.nat(7),
        fc.nat(7),
        fc.nat(7),
        fc.constantFrom(0x22, 0x78),
        (bytes, offset, at, after, around) => {
          expect(written(bytes, offset, at, after, around)).toEqual(expected(bytes));
        },
      ),
      fuzzParams(3000),
    );
  });

  it('sees a byte to escape or a non-UTF-8 byte in every position of every length up to 40', () => {
    for (let length = 1; length <= 40; length++) {
      for (let i = 0; i < length; i++) {
        for (const b of [0x00, 0x09, 0x1f, 0x22, 0x5c, 0x7f, 0x80, 0xe9, 0xff]) {
          const bytes = new Uint8Array(length).fill(0x61);
          bytes[i] = b;
          expect(written(bytes, i % 4, 1)).toEqual(expected(bytes));
        }
      }
    }
  });

  it('writes a long plain value and a long non-ASCII value as they are', () => {
    const plain = Buffer.from('Mozilla/5.0 (X11; Linux x86_64) '.repeat(40));
    expect(written(plain, 3, 0)).toEqual(Buffer.from(JSON.stringify(plain.toString())));
    const accented = Buffer.from('café, naïve, 東京, 🙂 '.repeat(30));
    expect(written(accented, 1, 2)).toEqual(Buffer.from(JSON.stringify(accented.toString())));
    expect(written(accented.subarray(0, accented.length - 1 - 1), 0, 0)).toBe('invalid');
  });
});
