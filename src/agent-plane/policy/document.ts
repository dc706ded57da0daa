import { LineCounter, parseDocument } from 'yaml';
import { PolicyError, type PolicyLocation } from './policy-error.ts';

// A Traffic Policy document in ngrok's format, YAML or JSON (JSON is YAML): its phases, each a
// list of rules `{name?, expressions?, actions: [{type, config?}]}`. This module checks the
// shape only; compile.ts checks expressions and each action's config.

/** The phases, in the order traffic meets them. */
export const PHASES = ['on_tcp_connect', 'on_http_request', 'on_http_response'] as const;
export type Phase = (typeof PHASES)[number];

/** The most a document may hold: it is read on every change and kept compiled per endpoint. */
export const POLICY_LIMITS = Object.freeze({
  maxBytes: 64 * 1024,
  maxRulesPerPhase: 64,
  maxActionsPerRule: 16,
  maxExpressionsPerRule: 16,
});

export interface ActionSpec {
  type: string;
  config?: Record<string, unknown>;
}

export interface RuleSpec {
  name?: string;
  expressions: string[];
  actions: ActionSpec[];
}

/** A document whose shape is valid; `lineOf` finds where a part starts in the text. */
export interface ParsedPolicy {
  phases: Partial<Record<Phase, RuleSpec[]>>;
  lineOf(path: readonly (string | number)[]): number | undefined;
}

const RULE_KEYS = new Set(['name', 'expressions', 'actions']);
const ACTION_KEYS = new Set(['type', 'config']);

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

/** Parses and shape-checks a document, or throws PolicyError saying where it is wrong. */
export function parsePolicy(text: string): ParsedPolicy {
  if (Buffer.byteLength(text) > POLICY_LIMITS.maxBytes) {
    throw new PolicyError('too_large', `the document is over ${POLICY_LIMITS.maxBytes} bytes`);
  }
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: false });
  const first = doc.errors[0];
  if (first !== undefined) {
    const { line, col } = lineCounter.linePos(first.pos[0]);
    throw new PolicyError('syntax', first.message.split('\n')[0], { line, column: col });
  }
  // Aliases are refused: a few of them expand into a document of any size.
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 0 }) ?? {};
  } catch {
    throw new PolicyError('invalid_document', 'YAML aliases (*name) are not accepted');
  }
  const lineOf = (path: readonly (string | number)[]) => {
    const node = doc.getIn(path, true) as { range?: [number, number, number] } | undefined;
    const start = node?.range?.[0];
    return start === undefined ? undefined : lineCounter.linePos(start).line;
  };
  if (!isObject(value)) {
    throw new PolicyError(
      'invalid_document',
      'a policy is an object of phases (on_http_request, …)',
    );
  }
  const phases: ParsedPolicy['phases'] = {};
  for (const [key, rules] of Object.entries(value)) {
    if (!(PHASES as readonly string[]).includes(key)) {
      throw new PolicyError(
        'invalid_document',
        `unknown phase '${key}'; the phases are ${PHASES.join(', ')}`,
        { line: lineOf([key]) },
      );
    }
    phases[key as Phase] = readRules(key as Phase, rules, lineOf);
  }
  return { phases, lineOf };
}

function readRules(phase: Phase, rules: unknown, lineOf: ParsedPolicy['lineOf']): RuleSpec[] {
  if (rules === null || rules === undefined) return [];
  if (!Array.isArray(rules)) {
    throw new PolicyError('invalid_document', 'a phase is a list of rules', {
      phase,
      line: lineOf([phase]),
    });
  }
  if (rules.length > POLICY_LIMITS.maxRulesPerPhase) {
    throw new PolicyError(
      'too_large',
      `${rules.length} rules; a phase holds at most ${POLICY_LIMITS.maxRulesPerPhase}`,
      { phase },
    );
  }
  return rules.map((rule, index) => readRule(phase, rule, index, lineOf));
}

function readRule(
  phase: Phase,
  rule: unknown,
  index: number,
  lineOf: ParsedPolicy['lineOf'],
): RuleSpec {
  const where = (extra: PolicyLocation = {}, path: (string | number)[] = []): PolicyLocation => ({
    phase,
    rule: { index, name: isObject(rule) && typeof rule.name === 'string' ? rule.name : undefined },
    line: lineOf([phase, index, ...path]),
    ...extra,
  });
  if (!isObject(rule)) throw new PolicyError('invalid_document', 'a rule is an object', where());
  for (const key of Object.keys(rule)) {
    if (!RULE_KEYS.has(key)) {
      throw new PolicyError(
        'invalid_document',
        `unknown field '${key}'; a rule has name, expressions and actions`,
        where({ field: key }, [key]),
      );
    }
  }
  if (rule.name !== undefined && typeof rule.name !== 'string') {
    throw new PolicyError(
      'invalid_document',
      'name must be a string',
      where({ field: 'name' }, ['name']),
    );
  }
  const expressions = rule.expressions ?? [];
  if (!Array.isArray(expressions) || expressions.some((e) => typeof e !== 'string')) {
    throw new PolicyError(
      'invalid_document',
      'expressions must be a list of strings (CEL expressions, ANDed)',
      where({ field: 'expressions' }, ['expressions']),
    );
  }
  if (expressions.length > POLICY_LIMITS.maxExpressionsPerRule) {
    throw new PolicyError(
      'too_large',
      `a rule holds at most ${POLICY_LIMITS.maxExpressionsPerRule} expressions`,
      where({ field: 'expressions' }, ['expressions']),
    );
  }
  const actions = rule.actions;
  if (!Array.isArray(actions) || actions.length === 0) {
    throw new PolicyError(
      'invalid_document',
      'actions is required: a non-empty list of {type, config}',
      where({ field: 'actions' }, rule.actions === undefined ? [] : ['actions']),
    );
  }
  if (actions.length > POLICY_LIMITS.maxActionsPerRule) {
    throw new PolicyError(
      'too_large',
      `a rule holds at most ${POLICY_LIMITS.maxActionsPerRule} actions`,
      where({ field: 'actions' }, ['actions']),
    );
  }
  return {
    name: rule.name as string | undefined,
    expressions: expressions as string[],
    actions: actions.map((action, i) => readAction(action, i, where)),
  };
}

function readAction(
  action: unknown,
  index: number,
  where: (extra?: PolicyLocation, path?: (string | number)[]) => PolicyLocation,
): ActionSpec {
  const at = (field?: string, path: (string | number)[] = []) =>
    where(
      {
        action: {
          index,
          type: isObject(action) && typeof action.type === 'string' ? action.type : undefined,
        },
        ...(field === undefined ? {} : { field }),
      },
      ['actions', index, ...path],
    );
  if (!isObject(action)) throw new PolicyError('invalid_document', 'an action is an object', at());
  for (const key of Object.keys(action)) {
    if (!ACTION_KEYS.has(key)) {
      throw new PolicyError(
        'invalid_document',
        `unknown field '${key}'; an action has type and config`,
        at(key, [key]),
      );
    }
  }
  if (typeof action.type !== 'string' || action.type === '') {
    throw new PolicyError('invalid_document', 'type is required (a string)', at('type'));
  }
  const config = action.config ?? undefined;
  if (config !== undefined && !isObject(config)) {
    throw new PolicyError('invalid_document', 'config must be an object', at('config', ['config']));
  }
  return { type: action.type, ...(config === undefined ? {} : { config }) };
}
