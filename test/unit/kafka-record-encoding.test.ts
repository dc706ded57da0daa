import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  crc32c,
  KAFKAJS_VERSION,
  patchRecordEncoding,
} from '../../src/data-plane/sinks/kafka/record-encoding-fix.ts';

const require = createRequire(import.meta.url);
const RECORD = require.resolve('kafkajs/src/protocol/recordBatch/record/v0/index.js');

interface Encoder {
  buffer: Buffer;
}
type EncodeRecord = (fields: Record<string, unknown>) => Encoder;

/** kafkajs's own record encoder, loaded apart from the (possibly patched) cached one. */
function originalRecordEncoder(): EncodeRecord {
  const cached = require.cache[RECORD];
  delete require.cache[RECORD];
  try {
    return require(RECORD) as EncodeRecord;
  } finally {
    if (cached) require.cache[RECORD] = cached;
    else delete require.cache[RECORD];
  }
}

describe('kafkajs record encoding fix', () => {
  it('is installed with the one kafkajs its replacements were checked against, pinned exactly', () => {
    const root = join(import.meta.dirname, '..', '..');
    const read = (file: string) => JSON.parse(readFileSync(join(root, file), 'utf8'));
    // A range (^2.2.4) would let an install bring a kafkajs whose internals the fixes never saw.
    expect(read('package.json').dependencies.kafkajs).toBe(KAFKAJS_VERSION);
    const lock = read('package-lock.json');
    expect(lock.packages[''].dependencies.kafkajs).toBe(KAFKAJS_VERSION);
    expect(lock.packages['node_modules/kafkajs'].version).toBe(KAFKAJS_VERSION);
    expect(require('kafkajs/package.json').version).toBe(KAFKAJS_VERSION);
  });

  it('computes the CRC-32C kafkajs computes, at every length and alignment', () => {
    const kafkajsCrc = require('kafkajs/src/protocol/recordBatch/crc32C/crc32C.js') as (
      b: Buffer,
    ) => number;
    const data = randomBytes(4096);
    for (let length = 0; length < 40; length++) {
      for (const start of [0, 1, 3, 7]) {
        const slice = data.subarray(start, start + length);
        expect(crc32c(slice)).toBe(kafkajsCrc(slice));
      }
    }
    expect(crc32c(data)).toBe(kafkajsCrc(data));
    expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283); // the standard check value
  });

  it('encodes records byte for byte as kafkajs does, and falls back where it does not apply', () => {
    expect(patchRecordEncoding()).toBe(true);
    const patched = require(RECORD) as EncodeRecord;
    const original = originalRecordEncoder();
    expect(patched).not.toBe(original);
    const long = 'é'.repeat(5000);
    const cases: Record<string, unknown>[] = [
      { key: 'host-1.example.com', value: '{"a":1}', headers: { event_type: 't', event_id: 'e' } },
      { key: null, value: null },
      { key: Buffer.from([0, 1, 2]), value: Buffer.alloc(300, 7), offsetDelta: 499 },
      { key: 'k', value: long, timestampDelta: 2 ** 40, offsetDelta: 70_000, headers: {} },
      { key: 'ключ', value: 'värde', timestampDelta: -5, headers: { 'h-ü': Buffer.from('x') } },
      { key: 'k', value: 'v', headers: { many: ['a', 'b'] } }, // several values: kafkajs's path
      { key: 'k', value: 'v', timestampDelta: 2 ** 60 }, // not a safe integer: kafkajs's path
    ];
    for (const fields of cases) {
      expect(patched(fields).buffer).toEqual(original(fields).buffer);
    }
  });
});
