import { describe, expect, it } from 'vitest';
import { ByteWriter, valueWriter } from '../../src/data-plane/sinks/clickhouse/row-binary.ts';

// Each ClickHouse type's RowBinary bytes, written out by hand from the format's definition.

function bytes(type: string, value: unknown): string {
  const w = new ByteWriter(8);
  valueWriter(type)(w, value);
  return w.result().toString('hex');
}

const hex = (...parts: (string | number[])[]) =>
  parts
    .map((p) =>
      typeof p === 'string' ? Buffer.from(p).toString('hex') : Buffer.from(p).toString('hex'),
    )
    .join('');

describe('RowBinary value writers', () => {
  it('writes strings as a LEB128 byte length and UTF-8, LowCardinality as its inner type', () => {
    expect(bytes('String', '')).toBe('00');
    expect(bytes('String', undefined)).toBe('00');
    expect(bytes('String', 'é😀')).toBe(hex([6], 'é😀'));
    expect(bytes('LowCardinality(String)', 'GET')).toBe(hex([3], 'GET'));
    const long = 'x'.repeat(200);
    expect(bytes('String', long)).toBe(hex([0xc8, 0x01], long));
    const wide = 'é'.repeat(42); // 42 units, 84 bytes: the one-byte length still holds it
    expect(bytes('String', wide)).toBe(hex([84], wide));
    const wider = '中'.repeat(60); // 180 bytes: two length bytes
    expect(bytes('String', wider)).toBe(hex([0xb4, 0x01], wider));
  });

  it('writes integers little-endian, wrapping as ClickHouse reads JSON numbers', () => {
    expect(bytes('Int32', 443)).toBe('bb010000');
    expect(bytes('Int32', -1)).toBe('ffffffff');
    expect(bytes('Int32', 3000000000)).toBe('005ed0b2');
    expect(bytes('Int64', -2)).toBe('feffffffffffffff');
    expect(bytes('Int64', '9223372036854775807')).toBe('ffffffffffffff7f');
    expect(bytes('Int64', '9223372036854775808')).toBe('0000000000000080');
    expect(bytes('Int64', 1e20)).toBe('000010632d5ec76b'); // 10^20 modulo 2^64
    expect(bytes('UInt64', '18446744073709551615')).toBe('ffffffffffffffff');
    expect(bytes('UInt8', 1)).toBe('01');
    expect(bytes('Int8', -1)).toBe('ff');
    expect(bytes('Int16', 258)).toBe('0201');
    expect(bytes('UInt32', undefined)).toBe('00000000');
    expect(bytes('Bool', true)).toBe('01');
    expect(bytes('Float64', 1.5)).toBe('000000000000f83f');
  });

  it('writes DateTime as UInt32 seconds (held to its range) and DateTime64(3) as Int64 ms', () => {
    expect(bytes("DateTime('UTC')", '2026-03-04 05:06:07')).toBe('bfbda769');
    expect(bytes("DateTime('UTC')", '1969-12-31 23:59:59')).toBe('00000000');
    expect(bytes("DateTime('UTC')", '2200-01-01 00:00:00')).toBe('ffffffff');
    const ms = Date.UTC(2026, 2, 4, 5, 6, 7, 123);
    const le = Buffer.alloc(8);
    le.writeBigInt64LE(BigInt(ms));
    expect(bytes("DateTime64(3, 'UTC')", '2026-03-04 05:06:07.123')).toBe(le.toString('hex'));
    le.writeBigInt64LE(-500n);
    expect(bytes("DateTime64(3, 'UTC')", '1969-12-31 23:59:59.500')).toBe(le.toString('hex'));
    expect(bytes("DateTime64(3, 'UTC')", undefined)).toBe('0000000000000000');
  });

  it('writes arrays, maps and nullables', () => {
    expect(bytes('Array(String)', ['a', ''])).toBe(hex([2, 1], 'a', [0]));
    expect(bytes('Array(String)', undefined)).toBe('00');
    expect(bytes('Map(String, Array(String))', { A: ['x', 'y'], B: [] })).toBe(
      hex([2, 1], 'A', [2, 1], 'x', [1], 'y', [1], 'B', [0]),
    );
    expect(bytes('Map(String, Array(String))', undefined)).toBe('00');
    expect(bytes('Nullable(Int32)', null)).toBe('01');
    expect(bytes('Nullable(Int32)', 7)).toBe('0007000000');
    expect(bytes('Array(Nullable(String))', ['a', null])).toBe(hex([2, 0, 1], 'a', [1]));
  });

  it('refuses a type it has no writer for', () => {
    expect(() => valueWriter('Decimal(9, 2)')).toThrow(/no writer for type Decimal/);
  });
});
