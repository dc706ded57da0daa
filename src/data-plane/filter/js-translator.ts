import type { ASTNode } from '@marcbachmann/cel-js';
import type { RE2JS } from 're2js';
import type { VariableKind } from './cel-environment.ts';
import { compareStrings, inInt64 } from './cel-semantics.ts';
import { FILTER_LIMITS } from './filter-limits.ts';
import { literal } from './generated-code.ts';
import { compileRegex, RE2_METHOD, re2Matcher } from './re2-matches.ts';

// compile-js.ts's translator: one checked CEL node at a time to a JS expression over the locals
// the prologue (js-reads.ts) binds, or Unsupported when the node is outside the subset. The
// rules it keeps (same answers as the evaluator) are in compile-js.ts's header.

/** A literal list longer than this is looked up in a Set instead of a chain of comparisons. */
const SET_THRESHOLD = 8;

const NUMERIC = new Set(['int', 'uint', 'double']);
const EQUALITY_TYPES = new Set(['int', 'uint', 'double', 'string', 'bool', 'null']);
const INT_TYPES = new Set(['int', 'uint']);
const RELATIONAL = new Set(['<', '<=', '>', '>=']);
const STRING_METHODS: Readonly<Record<string, string>> = {
  startsWith: 'startsWith',
  endsWith: 'endsWith',
  contains: 'includes',
};

/** The CEL type each supported leaf kind is declared with (filter-environment.ts). */
const LEAF_TYPES: Partial<Record<VariableKind, string>> = {
  string: 'string',
  int32: 'int',
  int64: 'int',
  bool: 'bool',
};

/** Thrown inside the translator when a node is outside the subset. */
export class Unsupported extends Error {}

export function unsupported(why: string): never {
  throw new Unsupported(why);
}

/** CEL's size() of a string: code points, a lone surrogate counting as one (for...of). */
function stringSize(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

interface Emitted {
  code: string;
  /** The checked CEL type name (`int`, `string`, `list<string>`, ...). */
  type: string;
  /** A literal's JS value, for lists that can become a Set. */
  literal?: { value: string | number };
  /** A local or a literal: safe to repeat in the source instead of binding a temporary. */
  simple: boolean;
}

export interface Leaf {
  /** Dotted name, e.g. `conn.server_port`. */
  name: string;
  path: readonly string[];
  kind: VariableKind;
}

interface NodeMeta {
  macro?: unknown;
  alternate?: unknown;
}

function isNode(v: unknown): v is ASTNode {
  return v !== null && typeof v === 'object' && typeof (v as ASTNode).op === 'string';
}

function checkedType(node: ASTNode): string {
  const t = (node as { checkedType?: { name?: unknown } }).checkedType;
  if (t === undefined || typeof t.name !== 'string') unsupported('unchecked node');
  return t.name;
}

/** The value of an int literal, possibly negated (the only operands negation compiles). */
function intConstant(node: ASTNode): bigint {
  if (node.op === '-_') return -intConstant(node.args as ASTNode);
  return node.args as bigint;
}

export class Translator {
  /** Constants the generated code reads as `k[i]`. */
  readonly constants: unknown[] = [];
  /** Leaves read by the expression, by dotted name → local variable. */
  readonly used = new Map<string, string>();
  temps = 0;
  private readonly leaves: Map<string, Leaf>;
  private readonly variables: Set<string>;
  private readonly regexes: Map<string, RE2JS>;
  private matcher: number | undefined;
  private readonly helpers = new Map<unknown, number>();
  /** The variable bound to the whole tree (filters: `ev`). */
  private readonly rootAlias: string | undefined;

  constructor(
    leaves: Map<string, Leaf>,
    variables: Set<string>,
    regexes: ReadonlyMap<string, RE2JS>,
    rootAlias: string | undefined = 'ev',
  ) {
    this.leaves = leaves;
    this.variables = variables;
    this.regexes = new Map(regexes);
    this.rootAlias = rootAlias;
  }

  constant(value: unknown): string {
    return `k[${this.constants.push(value) - 1}]`;
  }

  /** The `re2Matches` implementation shared by every `matches` of the expression. */
  matcherRef(): string {
    this.matcher ??= this.constants.push(undefined) - 1; // filled in by finish()
    return `k[${this.matcher}]`;
  }

  /** Creates the matcher once every pattern is known (re2Matcher copies the map it is given). */
  finish(): void {
    if (this.matcher !== undefined) this.constants[this.matcher] = re2Matcher(this.regexes);
  }

  /** A helper function the generated code calls, stored once among the constants. */
  helper(fn: (...args: never[]) => unknown): string {
    let i = this.helpers.get(fn);
    if (i === undefined) {
      i = this.constants.push(fn) - 1;
      this.helpers.set(fn, i);
    }
    return `k[${i}]`;
  }

  /** A pattern the matcher will find compiled (so it never compiles, never throws per event). */
  regex(pattern: string): void {
    if (this.regexes.has(pattern)) return;
    let re: RE2JS;
    try {
      re = compileRegex(pattern);
    } catch {
      unsupported('invalid pattern'); // compileFilter rejects it
    }
    if (re.programSize() > FILTER_LIMITS.maxRegexProgramSize) unsupported('pattern too large');
    this.regexes.set(pattern, re);
  }

  intLiteral(value: bigint): string {
    if (value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)) {
      return literal(Number(value));
    }
    return this.constant(value);
  }

  /** The leaf a select chain (or a bare top-level variable) reads, or undefined. */
  leafOf(node: ASTNode): Leaf | undefined {
    const names: string[] = [];
    let v: unknown = node;
    while (isNode(v) && v.op === '.') {
      const [object, name] = v.args as [unknown, unknown];
      if (typeof name !== 'string') return undefined;
      names.unshift(name);
      v = object;
    }
    if (!isNode(v) || v.op !== 'id' || typeof v.args !== 'string') return undefined;
    if (!this.variables.has(v.args)) return undefined;
    const path = v.args === this.rootAlias ? names : [v.args, ...names];
    return this.leaves.get(path.join('.'));
  }

  emit(node: unknown): Emitted {
    if (!isNode(node)) unsupported('not a node');
    const meta = (node as { meta?: NodeMeta }).meta;
    if (meta?.macro !== undefined && node.op === 'call' && node.args[0] === 'has') {
      return this.presence(node);
    }
    if (meta?.macro !== undefined || meta?.alternate !== undefined) unsupported('macro');
    const type = checkedType(node);
    switch (node.op) {
      case 'value':
        return this.value(node.args, type);
      case 'id':
      case '.':
        return this.field(node, type);
      case '-_':
        return this.negation(node.args as ASTNode, type);
      case '!_': {
        const a = this.emit(node.args);
        if (a.type !== 'bool' || type !== 'bool') unsupported('! on non-bool');
        return { code: `(!${a.code})`, type, simple: false };
      }
      case '&&':
      case '||': {
        const [l, r] = (node.args as ASTNode[]).map((a) => this.emit(a));
        if (l.type !== 'bool' || r.type !== 'bool' || type !== 'bool') unsupported('logic');
        return { code: `(${l.code} ${node.op} ${r.code})`, type, simple: false };
      }
      case '?:': {
        const [c, a, b] = (node.args as ASTNode[]).map((x) => this.emit(x));
        if (c.type !== 'bool' || a.type !== type || b.type !== type) unsupported('ternary');
        if (!EQUALITY_TYPES.has(type)) unsupported('ternary type');
        return { code: `(${c.code} ? ${a.code} : ${b.code})`, type, simple: false };
      }
      case '==':
      case '!=': {
        const [l, r] = (node.args as ASTNode[]).map((a) => this.emit(a));
        if (l.type !== r.type || !EQUALITY_TYPES.has(l.type)) unsupported('equality types');
        // `==` is exact between a number and a bigint (both int); === would say 1 !== 1n.
        const op = INT_TYPES.has(l.type) ? node.op : `${node.op}=`;
        return { code: `(${l.code} ${op} ${r.code})`, type, simple: false };
      }
      case 'in':
        return this.membership(node.args as ASTNode[], type);
      case 'call':
      case 'rcall':
        return this.call(node);
      default:
        if (RELATIONAL.has(node.op)) {
          const [l, r] = (node.args as ASTNode[]).map((a) => this.emit(a));
          const ok =
            (NUMERIC.has(l.type) && NUMERIC.has(r.type)) ||
            (l.type === r.type && (l.type === 'string' || l.type === 'bool'));
          if (!ok || type !== 'bool') unsupported('relational types');
          if (l.type === 'string') {
            // CEL orders strings by code point, JS by UTF-16 unit (cel-semantics.ts).
            const cmp = `${this.helper(compareStrings)}(${l.code}, ${r.code})`;
            return { code: `(${cmp} ${node.op} 0)`, type, simple: false };
          }
          return { code: `(${l.code} ${node.op} ${r.code})`, type, simple: false };
        }
        return unsupported(`operator ${node.op}`);
    }
  }

  value(value: unknown, type: string): Emitted {
    switch (type) {
      case 'bool':
        if (typeof value !== 'boolean') break;
        return { code: String(value), type, literal: undefined, simple: true };
      case 'null':
        if (value !== null) break;
        return { code: 'null', type, simple: true };
      case 'string':
        if (typeof value !== 'string') break;
        return { code: literal(value), type, literal: { value }, simple: true };
      case 'double':
        if (typeof value !== 'number' || !Number.isFinite(value)) break;
        if (Object.is(value, -0)) return { code: '(-0)', type, simple: true };
        return { code: `(${literal(value)})`, type, literal: { value }, simple: true };
      case 'int':
      case 'uint': {
        // int: a bigint; uint: an UnsignedInt object whose valueOf() is the bigint.
        const v = type === 'int' ? value : (value as { valueOf(): unknown } | null)?.valueOf();
        if (typeof v !== 'bigint') break;
        const code = this.intLiteral(v);
        const literal = code.startsWith('k[') ? undefined : { value: Number(v) };
        return { code: code.startsWith('k[') ? code : `(${code})`, type, literal, simple: true };
      }
    }
    return unsupported(`literal of type ${type}`);
  }

  /** Unary minus of a numeric literal (or of a negated one): a constant, never an overflow. */
  negation(operand: ASTNode, type: string): Emitted {
    if (!isNode(operand) || (operand.op !== 'value' && operand.op !== '-_')) {
      unsupported('arithmetic');
    }
    if (type !== 'int' && type !== 'double') unsupported('negation type');
    const a = this.emit(operand);
    if (a.type !== type) unsupported('negation type');
    // -(-9223372036854775808) overflows: an evaluation error, which the evaluator raises.
    if (type === 'int' && !inInt64(-intConstant(operand))) unsupported('int overflow');
    return { code: `(-${a.code})`, type, simple: true };
  }

  /** has() of a Filterable leaf: proto3 presence, i.e. not its default (cel-semantics.ts). */
  presence(node: ASTNode): Emitted {
    const [, [target]] = node.args as [string, ASTNode[]];
    if (!isNode(target) || target.op !== '.') unsupported('has() argument');
    const leaf = this.leafOf(target);
    if (leaf === undefined) unsupported('has() of a group');
    const value = this.field(target, LEAF_TYPES[leaf.kind] ?? unsupported(`has() of ${leaf.kind}`));
    const code =
      leaf.kind === 'string'
        ? `(${value.code} !== '')`
        : leaf.kind === 'bool'
          ? value.code
          : `(${value.code} != 0)`;
    return { code, type: 'bool', simple: false };
  }

  field(node: ASTNode, type: string): Emitted {
    const leaf = this.leafOf(node);
    if (leaf === undefined) unsupported('not a Filterable leaf');
    if (LEAF_TYPES[leaf.kind] !== type) unsupported(`leaf of kind ${leaf.kind}`);
    let local = this.used.get(leaf.name);
    if (local === undefined) {
      local = `f${this.used.size}`;
      this.used.set(leaf.name, local);
    }
    return { code: local, type, simple: true };
  }

  membership([left, right]: ASTNode[], type: string): Emitted {
    if (type !== 'bool' || !isNode(right) || right.op !== 'list') unsupported('in: not a list');
    const x = this.emit(left);
    const listType = checkedType(right);
    const items = (right.args as ASTNode[]).map((a) => this.emit(a));
    if (items.length === 0) {
      if (listType !== 'list<T>') unsupported('in: list type');
      return { code: 'false', type, simple: true };
    }
    if (listType !== `list<${x.type}>` || !EQUALITY_TYPES.has(x.type)) unsupported('in: types');
    if (items.some((i) => i.type !== x.type)) unsupported('in: element types');
    const literals = items.map((i) => i.literal);
    if (
      x.type === 'string' &&
      items.length > SET_THRESHOLD &&
      literals.every((l) => l !== undefined)
    ) {
      const set = this.constant(new Set(literals.map((l) => l.value)));
      return { code: `${set}.has(${x.code})`, type, simple: false };
    }
    let subject = x.code;
    let bind = '';
    if (!x.simple) {
      subject = `t${this.temps++}`;
      bind = `${subject} = ${x.code}, `;
    }
    const op = INT_TYPES.has(x.type) ? '==' : '===';
    const chain = items.map((i) => `${subject} ${op} ${i.code}`).join(' || ');
    return { code: `(${bind}${chain})`, type, simple: false };
  }

  call(node: ASTNode): Emitted {
    const type = checkedType(node);
    let name: string;
    let receiver: ASTNode | undefined;
    let args: ASTNode[];
    if (node.op === 'call') {
      [name, args] = node.args as [string, ASTNode[]];
      if ((name === 'matches' || name === RE2_METHOD) && args.length === 2) {
        [receiver, ...args] = args; // the global form matches(s, p)
      }
    } else {
      [name, receiver, args] = node.args as [string, ASTNode, ASTNode[]];
    }
    if (name === 'size') {
      const operands = receiver === undefined ? args : [receiver, ...args];
      if (operands.length !== 1 || type !== 'int') unsupported('size arity');
      const [operand] = operands;
      if (isNode(operand) && operand.op === 'list') {
        // Its elements are evaluated (and must be in the subset) but only their number counts.
        for (const item of operand.args as ASTNode[]) this.emit(item);
        if (!checkedType(operand).startsWith('list<')) unsupported('size of list');
        return { code: `(${(operand.args as ASTNode[]).length})`, type, simple: true };
      }
      const s = this.emit(operand);
      if (s.type !== 'string') unsupported('size of non-string');
      return { code: `${this.helper(stringSize)}(${s.code})`, type, simple: false };
    }
    if (receiver === undefined || args.length !== 1 || type !== 'bool') unsupported(name);
    const r = this.emit(receiver);
    if (r.type !== 'string') unsupported(`${name} on non-string`);
    // RE2_METHOD: the evaluation AST of compileFilter, where useRe2ForMatches renamed `matches`.
    if (name === 'matches' || name === RE2_METHOD) {
      const [pattern] = args;
      if (!isNode(pattern) || pattern.op !== 'value' || typeof pattern.args !== 'string') {
        unsupported('dynamic pattern');
      }
      this.regex(pattern.args);
      return {
        code: `${this.matcherRef()}(${r.code}, ${literal(pattern.args)})`,
        type,
        simple: false,
      };
    }
    const method = Object.hasOwn(STRING_METHODS, name) ? STRING_METHODS[name] : undefined;
    if (method === undefined) unsupported(`function ${name}`);
    const a = this.emit(args[0]);
    if (a.type !== 'string') unsupported(`${name} argument`);
    return { code: `${r.code}.${method}(${a.code})`, type, simple: false };
  }
}
