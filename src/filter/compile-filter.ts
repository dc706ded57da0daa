import type { RE2JS } from 're2js';
import { type EventJson, isTrafficType, type TrafficEventType } from '../catalogue/index.ts';
import { filterError, fromCelError } from './filter-diagnostics.ts';
import { FILTER_LIMITS, filterEnvironment } from './filter-environment.ts';
import { FilterError } from './filter-error.ts';
import {
  compileRegex,
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
}

/**
 * Compiles a filter for a traffic kind, or throws FilterError explaining why it cannot be
 * accepted. A blank expression means "no filter" and matches every event.
 */
export function compileFilter(type: string, expression: string): CompiledFilter {
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
  if (expression.trim() === '') return { type, expression: '', matches: () => true };

  // 1. Parse and type-check against the declarations alone: every user-facing error comes from here.
  let checked: ReturnType<typeof fe.env.parse>;
  try {
    checked = fe.env.parse(expression);
  } catch (err) {
    throw fromCelError(fe, expression, err);
  }
  const result = checked.check();
  if (!result.valid) throw fromCelError(fe, expression, result.error, checked.ast);
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
    try {
      regexes.set(pattern, compileRegex(pattern));
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
  }

  // 3. The evaluation copy: `matches` rerouted to RE2, in this filter's own environment.
  const env = fe.env.clone().registerFunction(RE2_SIGNATURE, re2Matcher(regexes));
  const program = env.parse(expression);
  useRe2ForMatches(program.ast);
  const recheck = program.check();
  if (!recheck.valid) throw recheck.error; // cannot happen: same declarations, same types

  const toContext = fe.toContext;
  return Object.freeze({
    type,
    expression,
    matches(event: EventJson): boolean {
      try {
        return program(toContext(event)) === true;
      } catch {
        return false;
      }
    },
  });
}
