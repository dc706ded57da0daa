import { isTrafficType, type TrafficEventType } from '../../catalogue/index.ts';
import type { EventJson } from '../wire-json/to-json.ts';
import { compileExpression } from './compile-expression.ts';
import { filterEnvironment } from './filter-environment.ts';
import { FilterError } from './filter-error.ts';
import { FILTER_LIMITS } from './filter-limits.ts';

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
 * accepted. A blank expression means "no filter" and matches every event. The checks and the
 * choice between generated JS and the evaluator are compile-expression.ts's.
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
  if (expression.trim() === '' && expression.length <= FILTER_LIMITS.maxLength) {
    return { type, expression: '', matches: () => true, cheap: true };
  }
  const compiled = compileExpression(fe, expression, {
    expect: 'bool',
    generated: options.generated,
  });
  return Object.freeze({ type, expression, matches: compiled.matches, cheap: compiled.cheap });
}
