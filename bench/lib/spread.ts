// The spread of a benchmark's per-round ratios: every bench prints it, so one run's figure
// comes with how far its rounds disagreed.

/** min / median / max of a bench's per-round ratios. */
export interface Spread {
  rounds: number;
  min: number;
  median: number;
  max: number;
}

const three = (value: number) => Number(value.toFixed(3));

/** The spread of `ratios` (one per round), to three decimals. */
export function spreadOf(ratios: readonly number[]): Spread {
  const sorted = [...ratios].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  const median =
    sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
  return {
    rounds: sorted.length,
    min: three(sorted[0]),
    median: three(median),
    max: three(sorted.at(-1)!),
  };
}

/** "0.912 / 0.950 / 1.010 (min / median / max of 6 rounds)". */
export function spreadText(spread: Spread): string {
  const f = (value: number) => value.toFixed(3);
  return `${f(spread.min)} / ${f(spread.median)} / ${f(spread.max)} (min / median / max of ${spread.rounds} rounds)`;
}
