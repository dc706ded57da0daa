import { createRequire } from 'node:module';
import type { Ajv2020, ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import type { CompiledExpression } from '../../data-plane/filter/index.ts';
import type { ActionDefinition, ActionRun, CompileContext } from './action.ts';
import { ACTIONS } from './actions/index.ts';
import { type ActionSpec, PHASES, type Phase, parsePolicy, type RuleSpec } from './document.ts';
import { compilePolicyExpression, compileTemplate } from './interpolate.ts';
import { PolicyError, type PolicyLocation } from './policy-error.ts';
import type { PolicyScope } from './variables.ts';

// A policy document compiled once per version: every expression type-checked and compiled (to
// generated JS where it can be), every action's config checked against its schema and turned
// into the function that runs it. Whatever is wrong is refused here, with where.

export interface CompiledAction {
  readonly type: string;
  readonly index: number;
  readonly run: ActionRun;
}

export interface CompiledRule {
  readonly index: number;
  readonly name: string | undefined;
  /** ANDed; none matches everything. */
  readonly expressions: readonly CompiledExpression[];
  readonly actions: readonly CompiledAction[];
}

/** A policy ready to run: its rules by phase. */
export interface CompiledPolicy {
  readonly text: string;
  readonly phases: Readonly<Record<Phase, readonly CompiledRule[]>>;
  /** The action types it uses (`basic-auth`, …). */
  readonly types: ReadonlySet<string>;
}

// Ajv is loaded on the first policy compiled, as the API's body checks load it (start-up time).
let ajv: Ajv2020 | undefined;
const validators = new Map<string, ValidateFunction>();

function validatorOf(definition: ActionDefinition<unknown>): ValidateFunction {
  let v = validators.get(definition.type);
  if (v === undefined) {
    ajv ??= new (createRequire(import.meta.url)('ajv/dist/2020.js').Ajv2020 as typeof Ajv2020)({
      allErrors: false,
      strict: true,
    });
    v = ajv.compile(definition.schema);
    validators.set(definition.type, v);
  }
  return v;
}

/** An Ajv error as a field path and a sentence. */
function describeAjv(e: ErrorObject): { field: string; what: string } {
  const path = e.instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));
  const field = ['config', ...path].join('.');
  const params = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'additionalProperties':
      return { field, what: `unknown field '${String(params.additionalProperty)}'` };
    case 'required':
      return { field, what: `'${String(params.missingProperty)}' is required` };
    case 'enum':
      return {
        field,
        what: `must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`,
      };
    default:
      return { field, what: e.message ?? e.keyword };
  }
}

/** What an endpoint speaks; its phases and variables follow from it. */
export type EndpointProtocol = 'http' | 'https' | 'tcp';

/** ngrok's phases per protocol: a TCP endpoint has no HTTP request, so only on_tcp_connect. */
const PROTOCOL_PHASES: Readonly<Record<EndpointProtocol, readonly Phase[]>> = {
  http: PHASES,
  https: PHASES,
  tcp: ['on_tcp_connect'],
};

/**
 * Compiles a document for an endpoint of `protocol`, or throws PolicyError naming the phase,
 * rule, action and position.
 */
export function compilePolicy(text: string, protocol: EndpointProtocol = 'https'): CompiledPolicy {
  const parsed = parsePolicy(text);
  const allowed = PROTOCOL_PHASES[protocol];
  for (const phase of PHASES) {
    if (parsed.phases[phase] !== undefined && !allowed.includes(phase)) {
      throw new PolicyError(
        'unsupported_phase',
        `a ${protocol} endpoint runs ${allowed.join(', ')} only; ${phase} is for http and https endpoints`,
        { phase, line: parsed.lineOf([phase]) },
      );
    }
  }
  const scope: PolicyScope = protocol === 'tcp' ? 'tcp' : 'http';
  const types = new Set<string>();
  const phases = {} as Record<Phase, CompiledRule[]>;
  for (const phase of PHASES) {
    phases[phase] = (parsed.phases[phase] ?? []).map((rule, index) =>
      compileRule({ phase, scope, lineOf: parsed.lineOf, types }, rule, index),
    );
  }
  return Object.freeze({ text, phases, types });
}

/** What every rule of one phase is compiled with. */
interface PhaseContext {
  phase: Phase;
  scope: PolicyScope;
  lineOf: (path: readonly (string | number)[]) => number | undefined;
  /** The action types seen so far. */
  types: Set<string>;
}

function compileRule(at: PhaseContext, rule: RuleSpec, index: number): CompiledRule {
  const { phase, scope, lineOf } = at;
  const ruleAt = { phase, rule: { index, name: rule.name } };
  const expressions = rule.expressions.map((e, i) =>
    compilePolicyExpression(
      e,
      'bool',
      { ...ruleAt, field: `expressions[${i}]`, line: lineOf([phase, index, 'expressions', i]) },
      { scope },
    ),
  );
  const actions = rule.actions.map((action, i) => {
    at.types.add(action.type);
    const where: PolicyLocation = {
      ...ruleAt,
      action: { index: i, type: action.type },
      line: lineOf([phase, index, 'actions', i]),
    };
    return { type: action.type, index: i, run: compileAction(phase, scope, action, where) };
  });
  return Object.freeze({ index, name: rule.name, expressions, actions });
}

function compileAction(
  phase: Phase,
  scope: PolicyScope,
  action: ActionSpec,
  where: PolicyLocation,
): ActionRun {
  const definition = ACTIONS.get(action.type);
  if (definition === undefined) {
    throw new PolicyError(
      'unknown_action',
      `unknown action type '${action.type}'; the supported types are ${[...ACTIONS.keys()].join(', ')}`,
      where,
    );
  }
  if (!definition.phases.includes(phase)) {
    throw new PolicyError(
      'unsupported_phase',
      `${action.type} runs in ${definition.phases.join(', ')}, not in ${phase}`,
      where,
    );
  }
  const config = action.config ?? {};
  if (definition.configRequired === true && action.config === undefined) {
    throw new PolicyError('invalid_config', 'config is required', { ...where, field: 'config' });
  }
  const validate = validatorOf(definition as ActionDefinition<unknown>);
  if (!validate(config)) {
    const { field, what } = describeAjv((validate.errors ?? [])[0]);
    throw new PolicyError('invalid_config', what, { ...where, field });
  }
  const ctx: CompileContext = {
    phase,
    template: (text, field) => compileTemplate(text, { ...where, field: `config.${field}` }, scope),
    expression: (text, field) =>
      compilePolicyExpression(text, 'any', { ...where, field: `config.${field}` }, { scope }),
    fail: (field, message) => {
      throw new PolicyError('invalid_config', message, { ...where, field: `config.${field}` });
    },
  };
  return (definition as ActionDefinition<unknown>).compile(config, ctx);
}
