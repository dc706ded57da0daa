// The cel-spec conformance tests (npm @bufbuild/cel-spec) that a traffic filter can express, run
// through the project's own filter API (compileFilter), on the generated-JS path or the cel-js
// library path. A filter is a bool predicate over one event, so each test becomes one:
//
// - expected value V:  `(expr) == V` must compile and match (V written back as a CEL literal;
//   NaN as `(expr) != (expr)`, a bool V as `expr` or `!(expr)`);
// - expected error:    `size([expr]) == 1` must be rejected when the subscription is created or
//   not match (an evaluation error counts as "no match" for a filter).
//
// The slice: the sections about the language a filter over strings, ints, bools, timestamps,
// lists and maps meets, minus the tests a filter cannot express at all: ones that declare
// variables or bind values (a filter only has `ev` and its groups), run unchecked
// (disableCheck: filters are always type-checked), without macros, in a container, only
// type-check, build protobuf messages (wrappers, TestAllTypes), or whose expected value is a
// message other than Timestamp/Duration. `macros2` (two-variable comprehensions) is a cel-go
// extension, not core CEL, and not part of the filter language.
//
// `npx node test/helpers/cel-conformance.ts [--failures]` prints the numbers per section.

import { getTestRegistry } from '@bufbuild/cel-spec/testdata/registry.js';
import {
  getConformanceSuite,
  type IncrementalTest,
  type IncrementalTestSuite,
} from '@bufbuild/cel-spec/testdata/tests.js';
import { anyUnpack, type Duration, type Timestamp } from '@bufbuild/protobuf/wkt';
import { jsFilter } from '../../src/data-plane/filter/compile-js.ts';
import { compileFilter, FilterError } from '../../src/data-plane/filter/index.ts';

/** The conformance files (sections) of the slice. */
export const SLICE_SECTIONS = [
  'basic',
  'comparisons',
  'conversions',
  'fields',
  'integer_math',
  'lists',
  'logic',
  'macros',
  'parse',
  'plumbing',
  'string',
  'timestamps',
] as const;

const TYPE = 'http_request_complete.v0';
const EVENT = { conn: { server_name: 'api.example.com', server_port: 443 } };

export interface ConformanceCase {
  /** `section/subsection/name`. */
  readonly id: string;
  readonly expr: string;
  /** The filter that passes when the implementation agrees with the spec. */
  readonly filter: string;
  /** True: the filter must match; false: it must be rejected or not match (an error). */
  readonly expectMatch: boolean;
}

const registry = getTestRegistry();

/** Message constructions and type names a filter has no declaration for. */
const MESSAGE_TYPES = /google\.protobuf\.|cel\.expr\.|TestAllTypes/;

function quote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0) ?? 0;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (c < 0x20 || c === 0x7f || (c >= 0xd800 && c <= 0xdfff)) {
      out += `\\u${c.toString(16).padStart(4, '0')}`;
    } else out += ch;
  }
  return `${out}"`;
}

function bytesLiteral(b: Uint8Array): string {
  return `b"${Array.from(b, (x) => `\\x${x.toString(16).padStart(2, '0')}`).join('')}"`;
}

function rfc3339(t: Timestamp): string {
  const ms = Number(t.seconds) * 1000;
  const base = new Date(ms).toISOString().slice(0, 19);
  const frac = t.nanos === 0 ? '' : `.${String(t.nanos).padStart(9, '0')}`;
  return `${base}${frac}Z`;
}

type Value = NonNullable<
  Extract<IncrementalTest['original']['resultMatcher'], { case: 'value' }>['value']
>;

/** The expected value as a CEL expression, or undefined when it has no literal form here. */
export function celLiteral(v: Value): string | undefined {
  const k = v.kind;
  switch (k.case) {
    case 'nullValue':
      return 'null';
    case 'boolValue':
      return String(k.value);
    case 'int64Value':
      return k.value === -(2n ** 63n) ? '-9223372036854775808' : String(k.value);
    case 'uint64Value':
      return `${k.value}u`;
    case 'doubleValue':
      if (Number.isNaN(k.value)) return undefined;
      if (k.value === Infinity) return '(1.0 / 0.0)';
      if (k.value === -Infinity) return '(-1.0 / 0.0)';
      return Number.isInteger(k.value) && Math.abs(k.value) < 1e21
        ? `${k.value}.0`
        : String(k.value);
    case 'stringValue':
      return quote(k.value);
    case 'bytesValue':
      return bytesLiteral(k.value);
    case 'typeValue':
      return k.value;
    case 'listValue': {
      const items = k.value.values.map((i: Value) => celLiteral(i));
      return items.every((i) => i !== undefined) ? `[${items.join(', ')}]` : undefined;
    }
    case 'mapValue': {
      const entries = k.value.entries.map((e: { key?: Value; value?: Value }) => {
        const key = e.key === undefined ? undefined : celLiteral(e.key);
        const value = e.value === undefined ? undefined : celLiteral(e.value);
        return key === undefined || value === undefined ? undefined : `${key}: ${value}`;
      });
      return entries.every((e: string | undefined) => e !== undefined)
        ? `{${entries.join(', ')}}`
        : undefined;
    }
    case 'objectValue': {
      const msg = anyUnpack(k.value, registry);
      if (msg?.$typeName === 'google.protobuf.Timestamp') {
        return `timestamp(${quote(rfc3339(msg as Timestamp))})`;
      }
      if (msg?.$typeName === 'google.protobuf.Duration') {
        const d = msg as Duration;
        const nanos = d.seconds * 1_000_000_000n + BigInt(d.nanos);
        return `duration("${nanos}ns")`;
      }
      return undefined;
    }
    default:
      return undefined;
  }
}

function toCase(id: string, t: IncrementalTest): ConformanceCase | undefined {
  const o = t.original;
  if (o.typeEnv.length > 0 || Object.keys(o.bindings).length > 0) return undefined;
  if (o.disableCheck || o.disableMacros || o.checkOnly || o.container !== '') return undefined;
  const expr = o.expr;
  if (MESSAGE_TYPES.test(expr)) return undefined;
  const m = o.resultMatcher;
  if (m.case === undefined) return { id, expr, filter: expr, expectMatch: true };
  if (m.case === 'evalError' || m.case === 'anyEvalErrors') {
    return { id, expr, filter: `size([${expr}]) == 1`, expectMatch: false };
  }
  const value =
    m.case === 'value' ? m.value : m.case === 'typedResult' ? m.value.result : undefined;
  if (value === undefined) return undefined;
  if (value.kind.case === 'boolValue') {
    return { id, expr, filter: value.kind.value ? expr : `!(${expr})`, expectMatch: true };
  }
  if (value.kind.case === 'doubleValue' && Number.isNaN(value.kind.value)) {
    return { id, expr, filter: `(${expr}) != (${expr})`, expectMatch: true };
  }
  const literal = celLiteral(value);
  if (literal === undefined) return undefined;
  return { id, expr, filter: `(${expr}) == ${literal}`, expectMatch: true };
}

/** Every case of the slice, in suite order. */
export function conformanceCases(): ConformanceCase[] {
  const cases: ConformanceCase[] = [];
  const walk = (suite: IncrementalTestSuite, prefix: string): void => {
    for (const t of suite.tests) {
      const c = toCase(`${prefix}/${t.name}`, t);
      if (c !== undefined) cases.push(c);
    }
    for (const s of suite.suites) walk(s, `${prefix}/${s.name}`);
  };
  for (const file of getConformanceSuite().suites) {
    if ((SLICE_SECTIONS as readonly string[]).includes(file.name)) walk(file, file.name);
  }
  return cases;
}

export type Outcome = 'pass' | 'fail' | 'rejected' | 'crash';

/** One case through compileFilter: pass, wrong answer, rejected at compile time, or a throw. */
export function runCase(c: ConformanceCase, generated: boolean): Outcome {
  let matches: (e: typeof EVENT) => boolean;
  try {
    matches = compileFilter(TYPE, c.filter, { generated }).matches;
  } catch (err) {
    if (!(err instanceof FilterError)) return 'crash';
    return c.expectMatch ? 'rejected' : 'pass';
  }
  try {
    return matches(EVENT) === c.expectMatch ? 'pass' : 'fail';
  } catch {
    return 'crash';
  }
}

export interface ConformanceResult {
  total: number;
  passed: number;
  /** Cases whose filter compile-js.ts translates (the rest run on cel-js even when generated). */
  generated: number;
  failures: { id: string; filter: string; outcome: Outcome }[];
  bySection: Map<string, { total: number; passed: number }>;
}

export function runConformance(generated: boolean): ConformanceResult {
  const result: ConformanceResult = {
    total: 0,
    passed: 0,
    generated: 0,
    failures: [],
    bySection: new Map(),
  };
  for (const c of conformanceCases()) {
    const outcome = runCase(c, generated);
    const section = c.id.slice(0, c.id.indexOf('/'));
    const s = result.bySection.get(section) ?? { total: 0, passed: 0 };
    result.bySection.set(section, s);
    result.total++;
    s.total++;
    if (jsFilter(TYPE, c.filter) !== undefined) result.generated++;
    if (outcome === 'pass') {
      result.passed++;
      s.passed++;
    } else {
      result.failures.push({ id: c.id, filter: c.filter, outcome });
    }
  }
  return result;
}

if (import.meta.main) {
  for (const generated of [true, false]) {
    const r = runConformance(generated);
    const path = generated ? 'compiled JS' : 'library';
    console.log(`${path}: ${r.passed}/${r.total} (${r.generated} translatable to JS)`);
    for (const [name, s] of r.bySection) console.log(`  ${name}: ${s.passed}/${s.total}`);
    if (process.argv.includes('--failures')) {
      for (const f of r.failures) console.log(`  ${f.outcome}\t${f.id}\t${f.filter}`);
    }
  }
}
