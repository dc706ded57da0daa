import type { ASTNode } from '@marcbachmann/cel-js';
import type { RE2JS } from 're2js';
import { isTrafficType, type TrafficEventType } from '../../catalogue/index.ts';
import type { EventJson } from '../wire-json/to-json.ts';
import type { CelEnvironment } from './cel-environment.ts';
import { intLiteralOutOfRange } from './cel-semantics.ts';
import { filterEnvironment } from './filter-environment.ts';
import { FILTER_LIMITS } from './filter-limits.ts';
import { generate } from './generated-code.ts';
import { groupTree, reads } from './js-reads.ts';
import { type Leaf, Translator, Unsupported } from './js-translator.ts';
import { compileRegex, regexLiterals } from './re2-matches.ts';

// A filter's checked CEL AST translated to one generated JS function, when every node is in the
// subset filters over the Filterable leaves use: literals, field reads, comparisons, &&, ||, !,
// ?:, `in` a list literal, size(), startsWith / endsWith / contains, `matches` (either form)
// with a literal pattern (through re2Matcher, as the evaluator runs it) and has() of a leaf.
// Anything else — arithmetic (it can overflow), conversions, other macros, has() of a group,
// maps, bytes, dyn, dynamic patterns — makes compileToJs return
// undefined and the caller keeps the cel-js evaluator. Per event this skips building the CEL
// context (BigInt per int) and the tree walk: the `npm run bench:filter` profile's 85 %.
//
// Same answers as the evaluator:
// - Values are read from the event JSON as toContext reads them: a missing or non-object group
//   reads as empty, a non-string string leaf as '', a non-bool bool leaf as false, an int leaf
//   that is not a number or bigint as 0, a non-integer number truncated (NaN as 0). An infinite
//   number in ANY filterable int leaf makes toContext throw, so the answer is false whatever the
//   expression reads; the generated code checks every int leaf for that.
// - Ints are JS numbers (bigint only for an int leaf holding a bigint, or a literal beyond 2^53):
//   int/uint equality is emitted as `==`, exact between number and bigint; `<` is exact between
//   them anyway. Only the comparisons the checker accepted are compiled, with their checked types:
//   == and != between equal types; < <= > >= between numbers of any kind (int/uint/double, as
//   cel-js's overloads compare them with JS `<`), or between two strings (by code point, as
//   cel-semantics.ts patches the evaluator to) or two bools. has() of a leaf: not its default.
// - No node of the subset can fail at evaluation time (total functions, literal patterns compiled
//   beforehand), so plain && / || agree with CEL's commutative error absorption. A throw that
//   cannot happen (a getter on the event, say) still answers false, as the evaluator's catch does.
//
// Generated source holds only fixed text, names and literals emitted by generated-code.ts, and
// indexes into the constants array `k` (bigint literals, sets, helpers). The translator is
// js-translator.ts, the prologue that reads the event js-reads.ts.

/** A compiled filter's predicate over the event's JSON payload. */
export type JsMatches = (event: EventJson) => boolean;

/** What compileToJs needs besides the checked AST. */
export interface CompileToJsOptions {
  /** The traffic kind the AST was checked for (its Filterable leaves are the readable fields). */
  readonly type?: TrafficEventType;
  /** Or the environment it was checked against (a policy's): its leaves are the readable ones. */
  readonly environment?: CelEnvironment;
  /**
   * Literal `matches` patterns already compiled (compileFilter's map, validated against the
   * limits). Patterns missing from it are compiled and checked here.
   */
  readonly regexes?: ReadonlyMap<string, RE2JS>;
}

/**
 * The checked AST of a filter (`parse(...)` then a valid `check()`, of type bool) as a generated
 * JS predicate, or undefined when a node is outside the supported subset (keep the evaluator).
 */
export function compileToJs(ast: ASTNode, options: CompileToJsOptions): JsMatches | undefined {
  const ce =
    options.environment ??
    (options.type === undefined ? undefined : filterEnvironment(options.type));
  if (ce === undefined) throw new Error('compileToJs: a type or an environment is required');
  const leaves = new Map<string, Leaf>();
  for (const f of ce.leaves) leaves.set(f.name, { name: f.name, path: f.path, kind: f.kind });
  const translator = new Translator(
    leaves,
    new Set(ce.variables),
    options.regexes ?? new Map<string, RE2JS>(),
    ce.rootAlias,
  );
  let source: string;
  try {
    const root = translator.emit(ast);
    if (root.type !== 'bool') return undefined;
    translator.finish();
    const temps = Array.from({ length: translator.temps }, (_, i) => `t${i}`);
    source = [
      `'use strict';`,
      `const none = Object.freeze({});`,
      `return function matches(e) {`,
      `  try {`,
      ...reads(groupTree(leaves.values()), translator.used).map((l) => `    ${l}`),
      ...(temps.length > 0 ? [`    let ${temps.join(', ')};`] : []),
      `    return ${root.code};`,
      `  } catch {`,
      `    return false;`,
      `  }`,
      `};`,
    ].join('\n');
  } catch (err) {
    if (err instanceof Unsupported) return undefined;
    throw err;
  }
  return generate<JsMatches>(['k'], source, [translator.constants]);
}

/**
 * The generated predicate of a filter, or undefined when compileFilter would reject it, it is
 * blank (match-all: compileFilter handles it) or it is outside the subset compileToJs supports.
 * Parsed and type-checked with the same environment compileFilter uses, so where it is defined it
 * answers as compileFilter(type, expression).matches does.
 */
export function jsFilter(type: string, expression: string): JsMatches | undefined {
  if (!isTrafficType(type)) return undefined;
  if (expression.length > FILTER_LIMITS.maxLength || expression.trim() === '') return undefined;
  const fe = filterEnvironment(type);
  let checked: ReturnType<typeof fe.env.parse>;
  try {
    checked = fe.env.parse(expression);
  } catch {
    return undefined;
  }
  if (intLiteralOutOfRange(checked.ast) !== undefined) return undefined;
  const result = checked.check();
  if (!result.valid || result.type !== 'bool') return undefined;
  // Literal patterns as compileFilter validates them; an invalid one means it rejects the filter.
  const regexes = new Map<string, RE2JS>();
  for (const { pattern } of regexLiterals(checked.ast)) {
    try {
      const re = compileRegex(pattern);
      if (re.programSize() > FILTER_LIMITS.maxRegexProgramSize) return undefined;
      regexes.set(pattern, re);
    } catch {
      return undefined;
    }
  }
  return compileToJs(checked.ast, { type, regexes });
}
