import { randomBytes } from 'node:crypto';
import { compatibilityPartitioner, type MessageToProduce } from '@platformatic/kafka';
import { describe, expect, it } from 'vitest';
import { keyPartition, murmur2 } from '../../src/data-plane/sinks/kafka/partition.ts';

const clientPartition = (key: Buffer) => compatibilityPartitioner({} as MessageToProduce, key);

describe('kafka keyPartition', () => {
  it("gives every key the partition of the client's compatibilityPartitioner", () => {
    // Every tail length (0-3 bytes past a multiple of four), empty keys and long ones.
    const keys = Array.from({ length: 4_000 }, (_, i) => randomBytes(i % 67));
    keys.push(Buffer.from('ключ.example'), Buffer.from('host-0'), Buffer.alloc(0));
    for (const key of keys) expect(keyPartition(key)).toBe(clientPartition(key));
  });

  it('hashes a range of a larger buffer as the bytes alone', () => {
    const whole = Buffer.from('xxapi.example.comyy');
    expect(murmur2(whole, 2, 17)).toBe(murmur2(Buffer.from('api.example.com')));
    // Kafka's reference value for "21" (Java's Utils.murmur2): -973932308.
    expect(murmur2(Buffer.from('21'))).toBe(-973932308);
  });
});
