import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MapKeys } from '../../src/data-plane/wire-json/wire-json-map.ts';
import { fuzzParams } from '../helpers/fuzz.ts';

// MapKeys filters keys by a hash before comparing them with the earlier ones: whatever the
// hashes, it must refuse exactly a key added before (byte for byte) or one of only digits.

describe('MapKeys', () => {
  it('refuses exactly a repeated key or an all-digits one', () => {
    // A small alphabet, so that keys repeat and hashes collide often.
    const keyArb = fc.string({ unit: fc.constantFrom('a', 'b', 'A', '1', '-', 'é'), maxLength: 5 });
    fc.assert(
      fc.property(fc.array(fc.array(keyArb, { maxLength: 40 }), { maxLength: 3 }), (maps) => {
        const keys = new MapKeys();
        for (const map of maps) {
          keys.reset();
          const bytes = Buffer.from(map.join(''));
          const added = new Set<string>();
          let at = 0;
          for (const key of map) {
            const end = at + Buffer.byteLength(key);
            const expected = !added.has(key) && !/^[0-9]+$/.test(key);
            expect(keys.add(bytes, at, end)).toBe(expected);
            if (expected) added.add(key);
            at = end;
          }
        }
      }),
      fuzzParams(2000),
    );
  });
});
