// `cli api … --output table`: an answer as a compact table for people. Generic, as the CLI is:
// no resource has columns of its own. Nested values become what a reader looks for in them
// (a reference's id, a choice's kind, an object's scalar fields as columns of their own), never
// `[object Object]`.

/** Columns a table leaves out: the same link in every row. */
const HIDDEN = new Set(['uri']);
/** The longest a cell prints; the JSON output has the rest. */
const MAX_CELL = 48;

type Row = Record<string, unknown>;

const isScalar = (value: unknown) => value === null || typeof value !== 'object';
const isObject = (value: unknown): value is Row =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** The rows a table shows: the answer's array (a list) or the answer itself. */
function rowsOf(answer: unknown): Row[] {
  if (!isObject(answer)) return [];
  const arrays = Object.values(answer).filter(Array.isArray);
  if (arrays.length === 1 && !('id' in answer)) return arrays[0] as Row[];
  return [answer];
}

/**
 * A nested value as one cell, when it reads as one: a reference (`{id, uri}`) as its id, a
 * choice of one kind (a destination's `{"kafka": {…}}`) as that kind, a list of such values
 * or of scalars joined by commas. Undefined for an object with fields of its own.
 */
function asCell(value: unknown): string | undefined {
  if (isScalar(value)) return value === null ? '' : String(value);
  if (Array.isArray(value)) {
    const cells = value.map(asCell);
    return cells.every((cell) => cell !== undefined) ? cells.join(',') : `${value.length} items`;
  }
  const entry = value as Row;
  if (typeof entry.id === 'string') return entry.id;
  const keys = Object.keys(entry);
  if (keys.length === 1 && isObject(entry[keys[0]])) return keys[0];
  return undefined;
}

/** A row's cells by column: `health.status` for an object's scalar fields, one level down. */
function cellsOf(row: Row): Map<string, string> {
  const cells = new Map<string, string>();
  for (const [key, value] of Object.entries(row)) {
    if (HIDDEN.has(key)) continue;
    const cell = asCell(value);
    if (cell !== undefined) {
      cells.set(key, cell);
      continue;
    }
    for (const [field, inner] of Object.entries(value as Row)) {
      const innerCell = isObject(inner) ? undefined : asCell(inner);
      if (innerCell !== undefined) cells.set(`${key}.${field}`, innerCell);
    }
  }
  return cells;
}

/** One line of at most MAX_CELL characters. */
function clip(text: string): string {
  const line = text.replace(/\s+/g, ' ');
  return line.length > MAX_CELL ? `${line.slice(0, MAX_CELL - 1)}…` : line;
}

/** A compact table of the rows, leaving out columns empty in every row. */
export function table(answer: unknown): string {
  const rows = rowsOf(answer).map(cellsOf);
  const columns: string[] = [];
  for (const row of rows) {
    for (const [column, cell] of row) {
      if (cell !== '' && !columns.includes(column)) columns.push(column);
    }
  }
  const grid = [
    columns.map((c) => c.toUpperCase()),
    ...rows.map((row) => columns.map((c) => clip(row.get(c) ?? ''))),
  ];
  const widths = columns.map((_, i) => Math.max(...grid.map((line) => line[i].length)));
  return grid
    .map((line) =>
      line
        .map((value, i) => value.padEnd(widths[i]))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
