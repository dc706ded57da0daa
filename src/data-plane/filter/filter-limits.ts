/** Structural limits: a filter is a short predicate, not a program. */
export const FILTER_LIMITS = Object.freeze({
  maxLength: 2048,
  /**
   * cel-spec requires 32 nested parentheses, which cel-js counts as 33 levels; one more keeps
   * them valid inside a parenthesized comparison (`((…)) == 7`, as the conformance test writes).
   */
  maxDepth: 34,
  maxAstNodes: 512,
  maxListElements: 256,
  /**
   * Comprehensions (all, exists, exists_one, map, filter, cel.bind) inside one another: their
   * costs multiply, so a few hundred characters of nested or chained ones ran for seconds per
   * event and then exhausted the heap. One level keeps a filter's cost linear in its size.
   */
  maxComprehensionDepth: 1,
  /** RE2 instructions of one `matches` pattern: evaluation time is this times the input length. */
  maxRegexProgramSize: 4096,
});
