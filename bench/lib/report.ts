import { type Spread, spreadText } from './spread.ts';
import { median, percentile } from './stats.ts';

/** One benchmark figure against its baseline measured in the same run. */
export interface BenchResult {
  bench: string;
  value: number;
  unit: string;
  baseline: number;
  ratio: number;
  /** The per-round ratios' min / median / max (spread.ts): every bench reports it. */
  spread?: Spread;
}

function cell(value: string | number): string {
  return typeof value === 'number' ? value.toLocaleString('en-US') : value;
}

/**
 * Prints a readable table, the ratio's spread over the rounds when given, then the one JSON line
 * `npm run bench:all` reads.
 */
export function report(result: BenchResult, rows: [string, string | number][]): void {
  if (result.spread !== undefined) rows = [...rows, ['ratio spread', spreadText(result.spread)]];
  const width = Math.max(...rows.map(([label]) => label.length));
  for (const [label, value] of rows) {
    process.stdout.write(`${label.padEnd(width)}  ${cell(value)}\n`);
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

/** Prints a table with a header row: the first column left-aligned, the others right-aligned. */
export function printTable(header: string[], rows: (string | number)[][]): void {
  const text = [header, ...rows].map((row) => row.map(cell));
  const widths = header.map((_, i) => Math.max(...text.map((row) => (row[i] ?? '').length)));
  const line = (row: string[]) =>
    row.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  process.stdout.write(`${line(text[0])}\n${widths.map((w) => '-'.repeat(w)).join('  ')}\n`);
  for (const row of text.slice(1)) process.stdout.write(`${line(row)}\n`);
}

/**
 * The table both sink benches print: per-batch rates of the project and of the raw client
 * (median, p10, p90), and the median of their per-round ratios.
 */
export function printRateComparison(
  unit: string,
  project: { label: string; rates: number[] },
  raw: { label: string; rates: number[] },
): { value: number; baseline: number; pairedRatio: number } {
  const row = (label: string, rates: number[]) => [
    label,
    Math.round(median(rates)),
    Math.round(percentile(rates, 10)),
    Math.round(percentile(rates, 90)),
  ];
  printTable(
    [`${unit} per batch`, 'median', 'p10', 'p90'],
    [row(project.label, project.rates), row(raw.label, raw.rates)],
  );
  const pairedRatio = median(project.rates.map((v, i) => v / raw.rates[i]));
  process.stdout.write(`\nmedian of per-round sink/raw ratios: ${pairedRatio.toFixed(3)}\n`);
  return { value: median(project.rates), baseline: median(raw.rates), pairedRatio };
}
