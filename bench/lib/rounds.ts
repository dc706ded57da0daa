/**
 * Runs `rounds` rounds of one project batch and one baseline batch (batch `start + round`),
 * alternating which goes first so drift hits both, and returns each side's items per second.
 * `afterRound` runs untimed after each round.
 */
export async function alternateRounds(opts: {
  rounds: number;
  start: number;
  batchSize: number;
  project: (batch: number) => Promise<unknown>;
  baseline: (batch: number) => Promise<unknown>;
  afterRound?: (batch: number) => void | Promise<void>;
}): Promise<{ projectRates: number[]; baselineRates: number[] }> {
  const projectRates: number[] = [];
  const baselineRates: number[] = [];
  const rate = async (work: () => Promise<unknown>) => {
    const t0 = performance.now();
    await work();
    return opts.batchSize / ((performance.now() - t0) / 1000);
  };
  for (let r = 0; r < opts.rounds; r++) {
    const i = opts.start + r;
    if (r % 2 === 0) {
      projectRates.push(await rate(() => opts.project(i)));
      baselineRates.push(await rate(() => opts.baseline(i)));
    } else {
      baselineRates.push(await rate(() => opts.baseline(i)));
      projectRates.push(await rate(() => opts.project(i)));
    }
    await opts.afterRound?.(i);
  }
  return { projectRates, baselineRates };
}
