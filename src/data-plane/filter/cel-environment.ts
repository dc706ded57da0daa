import { Environment } from '@marcbachmann/cel-js';
import type { FieldKind } from '../../catalogue/index.ts';
import { inInt64, UNSET_TIMESTAMP, VIEW_SOURCE, viewsEqual } from './cel-semantics.ts';
import { FILTER_LIMITS } from './filter-limits.ts';
import { generate, identifier } from './generated-code.ts';
import { re2Matcher } from './re2-matches.ts';

// A CEL environment declared from a tree of typed leaves: subscription filters declare the
// catalogue's Filterable fields (filter-environment.ts), Traffic Policy its variables
// (agent-plane/policy/variables.ts). Both compile with compile-expression.ts.
//
// Each declared group is a CEL message type backed by a small view class. Per evaluation the
// values are copied out of a JSON object into those views (ints become BigInt, as cel-js
// requires): cel-js then reads plain own properties of a known constructor, with no per-field
// wrapping or Map conversion.

export { FILTER_LIMITS };

/**
 * What a leaf holds: the catalogue's kinds, plus `dyn` (any CEL value, e.g. action results) and
 * `string_map` (map<string, string>).
 */
export type VariableKind = FieldKind | 'dyn' | 'string_map';

/** One declared leaf: its dotted name and path from the root. */
export interface VariableLeaf {
  name: string;
  path: readonly string[];
  kind: VariableKind;
}

/** `matches(string, string)`: CEL's global form of `string.matches(string)`. */
export const GLOBAL_MATCHES = 'matches(string, string): bool';

/** The leaf each string group reads as when used as a value (`req.url` → `req.url._string`). */
export const STRING_GROUP_LEAF = '_string';

/** What an environment declares. */
export interface CelEnvironmentSpec {
  /** Prefix of every error message (`filter`, `traffic_policy`). */
  label: string;
  leaves: readonly VariableLeaf[];
  /** A variable bound to the whole tree besides its top-level groups (filters: `ev`). */
  rootAlias?: string;
  /**
   * Groups that are also strings (`req.url`: a URL, and `req.url.path` one of its parts). Each
   * declares a `_string` leaf; used as a value, the group reads as it (compile-expression.ts).
   */
  stringGroups?: readonly string[];
  /**
   * Registers the environment's own functions (macros); returns the values of any variables it
   * declared for them (a namespace such as `base64` of `base64.encode(…)`).
   */
  functions?(env: Environment): Record<string, unknown> | undefined;
  /**
   * Why a name that exists elsewhere may not be read here (filters: a non-filterable field), as
   * the error's message; `written` is the reference as written.
   */
  unreadable?(name: string, written: string): string | undefined;
}

/** The declarations of one environment, shared by every expression compiled for it. */
export interface CelEnvironment {
  readonly label: string;
  /** Declared leaves as dotted names (`conn.server_port`), also reachable as `<rootAlias>.<name>`. */
  readonly allowedFields: readonly string[];
  readonly leaves: readonly VariableLeaf[];
  /** The variables bound at the top (the alias and the top-level groups and leaves). */
  readonly variables: readonly string[];
  readonly rootAlias: string | undefined;
  readonly stringGroups: ReadonlySet<string>;
  /** Declarations only; clone it to add per-expression functions (cloning freezes it). */
  readonly env: Environment;
  /** The evaluation context of one JSON object: `{ev, conn}` built from it. */
  toContext(values: unknown): Record<string, unknown>;
  /** Why a name that is not declared cannot be read here, or undefined (see the spec). */
  unreadable(name: string, written: string): string | undefined;
}

interface GroupNode {
  typeName: string;
  leaves: Map<string, VariableKind>;
  groups: Map<string, GroupNode>;
}

type ViewClass = new (src: unknown) => object;
type ToCel = (v: unknown) => unknown;

const NO_VALUES: Readonly<Record<string, unknown>> = Object.freeze({});
const NO_MAP: Readonly<Record<string, unknown>> = Object.freeze({});

const celTypes: Record<VariableKind, string> = {
  string: 'string',
  int32: 'int',
  int64: 'int',
  bool: 'bool',
  timestamp: 'timestamp',
  string_list: 'list<string>',
  string_list_map: 'map<string, list<string>>',
  json: 'list<dyn>',
  dyn: 'dyn',
  string_map: 'map<string, string>',
};

function toCelInt(v: unknown): bigint {
  if (typeof v === 'number')
    return Number.isSafeInteger(v) ? BigInt(v) : BigInt(Math.trunc(v) || 0);
  return typeof v === 'bigint' ? v : 0n;
}

const isObject = (v: unknown) => v !== null && typeof v === 'object';

// Defaults keep every view fully populated, so a field read never fails at evaluation time.
const toCelValue: Record<VariableKind, ToCel> = {
  string: (v) => (typeof v === 'string' ? v : ''),
  int32: toCelInt,
  int64: toCelInt,
  bool: (v) => v === true,
  // An unset timestamp (null in the JSON) reads as the Unix epoch (that Date: has() tells).
  timestamp: (v) => (typeof v === 'string' ? new Date(v) : UNSET_TIMESTAMP),
  string_list: (v) => (Array.isArray(v) ? v : []),
  string_list_map: (v) => (isObject(v) ? v : NO_MAP),
  json: (v) => (Array.isArray(v) ? v : []),
  dyn: (v) => (v === undefined || v === null ? NO_MAP : v),
  string_map: (v) => (isObject(v) ? v : NO_MAP),
};

function uintToInt(u: { valueOf(): bigint }): bigint {
  const v = u.valueOf();
  if (!inInt64(v)) throw new RangeError('int(uint): beyond int64');
  return v;
}

function pascal(path: readonly string[]): string {
  return path
    .flatMap((p) => p.split('_'))
    .map((p) => p.charAt(0).toUpperCase() + p.slice(1))
    .join('');
}

function buildTree(leaves: readonly VariableLeaf[]): GroupNode {
  const root: GroupNode = { typeName: 'Event', leaves: new Map(), groups: new Map() };
  for (const field of leaves) {
    let node = root;
    for (let i = 0; i < field.path.length - 1; i++) {
      const key = field.path[i];
      let child = node.groups.get(key);
      if (!child) {
        child = {
          typeName: pascal(field.path.slice(0, i + 1)),
          leaves: new Map(),
          groups: new Map(),
        };
        node.groups.set(key, child);
      }
      node = child;
    }
    node.leaves.set(field.path[field.path.length - 1], field.kind);
  }
  return root;
}

// Registers the node's CEL type (children first) and returns the view class backing it. The
// constructor is generated (constant property names), as in catalogue/to-json.ts: the generic
// keyed loop cost 0.16 µs per event, most of a filter's time. Names come from declarations.
function declare(env: Environment, node: GroupNode): ViewClass {
  const helpers: unknown[] = [];
  const fields: Record<string, string> = {};
  const body: string[] = [];
  for (const [key, kind] of node.leaves) {
    fields[key] = celTypes[kind];
    const name = identifier(key);
    body.push(`this.${name} = h[${helpers.push(toCelValue[kind]) - 1}](s.${name});`);
  }
  for (const [key, child] of node.groups) {
    fields[key] = child.typeName;
    const name = identifier(key);
    body.push(`this.${name} = new h[${helpers.push(declare(env, child)) - 1}](s.${name});`);
  }
  // The source is kept under a symbol (not a declared field): has() on a group reads it.
  const View = generate<ViewClass>(
    ['h', 'none', 'src'],
    `return function ${identifier(node.typeName)}(s) {\n  if (s === null || typeof s !== 'object') s = none;\n  ${body.join('\n  ')}\n  this[src] = s;\n};`,
    [helpers, NO_VALUES, VIEW_SOURCE],
  );
  env.registerType(node.typeName, { ctor: View, fields });
  // CEL compares messages of one type field by field; cel-js has no equality for them.
  env.registerOperator(`${node.typeName} == ${node.typeName}`, viewsEqual);
  return View;
}

// The context builder `{ev, conn: ev.conn, ...}`, generated for the same reason.
function contextBuilder(
  EventView: ViewClass,
  topLevel: string[],
  rootAlias: string | undefined,
  constants: Record<string, unknown>,
): CelEnvironment['toContext'] {
  const entries = topLevel.map((key) => `${identifier(key)}: ev.${identifier(key)}`);
  if (rootAlias !== undefined) entries.unshift(`${identifier(rootAlias)}: ev`);
  for (const key of Object.keys(constants)) {
    entries.push(`${identifier(key)}: c.${identifier(key)}`);
  }
  return generate(
    ['Ev', 'c'],
    `return function toContext(e) {\n  const ev = new Ev(e);\n  return { ${entries.join(', ')} };\n};`,
    [EventView, constants],
  );
}

/** Builds an environment from its declarations (call once per kind of expression). */
export function celEnvironment(spec: CelEnvironmentSpec): CelEnvironment {
  const env = new Environment({
    limits: {
      maxDepth: FILTER_LIMITS.maxDepth,
      maxAstNodes: FILTER_LIMITS.maxAstNodes,
      maxListElements: FILTER_LIMITS.maxListElements,
    },
    // CEL types `[1, 'a']` as list(dyn) and `{1: 'a', 'b': 2}` as map(dyn, dyn).
    homogeneousAggregateLiterals: false,
  });
  // The global form of `matches`; compile-expression.ts reroutes both forms to RE2.
  env.registerFunction(GLOBAL_MATCHES, re2Matcher(new Map()));
  // CEL's int(uint), which cel-js lacks: an error beyond int64, as any int overflow.
  env.registerFunction('int(uint): int', uintToInt);
  const stringGroups = spec.stringGroups ?? [];
  const leaves = [
    ...spec.leaves,
    ...stringGroups.map((g) => ({
      name: `${g}.${STRING_GROUP_LEAF}`,
      path: [...g.split('.'), STRING_GROUP_LEAF],
      kind: 'string' as const,
    })),
  ];
  const root = buildTree(leaves);
  const EventView = declare(env, root);
  if (spec.rootAlias !== undefined) env.registerVariable(spec.rootAlias, 'Event');
  const topLevel: string[] = [];
  for (const [key, kind] of root.leaves) {
    env.registerVariable(key, celTypes[kind]);
    topLevel.push(key);
  }
  for (const [key, child] of root.groups) {
    env.registerVariable(key, child.typeName);
    topLevel.push(key);
  }
  const constants = spec.functions?.(env) ?? {};
  return Object.freeze({
    label: spec.label,
    allowedFields: Object.freeze(spec.leaves.map((f) => f.name)),
    leaves: Object.freeze(leaves),
    variables: Object.freeze([...(spec.rootAlias ? [spec.rootAlias] : []), ...topLevel]),
    rootAlias: spec.rootAlias,
    stringGroups: new Set(stringGroups),
    env,
    toContext: contextBuilder(EventView, topLevel, spec.rootAlias, constants),
    unreadable: spec.unreadable ?? (() => undefined),
  });
}
