// Small statistics for the benchmarks: every figure is a median of interleaved rounds, a
// percentile of latency samples, a geometric mean over cases or a least-squares slope.

/** The median of some numbers (NaN when there are none). */
export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** The p-th percentile (0..100, nearest rank) of some numbers (NaN when there are none). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = Float64Array.from(values).sort();
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/** The geometric mean of positive numbers. */
export function geomean(values: readonly number[]): number {
  return Math.exp(values.reduce((sum, v) => sum + Math.log(v), 0) / values.length);
}

/** Least-squares line through (x, y) points: the slope and intercept. */
export function linearFit(points: readonly [number, number][]): {
  slope: number;
  intercept: number;
} {
  const n = points.length;
  if (n < 2) return { slope: 0, intercept: points[0]?.[1] ?? 0 };
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (const [x, y] of points) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) ** 2;
  }
  const slope = sxx === 0 ? 0 : sxy / sxx;
  return { slope, intercept: my - slope * mx };
}

/** value / baseline to three decimals, for the JSON line. */
export function ratioOf(value: number, baseline: number): number {
  return Number((value / baseline).toFixed(3));
}
