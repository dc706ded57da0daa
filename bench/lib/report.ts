/** One benchmark figure against its baseline measured in the same run. */
export interface BenchResult {
  bench: string;
  value: number;
  unit: string;
  baseline: number;
  ratio: number;
}

/** Prints a readable table, then the one JSON line the issue asks for. */
export function report(result: BenchResult, rows: [string, string | number][]): void {
  const width = Math.max(...rows.map(([label]) => label.length));
  for (const [label, value] of rows) {
    process.stdout.write(
      `${label.padEnd(width)}  ${typeof value === 'number' ? value.toLocaleString('en-US') : value}\n`,
    );
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
