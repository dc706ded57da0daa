import type { ASTNode } from '@marcbachmann/cel-js';
import { RE2JS } from 're2js';
import { FILTER_LIMITS } from './filter-limits.ts';

// CEL's `matches` is specified with RE2 semantics; cel-js implements it with JS RegExp, which
// backtracks (`(a+)+$` on a long string never returns). cel-js cannot replace a built-in
// overload, so a filter's evaluation AST has each `.matches(p)` call renamed to our method
// `re2Matches`, registered on that filter's own environment and backed by re2js (linear time).
// User expressions are parsed and type-checked against an environment without `re2Matches`,
// so users cannot call it by name. Literal patterns are compiled once, at filter compile time.

/** The method the evaluation AST calls instead of the built-in `matches`. */
export const RE2_METHOD = 're2Matches';

/** The signature `re2Matches` is registered with (same shape as the built-in `matches`). */
export const RE2_SIGNATURE = `string.${RE2_METHOD}(string): bool`;

/** The global form, for `matches(s, p)` (declared by filter-environment.ts). */
export const RE2_GLOBAL_SIGNATURE = `${RE2_METHOD}(string, string): bool`;

/** A `matches` call whose pattern is a string literal. */
export interface RegexLiteral {
  pattern: string;
  /** Offset of the pattern literal in the expression, for error positions. */
  offset: number;
}

// Dynamic patterns (not literals) are compiled at event time; this bounds what one filter keeps.
const MAX_DYNAMIC_PATTERNS = 64;

function isNode(v: unknown): v is ASTNode {
  return v !== null && typeof v === 'object' && typeof (v as ASTNode).op === 'string';
}

// Walks the tree as parsed (op/args): macro expansions reuse the user's nodes, so every
// `matches` the user wrote is reached.
function visit(v: unknown, fn: (node: ASTNode) => void): void {
  if (isNode(v)) {
    fn(v);
    visit(v.args, fn);
  } else if (Array.isArray(v)) {
    for (const item of v) visit(item, fn);
  }
}

/** A `matches` call, `s.matches(p)` or `matches(s, p)`, and its pattern argument. */
interface MatchesCall {
  node: ASTNode;
  pattern: ASTNode;
}

function matchesCalls(ast: ASTNode): MatchesCall[] {
  const calls: MatchesCall[] = [];
  visit(ast, (node) => {
    if (node.op === 'rcall' && node.args[0] === 'matches' && node.args[2].length === 1) {
      calls.push({ node, pattern: node.args[2][0] });
    } else if (node.op === 'call' && node.args[0] === 'matches' && node.args[1].length === 2) {
      calls.push({ node, pattern: node.args[1][1] });
    }
  });
  return calls;
}

/** The literal patterns of every `matches` call in a parsed expression. */
export function regexLiterals(ast: ASTNode): RegexLiteral[] {
  const out: RegexLiteral[] = [];
  for (const { pattern: arg } of matchesCalls(ast)) {
    if (arg.op === 'value' && typeof arg.args === 'string') {
      out.push({ pattern: arg.args, offset: arg.range.start });
    }
  }
  return out;
}

/** Points every `matches` call of an evaluation AST at `re2Matches` (before type-checking it). */
export function useRe2ForMatches(ast: ASTNode): void {
  for (const { node } of matchesCalls(ast)) (node.args as unknown as unknown[])[0] = RE2_METHOD;
}

/** Compiles a pattern with RE2 syntax; throws re2js's syntax error when it is invalid. */
export function compileRegex(pattern: string): RE2JS {
  return RE2JS.compile(pattern);
}

/**
 * The `re2Matches` implementation of one filter: unanchored search as CEL specifies, literal
 * patterns from `compiled`, other patterns compiled on first use (a bounded number are kept).
 */
export function re2Matcher(
  compiled: ReadonlyMap<string, RE2JS>,
): (s: string, p: string) => boolean {
  const cache = new Map<string, RE2JS | null>(compiled);
  const limit = compiled.size + MAX_DYNAMIC_PATTERNS;
  return (s, p) => {
    let re = cache.get(p);
    if (re === undefined) {
      // A dynamic pattern gets the bounds of a literal one; one beyond them (null) never matches.
      re = p.length > FILTER_LIMITS.maxLength ? null : RE2JS.compile(p);
      if (re !== null && re.programSize() > FILTER_LIMITS.maxRegexProgramSize) re = null;
      if (cache.size < limit) cache.set(p, re);
    }
    if (re === null) throw new Error('matches: the pattern is beyond the filter limits');
    return re.test(s);
  };
}
