import type { ASTNode } from '@marcbachmann/cel-js';
import type { RE2JS } from 're2js';
import { isTrafficType, type TrafficEventType } from '../../catalogue/index.ts';
import type { EventJson } from '../wire-json/to-json.ts';
import { intLiteralOutOfRange, patchEvaluation } from './cel-semantics.ts';
import { compileToJs } from './compile-js.ts';
import { filterError, fromCelError, unknownField } from './filter-diagnostics.ts';
import { type FilterEnvironment, filterEnvironment } from './filter-environment.ts';
import { FilterError } from './filter-error.ts';
import { FILTER_LIMITS } from './filter-limits.ts';
import {
  compileRegex,
  RE2_GLOBAL_SIGNATURE,
  RE2_SIGNATURE,
  re2Matcher,
  regexLiterals,
  useRe2ForMatches,
} from './re2-matches.ts';

/** A subscription's CEL filter, checked once and evaluated per event. */
export interface CompiledFilter {
  readonly type: TrafficEventType;
  /** The expression as given ('' for the match-all filter). */
  readonly expression: string;
  /**
   * True when the event passes. Takes the event's JSON payload (trafficToJson's output, or any
   * object holding at least the filterable groups). An evaluation error (a dynamic pattern that
   * is not a valid regex, an integer overflow) counts as "does not match".
   */
  matches(event: EventJson): boolean;
  /**
   * True when an evaluation costs less than a cache lookup: generated JS with no regex
   * (cached-filter.ts then leaves the filter as it is). Absent means it may cost more.
   */
  readonly cheap?: boolean;
}

/** How compileFilter runs an accepted filter (the answers are the same either way). */
export interface CompileFilterOptions {
  /**
   * False keeps the cel-js evaluator even for filters compile-js.ts translates: the conformance
   * and property tests compare the two paths through this one API.
   */
  readonly generated?: boolean;
}

/**
 * Compiles a filter for a traffic kind, or throws FilterError explaining why it cannot be
 * accepted. A blank expression means "no filter" and matches every event.
 */
export function compileFilter(
  type: string,
  expression: string,
  options: CompileFilterOptions = {},
): CompiledFilter {
  if (!isTrafficType(type)) {
    throw new FilterError(
      'unsupported_event_type',
      `filter: event type '${type}' does not accept filters; only traffic events do`,
      [],
    );
  }
  const fe = filterEnvironment(type);
  if (expression.length > FILTER_LIMITS.maxLength) {
    throw filterError(
      fe,
      expression,
      'too_long',
      `expression is ${expression.length} characters long; the limit is ${FILTER_LIMITS.maxLength}`,
    );
  }
  if (expression.trim() === '') {
    return { type, expression: '', matches: () => true, cheap: true };
  }

  // 1. Parse and type-check against the declarations alone: every user-facing error comes from here.
  let checked: ReturnType<typeof fe.env.parse>;
  try {
    checked = fe.env.parse(expression);
  } catch (err) {
    throw fromCelError(fe, expression, err);
  }
  const outOfRange = intLiteralOutOfRange(checked.ast);
  if (outOfRange !== undefined) {
    throw filterError(
      fe,
      expression,
      'syntax',
      'syntax error: integer literal out of range (int is 64-bit: -9223372036854775808 to 9223372036854775807)',
      outOfRange,
    );
  }
  const nested = nestedComprehension(checked.ast, FILTER_LIMITS.maxComprehensionDepth);
  if (nested !== undefined) {
    throw filterError(
      fe,
      expression,
      'too_complex',
      `expression is too complex (comprehensions such as exists, all, map, filter and cel.bind nest at most ${FILTER_LIMITS.maxComprehensionDepth} deep, chained ones included)`,
      nested,
    );
  }
  const result = checked.check();
  if (!result.valid) throw fromCelError(fe, expression, result.error, checked.ast);
  const undeclared = undeclaredHasTarget(fe, checked.ast);
  if (undeclared !== undefined) {
    throw unknownField(fe, expression, undeclared.written, undeclared.offset);
  }
  if (result.type !== 'bool') {
    throw filterError(
      fe,
      expression,
      'not_bool',
      `expression must evaluate to bool, got ${result.type}`,
      0,
    );
  }

  // 2. Literal regexes are compiled now, so an invalid one is rejected here, not per event.
  const regexes = new Map<string, RE2JS>();
  for (const { pattern, offset } of regexLiterals(checked.ast)) {
    let regex: RE2JS;
    try {
      regex = compileRegex(pattern);
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      throw filterError(
        fe,
        expression,
        'invalid_regex',
        `invalid regular expression: ${why}`,
        offset,
      );
    }
    if (regex.programSize() > FILTER_LIMITS.maxRegexProgramSize) {
      throw filterError(
        fe,
        expression,
        'too_complex',
        `regular expression is too large (${regex.programSize()} RE2 instructions; the limit is ${FILTER_LIMITS.maxRegexProgramSize})`,
        offset,
      );
    }
    regexes.set(pattern, regex);
  }

  // 3. The evaluation copy: `matches` rerouted to RE2, in this filter's own environment.
  const matcher = re2Matcher(regexes);
  const env = fe.env
    .clone()
    .registerFunction(RE2_SIGNATURE, matcher)
    .registerFunction(RE2_GLOBAL_SIGNATURE, matcher);
  const program = env.parse(expression);
  useRe2ForMatches(program.ast);
  const recheck = program.check();
  if (!recheck.valid) throw recheck.error; // cannot happen: same declarations, same types
  patchEvaluation(program.ast);

  // 4. Filters in the subset compile-js.ts translates run as generated JS (same answers, no
  //    per-event context or tree walk); the others keep the evaluator.
  const toContext = fe.toContext;
  const evaluate = (event: EventJson): boolean => {
    try {
      return program(toContext(event)) === true;
    } catch {
      return false;
    }
  };
  const generated =
    options.generated === false ? undefined : compileToJs(checked.ast, { type, regexes });
  const matches = generated ?? evaluate;
  const cheap = generated !== undefined && regexes.size === 0;
  return Object.freeze({ type, expression, matches, cheap });
}

/**
 * The first has() whose field the environment does not declare, or undefined. cel-js checks only
 * the variable of has(a.b.c), so has(conn.nope) would compile; CEL rejects it, and a filter may
 * not even ask whether a non-filterable field is set.
 */
function undeclaredHasTarget(
  fe: FilterEnvironment,
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
      if (root?.op === 'id' && fe.variables.includes(root.args as string)) {
        const path = (root.args === 'ev' ? names : [root.args as string, ...names]).join('.');
        const declared = fe.allowedFields.some(
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
