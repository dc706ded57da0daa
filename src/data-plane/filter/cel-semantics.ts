import type { ASTNode } from '@marcbachmann/cel-js';

// Where cel-js answers otherwise than CEL over the event's protobuf messages, the evaluation AST
// of a filter is patched (after type-checking, before the first evaluation) so the evaluator
// answers as CEL does; compile-js.ts generates the same answers with the helpers below.
//
// - has(): cel-js says true for any declared field (the views are fully populated). CEL over
//   proto3 says: a scalar is present when it is not its default ('' / 0 / false), a repeated
//   field or map when it is not empty, a message (a group, a timestamp) when it was set.
// - `<` `<=` `>` `>=` on strings: cel-js compares UTF-16 code units, CEL compares code points.
// - Int negation and division: cel-js does not check the int64 range (-(-2^63), -2^63 / -1);
//   CEL says overflow is an error.

/** Each view keeps the event JSON it was built from here: has() on a group looks at it. */
export const VIEW_SOURCE: unique symbol = Symbol('cel view source');

/** The Date an unset timestamp reads as (identity: a set epoch timestamp is another Date). */
export const UNSET_TIMESTAMP = new Date(0);

type View = { [VIEW_SOURCE]: unknown } & Record<string, unknown>;

function isView(v: unknown): v is View {
  return v !== null && typeof v === 'object' && VIEW_SOURCE in v;
}

/**
 * Whether a value of the event JSON was set, by proto3's rules. A group is present when any of
 * its fields is (the event JSON fills an unset group with defaults, so a group sent with every
 * field at its default reads as absent: README, known differences).
 */
export function jsonPresent(v: unknown): boolean {
  if (typeof v === 'string') return v !== '';
  if (typeof v === 'number') return v !== 0;
  if (typeof v === 'boolean') return v;
  if (typeof v === 'bigint') return v !== 0n;
  if (v === null || typeof v !== 'object') return false;
  if (Array.isArray(v)) return v.length > 0;
  if ('rawJSON' in v) return true; // an int64 beyond 2^53: never 0
  for (const key in v) if (jsonPresent((v as Record<string, unknown>)[key])) return true;
  return false;
}

/** Whether a field value of a view (as filter-environment.ts converts it) is present. */
function viewFieldPresent(v: unknown): boolean {
  if (isView(v)) return jsonPresent(v[VIEW_SOURCE]);
  if (v instanceof Date) return v !== UNSET_TIMESTAMP;
  return jsonPresent(v);
}

/** CEL's string ordering: by code point (UTF-16 differs only for surrogates vs U+E000–FFFF). */
export function compareStrings(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x - y;
  }
  return a.length - b.length;
}

/** The ordering operators as functions of compareStrings' result. */
export const STRING_ORDER: Readonly<Record<string, (c: number) => boolean>> = {
  '<': (c) => c < 0,
  '<=': (c) => c <= 0,
  '>': (c) => c > 0,
  '>=': (c) => c >= 0,
};

/** CEL equality of two views of the same group type: every declared field equal. */
export function viewsEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (!isView(a) || !isView(b) || a.constructor !== b.constructor) return false;
  for (const key of Object.keys(a)) if (!valuesEqual(a[key], b[key])) return false;
  return true;
}

function valuesEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((x, i) => valuesEqual(x, b[i]));
  }
  if (isView(a)) return viewsEqual(a, b);
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every(
    (k) =>
      Object.hasOwn(b, k) &&
      valuesEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]),
  );
}

// cel-js internals the patches use: an evaluator runs a node with `run`, and `debugType(v)`
// gives the runtime type whose `fieldLazy` reads a field (undefined when missing).
interface Evaluator {
  run(node: ASTNode, ctx: unknown): unknown;
  debugType(v: unknown): { fieldLazy(o: unknown, k: unknown, n: ASTNode, ev: Evaluator): unknown };
}
type Evaluate = (ev: Evaluator, node: never, ctx: unknown) => unknown;
interface HasMacro {
  macroHasProps?: ASTNode[];
  evaluate: Evaluate;
}

function isNode(v: unknown): v is ASTNode {
  return v !== null && typeof v === 'object' && typeof (v as ASTNode).op === 'string';
}

function visit(v: unknown, fn: (node: ASTNode) => void): void {
  if (isNode(v)) {
    fn(v);
    visit(v.args, fn); // macro expansions reuse these nodes: every node is reached
  } else if (Array.isArray(v)) {
    for (const item of v) visit(item, fn);
  }
}

function checkedTypeName(node: unknown): string | undefined {
  return (node as { checkedType?: { name?: string } }).checkedType?.name;
}

/** has(a.b.c) by proto3 presence when `a.b` is a view; cel-js's own answer otherwise. */
function presenceEvaluate(original: Evaluate): Evaluate {
  return (ev, macro: HasMacro, ctx) => {
    const nodes = macro.macroHasProps;
    if (nodes === undefined || nodes.some((n) => n.op === '.?')) {
      return original(ev, macro as never, ctx);
    }
    let i = nodes.length;
    let obj = ev.run(nodes[--i], ctx);
    while (i--) {
      const node = nodes[i];
      const name = (node.args as unknown[])[1] as string;
      if (i === 0 && isView(obj)) return viewFieldPresent(obj[name]);
      obj = ev.debugType(obj).fieldLazy(obj, name, node, ev);
      if (obj === undefined) {
        if (i === 0) return false;
        throw new Error(`No such key: ${name}`);
      }
    }
    return obj !== undefined;
  };
}

/**
 * Patches a checked evaluation AST in place: has() by presence, string ordering by code point.
 * Call once per program, after check() and before the first evaluation.
 */
export function patchEvaluation(ast: ASTNode): void {
  visit(ast, (node) => {
    const macro = (node as { meta?: { macro?: HasMacro } }).meta?.macro;
    if (node.op === 'call' && node.args[0] === 'has' && macro !== undefined) {
      macro.evaluate = presenceEvaluate(macro.evaluate);
      return;
    }
    if ((node.op === '-_' || node.op === '/') && checkedTypeName(node) === 'int') {
      // The node's own evaluate (its prototype's replaces itself with this on first use).
      const inner = (node as unknown as { meta: { evaluate: Evaluate } }).meta.evaluate;
      (node as unknown as { evaluate: Evaluate }).evaluate = (ev, n: ASTNode, ctx) =>
        checkedInt(inner.call(n, ev, n as never, ctx) as bigint);
      return;
    }
    const order = STRING_ORDER[node.op];
    if (order === undefined) return;
    const [l, r] = node.args as ASTNode[];
    if (checkedTypeName(l) !== 'string' || checkedTypeName(r) !== 'string') return;
    (node as unknown as { evaluate: Evaluate }).evaluate = (ev, n: ASTNode, ctx) => {
      const [a, b] = n.args as ASTNode[];
      return order(compareStrings(ev.run(a, ctx) as string, ev.run(b, ctx) as string));
    };
  });
}

const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

/** Whether an int is within int64 (CEL's int). */
export function inInt64(v: bigint): boolean {
  return v >= INT64_MIN && v <= INT64_MAX;
}

function checkedInt(v: bigint): bigint {
  if (!inInt64(v)) throw new RangeError('integer overflow');
  return v;
}

/**
 * The offset of the first int literal beyond int64, or undefined. cel-js reads any size; CEL's
 * grammar rejects them, except 2^63 negated: `-9223372036854775808` is int64's minimum.
 */
export function intLiteralOutOfRange(ast: ASTNode): number | undefined {
  const walk = (v: unknown, negated: boolean): number | undefined => {
    if (Array.isArray(v)) {
      for (const item of v) {
        const found = walk(item, false);
        if (found !== undefined) return found;
      }
      return undefined;
    }
    if (v === null || typeof v !== 'object' || typeof (v as ASTNode).op !== 'string') {
      return undefined;
    }
    const node = v as ASTNode;
    if (node.op === 'value' && typeof node.args === 'bigint') {
      const limit = negated ? INT64_MAX + 1n : INT64_MAX;
      return node.args > limit ? node.range.start : undefined;
    }
    if (node.op === '-_') return walk(node.args, true);
    return walk(node.args, false);
  };
  return walk(ast, false);
}
