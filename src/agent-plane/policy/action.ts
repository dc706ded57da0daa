import type { CompiledExpression } from '../../data-plane/filter/index.ts';
import type { Phase } from './document.ts';
import type { Exchange } from './exchange.ts';
import type { Template } from './interpolate.ts';

// What every action module declares: its ngrok type, the phases it runs in, its config's JSON
// Schema (unknown fields refused), and how a checked config becomes the function that runs it.
// A new action is one file in actions/ and one line in actions/index.ts.

/** What an action tells the phase: go on with the next action, or end the phase here. */
export type Outcome = 'continue' | 'stop';

/** A compiled action, run per connection or request. */
export type ActionRun = (x: Exchange) => Outcome | Promise<Outcome>;

/** A JSON Schema object (Ajv, draft 2020-12 subset). */
export type Schema = Record<string, unknown>;

/** What compile() may use: config strings with `${…}`, expressions, and refusals. */
export interface CompileContext {
  readonly phase: Phase;
  /** Compiles a config string's `${…}` parts (`field`: where it is, for errors). */
  template(text: string, field: string): Template;
  /** Compiles a CEL expression of the config (rate-limit's bucket_key). */
  expression(text: string, field: string): CompiledExpression;
  /** Refuses the config: the error names the action and `field`. */
  fail(field: string, message: string): never;
}

/** One action type. */
export interface ActionDefinition<C = never> {
  readonly type: string;
  readonly phases: readonly Phase[];
  /** The config's schema; `additionalProperties: false` at every level. */
  readonly schema: Schema;
  /** True when the action needs a config (ngrok's required fields). */
  readonly configRequired?: boolean;
  compile(config: C, ctx: CompileContext): ActionRun;
}

/** Declares an action (keeps its config type checked against compile's parameter). */
export function defineAction<C>(definition: ActionDefinition<C>): ActionDefinition<C> {
  return Object.freeze(definition);
}

/** Go-style durations as ngrok writes them (`30s`, `5m`, `1h30m`, `500ms`) in milliseconds. */
export function parseDuration(text: string): number | undefined {
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;
  let total = 0;
  let at = 0;
  if (text === '') return undefined;
  while (at < text.length) {
    re.lastIndex = at;
    const m = re.exec(text);
    if (m === null) return undefined;
    total += Number(m[1]) * units[m[2]];
    at = re.lastIndex;
  }
  return total;
}

/** `headers` objects' values: strings (templates). */
export const HEADER_MAP_SCHEMA: Schema = {
  type: 'object',
  maxProperties: 64,
  propertyNames: { pattern: "^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$" },
  additionalProperties: { type: 'string', maxLength: 8192 },
};
