/** One benchmark figure against its baseline measured in the same run. */
export interface BenchResult {
  bench: string;
  value: number;
  unit: string;
  baseline: number;
  ratio: number;
}

function cell(value: string | number): string {
  return typeof value === 'number' ? value.toLocaleString('en-US') : value;
}

/** Prints a readable table, then the one JSON line the issue asks for. */
export function report(result: BenchResult, rows: [string, string | number][]): void {
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
