import type fc from 'fast-check';

/**
 * fast-check settings for every property test: `FUZZ_SEED=<n>` replays a run (fast-check prints
 * the seed of a failing one), and the run stops at the first failure.
 */
export function fuzzParams(numRuns: number): fc.Parameters<unknown> {
  const seed = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
  return { numRuns, ...(seed === undefined ? {} : { seed }), endOnFailure: true };
}
