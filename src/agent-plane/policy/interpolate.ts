import {
  type CompiledExpression,
  compileExpression,
  FilterError,
} from '../../data-plane/filter/index.ts';
import { fromCel, withValues } from './macros.ts';
import { PolicyError, type PolicyLocation } from './policy-error.ts';
import { type PolicyScope, policyEnvironment, unavailableMember } from './variables.ts';

// `${expression}` in an action's config strings (ngrok's CEL interpolation): each expression is
// compiled with the policy, the rest of the string kept as written. A value renders as text:
// strings as they are, numbers and bools in CEL's spelling, lists and maps as JSON; one whose
// evaluation fails renders as ''.

/** A config string, ready to render per request. */
export interface Template {
  /** The text when it has no `${…}`. */
  readonly constant: string | undefined;
  render(values: unknown): string;
}

type Part = string | CompiledExpression;

/** Where a template's error is reported (its action's location plus the field). */
export type TemplateWhere = PolicyLocation;

/** Where an expression sits: the text it is part of, its offset there, the traffic it reads. */
export interface ExpressionAt {
  text?: string;
  offset?: number;
  scope?: PolicyScope;
}

function lineColumn(text: string, offset: number) {
  const before = text.slice(0, offset).split('\n');
  return { line: before.length, column: before[before.length - 1].length + 1 };
}

/** The offset of the `}` closing the expression starting at `from`, skipping quoted strings. */
function closingBrace(text: string, from: number): number {
  let depth = 0;
  let quote: string | undefined;
  for (let i = from; i < text.length; i++) {
    const c = text[i];
    if (quote !== undefined) {
      if (c === '\\') i++;
      else if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '{') depth++;
    else if (c === '}') {
      if (depth === 0) return i;
      depth--;
    }
  }
  return -1;
}

/** Compiles one expression of the policy, its errors placed at `offset` within `text`. */
export function compilePolicyExpression(
  expression: string,
  expect: 'bool' | 'any',
  where: PolicyLocation,
  { text = expression, offset = 0, scope = 'http' }: ExpressionAt = {},
): CompiledExpression {
  try {
    const compiled = compileExpression(policyEnvironment(scope), expression, { expect });
    return expect === 'any' ? withDirectRead(compiled) : compiled;
  } catch (err) {
    if (!(err instanceof FilterError)) throw err;
    const at = offset + (err.position?.offset ?? 0);
    // `conn.client_ip.categories` fails as "cannot index type 'string'": say why instead.
    const member = /Cannot index type 'string'/.test(err.message)
      ? unavailableMember(expression)
      : undefined;
    const what =
      member ??
      err.message.replace(/^traffic_policy: /, '').replace(/ at (line \d+, )?column \d+/, '');
    throw new PolicyError('invalid_expression', what, {
      ...where,
      position: lineColumn(text, at),
    });
  }
}

/** A dotted variable name alone (`req.url.path`, `actions.ngrok.basic_auth.credentials.username`). */
const VARIABLE_PATH = /^\s*([A-Za-z_][A-Za-z0-9_]*(?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)+)\s*$/;

/**
 * An interpolated expression that only names a variable, read straight from the values when it
 * holds a string: what CEL gives for a string (a declared string leaf or a dyn value), without
 * building the evaluator's context of every variable, the most of a request's policy cost. Any
 * other value (absent, a number, a group) takes the evaluator, which gives the same answers.
 */
function withDirectRead(compiled: CompiledExpression): CompiledExpression {
  const match = VARIABLE_PATH.exec(compiled.expression);
  if (match === null) return compiled;
  const path = match[1].split('.').map((p) => p.trim());
  const read = (values: unknown): unknown => {
    let v = values;
    for (const key of path) {
      if (v === null || typeof v !== 'object' || !Object.hasOwn(v, key)) return undefined;
      v = (v as Record<string, unknown>)[key];
    }
    return v;
  };
  return Object.freeze({
    ...compiled,
    evaluate: (values: unknown) => {
      const v = read(values);
      return typeof v === 'string' ? v : compiled.evaluate(values);
    },
  });
}

/** Compiles a config string's `${…}` parts; throws PolicyError at the first bad one. */
export function compileTemplate(
  text: string,
  where: TemplateWhere,
  scope: PolicyScope = 'http',
): Template {
  const parts: Part[] = [];
  let i = 0;
  while (i < text.length) {
    const start = text.indexOf('${', i);
    if (start < 0) {
      parts.push(text.slice(i));
      break;
    }
    if (start > i) parts.push(text.slice(i, start));
    const end = closingBrace(text, start + 2);
    if (end < 0) {
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the policy's own syntax
      throw new PolicyError('invalid_expression', "'${' is not closed by '}'", {
        ...where,
        position: lineColumn(text, start),
      });
    }
    const expression = text.slice(start + 2, end);
    parts.push(
      compilePolicyExpression(expression, 'any', where, { text, offset: start + 2, scope }),
    );
    i = end + 1;
  }
  if (parts.every((p) => typeof p === 'string')) {
    const constant = parts.join('');
    return { constant, render: () => constant };
  }
  return {
    constant: undefined,
    render: (values) =>
      parts.map((p) => (typeof p === 'string' ? p : renderValue(p, values))).join(''),
  };
}

/** The value of an interpolated expression (not rendered as text), for typed fields. */
export function evaluateValue(expression: CompiledExpression, values: unknown): unknown {
  try {
    return withValues(values, expression.evaluate);
  } catch {
    return undefined;
  }
}

function renderValue(expression: CompiledExpression, values: unknown): string {
  const v = evaluateValue(expression, values);
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'bigint' || typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (v instanceof Date) return v.toISOString();
  return JSON.stringify(fromCel(v));
}
