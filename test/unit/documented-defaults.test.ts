import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';

// README's configuration table is the user's contract: every variable it lists is a setting, every
// setting is listed, and each documented default is what the service does when the variable is
// unset. Until one declaration generates the table, this reads both copies and compares them.
//
// A default cell is `value` (the variable set to it must change nothing), optionally followed by
// the same quantity for people, `(4 MiB)` or `(30 s)`, which must agree; or `—` (unset: the
// setting is off or empty). A value may name other variables (`http://HOST:PORT`): their
// documented defaults stand in. Rows that list several variables (`A` / `B`) list as many
// defaults. A Config field is named after its variable (MAX_INGEST_BYTES: maxIngestBytes).

const README = readFileSync(join(import.meta.dirname, '..', '..', 'README.md'), 'utf8');

/** Bytes or milliseconds per unit a default may be written in. */
const UNITS: Record<string, { per: number; of: 'BYTES' | 'MS' }> = {
  B: { per: 1, of: 'BYTES' },
  KiB: { per: 1024, of: 'BYTES' },
  MiB: { per: 1024 ** 2, of: 'BYTES' },
  GiB: { per: 1024 ** 3, of: 'BYTES' },
  ms: { per: 1, of: 'MS' },
  s: { per: 1000, of: 'MS' },
  min: { per: 60_000, of: 'MS' },
  h: { per: 3_600_000, of: 'MS' },
};

/** The documented default of one variable: its value as the environment carries it, or why not. */
interface Documented {
  variable: string;
  cell: string;
  /** The value; undefined for `—`. */
  value: string | undefined;
  /** What is wrong with the cell, if anything. */
  problem?: string;
}

/** The rows of the table under `| Variable | Default | Meaning |`, one entry per variable. */
function documentedDefaults(): Documented[] {
  const lines = README.split('\n');
  const start = lines.indexOf('| Variable | Default | Meaning |');
  const rows = start === -1 ? [] : lines.slice(start + 2);
  const table = rows.slice(
    0,
    rows.findIndex((line) => !line.startsWith('|')),
  );
  return table.flatMap((row) => {
    const [names, defaults] = row.split(' | ').map((cell) => cell.replace(/^\| /, ''));
    const variables = names.split(' / ').map((name) => /^`([A-Z0-9_]+)`$/.exec(name)?.[1] ?? name);
    const cells = defaults.split(' / ');
    return variables.map((variable, i) => {
      const cell = cells[i] ?? '';
      if (cells.length !== variables.length) {
        return { variable, cell, value: undefined, problem: `one default per variable: ${row}` };
      }
      return { variable, cell, ...defaultValue(variable, cell) };
    });
  });
}

/** The environment value a default cell stands for (undefined for `—`), or its problem. */
function defaultValue(variable: string, cell: string): Pick<Documented, 'value' | 'problem'> {
  if (cell.startsWith('—')) return { value: undefined };
  const match = /^`([^`]+)`(?: \((\d+(?:\.\d+)?) ([A-Za-z]+)\))?$/.exec(cell);
  if (match === null) return { value: undefined, problem: 'not `value`, `value` (n unit), or —' };
  const [, value, quantity, unit] = match;
  if (unit === undefined) return { value };
  const { per, of } = UNITS[unit] ?? {};
  if (per === undefined) return { value, problem: `unknown unit ${unit}` };
  if (!variable.endsWith(`_${of}`)) return { value, problem: `${variable} is not in ${unit}` };
  if (Number(value) !== Number(quantity) * per) {
    return { value, problem: `${value} is not ${quantity} ${unit}` };
  }
  return { value };
}

/** The variables loadConfig reads: every name it looks up in the environment it is given. */
function variablesRead(): Set<string> {
  const read = new Set<string>();
  const env = new Proxy({} as Record<string, string | undefined>, {
    get(target, name) {
      if (typeof name === 'string') read.add(name);
      return target[name as string];
    },
  });
  loadConfig(env);
  return read;
}

/** Normalised for comparing field names with variable names: AGENT_KEEPALIVE_MS, agentKeepAliveMs. */
const folded = (name: string) => name.replace(/_/g, '').toLowerCase();

describe('README configuration table', () => {
  const documented = documentedDefaults();
  const defaults = loadConfig({});
  const defaultOf = new Map(documented.map((entry) => [entry.variable, entry.value]));

  it('has a well-formed default for every variable', () => {
    const problems = documented.filter((entry) => entry.problem !== undefined);
    expect(
      problems.map(({ variable, cell, problem }) => `${variable} (${cell}): ${problem}`),
    ).toEqual([]);
  });

  it('lists every variable the service reads, and only those, once each', () => {
    const names = documented.map((entry) => entry.variable);
    expect(names.length).toBeGreaterThan(40);
    expect(new Set(names).size, 'a variable listed twice').toBe(names.length);
    expect(new Set(names)).toEqual(variablesRead());
  });

  it('has a variable for every setting: each Config field is named after one', () => {
    const variables = new Set(documented.map((entry) => folded(entry.variable)));
    const orphans = Object.keys(defaults).filter((field) => !variables.has(folded(field)));
    expect(orphans).toEqual([]);
  });

  it.each(documented.filter((entry) => entry.value !== undefined && !entry.problem))(
    'states the default of $variable: $cell',
    ({ variable, value }) => {
      // Other variables named in the value (PUBLIC_URL's HOST and PORT) take their defaults.
      const resolved = value!.replace(/\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*\b/g, (name) =>
        defaultOf.has(name) && name !== variable ? defaultOf.get(name)! : name,
      );
      expect(loadConfig({ [variable]: resolved })).toEqual(defaults);
    },
  );

  it.each(documented.filter((entry) => entry.value === undefined && !entry.problem))(
    'leaves $variable off or empty when unset',
    ({ variable }) => {
      const field = Object.keys(defaults).find((name) => folded(name) === folded(variable));
      expect(field, `the Config field of ${variable}`).toBeDefined();
      const value = defaults[field as keyof typeof defaults];
      expect([undefined, '', '[]']).toContain(Array.isArray(value) ? '[]' : value);
    },
  );
});
