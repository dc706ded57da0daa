import type { ASTNode } from '@marcbachmann/cel-js';
import type { RE2JS } from 're2js';
import { type CelEnvironment, STRING_GROUP_LEAF } from './cel-environment.ts';
import { intLiteralOutOfRange, patchEvaluation } from './cel-semantics.ts';
import { compileToJs } from './compile-js.ts';
import { filterError, fromCelError, unknownField } from './filter-diagnostics.ts';
import { FILTER_LIMITS } from './filter-limits.ts';
import {
  compileRegex,
  RE2_GLOBAL_SIGNATURE,
  RE2_SIGNATURE,
  re2Matcher,
  regexLiterals,
  useRe2ForMatches,
} from './re2-matches.ts';

// One CEL expression compiled against a CelEnvironment (a filter's, a policy's): every check
// runs here, once, and throws a FilterError that says what and where; what is returned never
// fails at evaluation (an evaluation error is a value: `false` for a predicate).

/** What the expression must evaluate to: a predicate, or any value (a policy's `${…}`). */
export type Expectation = 'bool' | 'any';

/** A checked expression, ready to evaluate per event or request. */
export interface CompiledExpression {
  readonly expression: string;
  /** The checked result type (`bool`, `string`, `dyn`, …). */
  readonly type: string;
  /**
   * Evaluates over a JSON object shaped as the environment's leaves. Throws what the evaluation
   * throws (an integer overflow, a missing map key): callers decide what an error means.
   */
  evaluate(values: unknown): unknown;
  /** For a bool expression: true when it holds; an evaluation error is false. */
  matches(values: unknown): boolean;
  /** True when an evaluation costs less than a cache lookup (generated JS, no regex). */
  readonly cheap: boolean;
}

export interface CompileExpressionOptions {
  expect: Expectation;
  /** False keeps the cel-js evaluator even where compile-js.ts translates (tests compare). */
  generated?: boolean;
}

/** Compiles one non-blank expression, or throws FilterError explaining why it is refused. */
export function compileExpression(
  ce: CelEnvironment,
  expression: string,
  options: CompileExpressionOptions,
): CompiledExpression {
  if (expression.length > FILTER_LIMITS.maxLength) {
    throw filterError(
      ce,
      expression,
      'too_long',
      `expression is ${expression.length} characters long; the limit is ${FILTER_LIMITS.maxLength}`,
    );
  }
  // 1. Parse and type-check against the declarations alone: every user-facing error comes from here.
  let checked: ReturnType<typeof ce.env.parse>;
  try {
    checked = ce.env.parse(expression);
  } catch (err) {
    throw fromCelError(ce, expression, err);
  }
  const outOfRange = intLiteralOutOfRange(checked.ast);
  if (outOfRange !== undefined) {
    throw filterError(
      ce,
      expression,
      'syntax',
      'syntax error: integer literal out of range (int is 64-bit: -9223372036854775808 to 9223372036854775807)',
      outOfRange,
    );
  }
  const nested = nestedComprehension(checked.ast, FILTER_LIMITS.maxComprehensionDepth);
  if (nested !== undefined) {
    throw filterError(
      ce,
      expression,
      'too_complex',
      `expression is too complex (comprehensions such as exists, all, map, filter and cel.bind nest at most ${FILTER_LIMITS.maxComprehensionDepth} deep, chained ones included)`,
      nested,
    );
  }
  readStringGroups(ce, checked.ast);
  const result = checked.check();
  if (!result.valid) throw fromCelError(ce, expression, result.error, checked.ast);
  const undeclared = undeclaredHasTarget(ce, checked.ast);
  if (undeclared !== undefined) {
    throw unknownField(ce, expression, undeclared.written, undeclared.offset);
  }
  if (options.expect === 'bool' && result.type !== 'bool') {
    throw filterError(
      ce,
      expression,
      'not_bool',
      `expression must evaluate to bool, got ${result.type}`,
      0,
    );
  }

  // 2. Literal regexes are compiled now, so an invalid one is rejected here, not per event.
  const regexes = literalRegexes(ce, expression, checked.ast);

  // 3. The evaluation copy: `matches` rerouted to RE2, in this expression's own environment.
  const matcher = re2Matcher(regexes);
  const env = ce.env
    .clone()
    .registerFunction(RE2_SIGNATURE, matcher)
    .registerFunction(RE2_GLOBAL_SIGNATURE, matcher);
  const program = env.parse(expression);
  useRe2ForMatches(program.ast);
  readStringGroups(ce, program.ast);
  const recheck = program.check();
  if (!recheck.valid) throw recheck.error; // cannot happen: same declarations, same types
  patchEvaluation(program.ast);

  // 4. Predicates in the subset compile-js.ts translates run as generated JS (same answers, no
  //    per-evaluation context or tree walk); the others keep the evaluator.
  const toContext = ce.toContext;
  const evaluate = (values: unknown): unknown => program(toContext(values));
  const evaluated = (values: unknown): boolean => {
    try {
      return evaluate(values) === true;
    } catch {
      return false;
    }
  };
  const generated =
    options.generated === false || result.type !== 'bool'
      ? undefined
      : compileToJs(checked.ast, { environment: ce, regexes });
  const matches = generated ?? evaluated;
  return Object.freeze({
    expression,
    type: result.type ?? 'dyn',
    evaluate: generated ?? evaluate,
    matches,
    cheap: generated !== undefined && regexes.size === 0,
  });
}

function literalRegexes(ce: CelEnvironment, expression: string, ast: ASTNode) {
  const regexes = new Map<string, RE2JS>();
  for (const { pattern, offset } of regexLiterals(ast)) {
    let regex: RE2JS;
    try {
      regex = compileRegex(pattern);
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      throw filterError(
        ce,
        expression,
        'invalid_regex',
        `invalid regular expression: ${why}`,
        offset,
      );
    }
    if (regex.programSize() > FILTER_LIMITS.maxRegexProgramSize) {
      throw filterError(
        ce,
        expression,
        'too_complex',
        `regular expression is too large (${regex.programSize()} RE2 instructions; the limit is ${FILTER_LIMITS.maxRegexProgramSize})`,
        offset,
      );
    }
    regexes.set(pattern, regex);
  }
  return regexes;
}

/** cel-js's ASTNode.clone (not in its type declarations). */
interface Cloneable {
  clone(op: { name: string; check: unknown; evaluate: unknown }, args: unknown): ASTNode;
}

/** The dotted name of a plain selection chain on a variable (`req.url`), or undefined. */
function selectName(node: ASTNode): string | undefined {
  if (node.op === 'id') return node.args as string;
  if (node.op !== '.') return undefined;
  const left = selectName(node.args[0] as ASTNode);
  return left === undefined ? undefined : `${left}.${node.args[1] as string}`;
}

/**
 * A string group used as a value (`req.url.contains('x')`, not `req.url.path`) is read as its
 * `_string` leaf: the parsed AST is rewritten in place, before it is type-checked.
 */
function readStringGroups(ce: CelEnvironment, ast: ASTNode): void {
  if (ce.stringGroups.size === 0) return;
  const walk = (v: unknown, selectedFrom: boolean): void => {
    if (Array.isArray(v)) {
      for (const item of v) walk(item, false);
      return;
    }
    if (v === null || typeof v !== 'object' || typeof (v as ASTNode).op !== 'string') return;
    const node = v as ASTNode;
    if (node.op === '.') {
      const name = selectName(node);
      if (name !== undefined && ce.stringGroups.has(name) && !selectedFrom) {
        // A copy made by the node itself (cel-js keeps its operator in a private field), then
        // the node becomes `copy._string`.
        const { meta } = node as unknown as { meta: { check: unknown; evaluate: unknown } };
        const inner = (node as unknown as Cloneable).clone(
          { name: node.op, check: meta.check, evaluate: meta.evaluate },
          node.args,
        );
        (node as { args: unknown }).args = [inner, STRING_GROUP_LEAF];
        return;
      }
      walk(node.args[0], true);
      return;
    }
    walk(node.args, false);
  };
  walk(ast, false);
}

/**
 * The first has() whose field the environment does not declare, or undefined. cel-js checks only
 * the variable of has(a.b.c), so has(conn.nope) would compile; CEL rejects it, and a filter may
 * not even ask whether a non-filterable field is set.
 */
function undeclaredHasTarget(
  ce: CelEnvironment,
  ast: ASTNode,
): { written: string; offset: number } | undefined {
  let found: { written: string; offset: number } | undefined;
  const visit = (v: unknown): void => {
    if (found !== undefined) return;
    if (Array.isArray(v)) {
      for (const item of v) visit(item);
      return;
    }
    if (v === null || typeof v !== 'object' || typeof (v as ASTNode).op !== 'string') return;
    const node = v as ASTNode;
    if (node.op === 'call' && node.args[0] === 'has') {
      const names: string[] = [];
      let target: unknown = (node.args[1] as ASTNode[])[0];
      while (isSelect(target)) {
        names.unshift(target.args[1] as string);
        target = target.args[0];
      }
      const root = target as ASTNode;
      if (root?.op === 'id' && ce.variables.includes(root.args as string)) {
        const alias = root.args === ce.rootAlias;
        const path = (alias ? names : [root.args as string, ...names]).join('.');
        const declared = ce.allowedFields.some(
          (f) => f === path || path.startsWith(`${f}.`) || f.startsWith(`${path}.`),
        );
        if (!declared) {
          found = { written: [root.args, ...names].join('.'), offset: root.range.start };
        }
      }
    }
    visit(node.args);
  };
  visit(ast);
  return found;
}

function isSelect(v: unknown): v is ASTNode & { args: [ASTNode, string] } {
  return v !== null && typeof v === 'object' && (v as ASTNode).op === '.';
}

/** The calls that iterate or bind: each runs its body once per element (or per use). */
const COMPREHENSIONS = new Set(['all', 'exists', 'exists_one', 'map', 'filter', 'bind']);

/**
 * The offset of the first comprehension that sits inside more than `limit` others (in their
 * receiver or arguments), or undefined. The parser's depth limit bounds the recursion.
 */
function nestedComprehension(ast: ASTNode, limit: number): number | undefined {
  const walk = (v: unknown, depth: number): number | undefined => {
    if (Array.isArray(v)) {
      for (const item of v) {
        const found = walk(item, depth);
        if (found !== undefined) return found;
      }
      return undefined;
    }
    if (v === null || typeof v !== 'object' || typeof (v as ASTNode).op !== 'string') {
      return undefined;
    }
    const node = v as ASTNode;
    let inner = depth;
    if (node.op === 'rcall' && COMPREHENSIONS.has(node.args[0] as string)) {
      inner = depth + 1;
      if (inner > limit) return node.range.start;
    }
    return walk(node.args, inner);
  };
  return walk(ast, 0);
}
