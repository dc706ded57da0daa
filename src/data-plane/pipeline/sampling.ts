// Sampling of an event source: a source with `sample_rate` r (0 < r <= 1) delivers about r of
// the events that pass its filter. The decision is a function of the event id alone, so every
// worker, every instance and every retry of the same event decides the same way: a 32-bit hash
// of the id (FNV-1a, then murmur3's finalizer so ids that differ in one character spread over
// the whole range) is kept when it falls below r·2^32.

const TWO_32 = 2 ** 32;

/** The bound below which an event id's hash is kept, or undefined when every event is kept. */
export function sampleBound(rate: number): number | undefined {
  return rate >= 1 ? undefined : Math.floor(rate * TWO_32);
}

/** The event id's 32-bit hash, as an unsigned number in [0, 2^32). */
export function eventIdHash(eventId: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < eventId.length; i++) {
    h = Math.imul(h ^ eventId.charCodeAt(i), 0x01000193);
  }
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Whether a source whose bound is `bound` (sampleBound) keeps the event. */
export function sampled(eventId: string, bound: number | undefined): boolean {
  return bound === undefined || eventIdHash(eventId) < bound;
}
