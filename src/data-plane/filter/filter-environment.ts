import { Environment } from '@marcbachmann/cel-js';
import { type FieldKind, filterableFields, type TrafficEventType } from '../../catalogue/index.ts';
import type { EventJson } from '../wire-json/to-json.ts';
import { inInt64, UNSET_TIMESTAMP, VIEW_SOURCE, viewsEqual } from './cel-semantics.ts';
import { FILTER_LIMITS } from './filter-limits.ts';
import { generate, identifier } from './generated-code.ts';
import { re2Matcher } from './re2-matches.ts';

// The CEL environment of one traffic kind, declared from the catalogue's Filterable fields only:
// the event is `ev`, and each top-level group is also bound by its name (docs/decisions.md#filters). A field
// that is not declared cannot type-check, so a filter can never read a non-filterable field.
//
// Each declared group is a CEL message type backed by a small view class. Per event we copy the
// few filterable values out of the event JSON into those views (ints become BigInt, as cel-js
// requires): cel-js then reads plain own properties of a known constructor, with no per-field
// wrapping or Map conversion.

/** The declarations of one traffic kind, shared by every filter compiled for it. */
export interface FilterEnvironment {
  readonly type: TrafficEventType;
  /** Filterable leaves as dotted names (`conn.server_port`), also reachable as `ev.<name>`. */
  readonly allowedFields: readonly string[];
  /** The variables bound at the top (`ev` and the top-level filterable groups). */
  readonly variables: readonly string[];
  /** Declarations only; clone it to add per-filter functions (cloning freezes it). */
  readonly env: Environment;
  /** The evaluation context of one event: `{ev, conn}` built from the event's JSON payload. */
  toContext(event: EventJson): Record<string, unknown>;
}

/** `matches(string, string)`: CEL's global form of `string.matches(string)`. */
export const GLOBAL_MATCHES = 'matches(string, string): bool';

interface GroupNode {
  typeName: string;
  leaves: Map<string, FieldKind>;
  groups: Map<string, GroupNode>;
}

type ViewClass = new (src: unknown) => object;
type ToCel = (v: unknown) => unknown;

const NO_VALUES: Readonly<Record<string, unknown>> = Object.freeze({});

const celTypes: Record<FieldKind, string> = {
  string: 'string',
  int32: 'int',
  int64: 'int',
  bool: 'bool',
  timestamp: 'timestamp',
  string_list: 'list<string>',
  string_list_map: 'map<string, list<string>>',
  json: 'list<dyn>',
};

// Defaults keep every view fully populated, so a field read never fails at event time.
const toCelValue: Record<FieldKind, ToCel> = {
  string: (v) => (typeof v === 'string' ? v : ''),
  int32: toCelInt,
  int64: toCelInt,
  bool: (v) => v === true,
  // An unset timestamp (null in the JSON) reads as the Unix epoch (that Date: has() tells).
  timestamp: (v) => (typeof v === 'string' ? new Date(v) : UNSET_TIMESTAMP),
  string_list: (v) => (Array.isArray(v) ? v : []),
  string_list_map: (v) => (v !== null && typeof v === 'object' ? v : {}),
  json: (v) => (Array.isArray(v) ? v : []),
};

function uintToInt(u: { valueOf(): bigint }): bigint {
  const v = u.valueOf();
  if (!inInt64(v)) throw new RangeError('int(uint): beyond int64');
  return v;
}

function toCelInt(v: unknown): bigint {
  if (typeof v === 'number')
    return Number.isSafeInteger(v) ? BigInt(v) : BigInt(Math.trunc(v) || 0);
  return typeof v === 'bigint' ? v : 0n;
}

function pascal(path: string[]): string {
  return path
    .flatMap((p) => p.split('_'))
    .map((p) => p.charAt(0).toUpperCase() + p.slice(1))
    .join('');
}

function buildTree(type: TrafficEventType): GroupNode {
  const root: GroupNode = { typeName: 'Event', leaves: new Map(), groups: new Map() };
  for (const field of filterableFields(type)) {
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
// keyed loop cost 0.16 µs per event, most of a filter's time. Names come from the descriptors.
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
function contextBuilder(EventView: ViewClass, topLevel: string[]): FilterEnvironment['toContext'] {
  const entries = topLevel.map((key) => `${identifier(key)}: ev.${identifier(key)}`);
  return generate(
    ['Ev'],
    `return function toContext(e) {\n  const ev = new Ev(e);\n  return { ev, ${entries.join(', ')} };\n};`,
    [EventView],
  );
}

function buildEnvironment(type: TrafficEventType): FilterEnvironment {
  const env = new Environment({
    limits: {
      maxDepth: FILTER_LIMITS.maxDepth,
      maxAstNodes: FILTER_LIMITS.maxAstNodes,
      maxListElements: FILTER_LIMITS.maxListElements,
    },
    // CEL types `[1, 'a']` as list(dyn) and `{1: 'a', 'b': 2}` as map(dyn, dyn).
    homogeneousAggregateLiterals: false,
  });
  // The global form of `matches`; compileFilter reroutes both forms to RE2 (re2-matches.ts).
  env.registerFunction(GLOBAL_MATCHES, re2Matcher(new Map()));
  // CEL's int(uint), which cel-js lacks: an error beyond int64, as any int overflow.
  env.registerFunction('int(uint): int', uintToInt);
  const root = buildTree(type);
  const EventView = declare(env, root);
  env.registerVariable('ev', 'Event');
  const topLevel: string[] = [];
  for (const [key, kind] of root.leaves) {
    env.registerVariable(key, celTypes[kind]);
    topLevel.push(key);
  }
  for (const [key, child] of root.groups) {
    env.registerVariable(key, child.typeName);
    topLevel.push(key);
  }

  return Object.freeze({
    type,
    allowedFields: Object.freeze(filterableFields(type).map((f) => f.name)),
    variables: Object.freeze(['ev', ...topLevel]),
    env,
    toContext: contextBuilder(EventView, topLevel),
  });
}

const cache = new Map<TrafficEventType, FilterEnvironment>();

/** The (cached) filter environment of a traffic kind; built once, on first use. */
export function filterEnvironment(type: TrafficEventType): FilterEnvironment {
  let fe = cache.get(type);
  if (!fe) {
    fe = buildEnvironment(type);
    cache.set(type, fe);
  }
  return fe;
}
