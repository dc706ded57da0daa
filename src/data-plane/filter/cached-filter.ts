import type { ASTNode } from '@marcbachmann/cel-js';
import type { TrafficEventType } from '../../catalogue/index.ts';
import type { EventJson } from '../wire-json/to-json.ts';
import type { CompiledFilter } from './compile-filter.ts';
import { filterEnvironment } from './filter-environment.ts';
import { generate, identifier } from './generated-code.ts';

// A filter can only read Filterable fields (docs/decisions.md#filters), which for both traffic kinds are the
// connection tuple: conn.client_ip, conn.server_ip, conn.server_name, conn.server_port. Edge
// traffic repeats tuples (one client talking to one host makes many requests), so a filter's
// answer can be remembered per tuple: a hit costs one to four Map lookups instead of building the
// CEL context and interpreting the expression (see `npm run bench:filter`).
//
// The key is the part of the tuple the expression reads (found in its AST: `conn.server_port ==
// 443` is keyed by the port alone), or the whole tuple when the expression uses `conn`/`ev` other
// than to select a field. Fewer key fields mean fewer lookups, fewer entries and more hits.
//
// The cache is two generations of nested Maps (port → server name → server IP → client IP →
// result, levels for unread fields left out): lookups go to the young generation, then the old
// one (a hit there is copied into the young one); when the young one holds maxEntries/2 keys it
// becomes the old one and the previous old one is dropped. So at most maxEntries keys are kept,
// keys in use survive, and no key string is built per event (nested Maps cannot collide either).
// A cache that (nearly) never hits steps aside for a while (WINDOW, BYPASS below).
//
// Only filters that cost more than a lookup are cached: the cel-js evaluator and generated JS
// that runs a regex. Generated comparisons (`conn.server_port == 443`, startsWith, `in` a list)
// take a few nanoseconds, less than reading the key and walking two generations of Maps, so
// those are left as they are (CompiledFilter.cheap; see `npm run bench:filter`).
// The lookup is generated per key shape (constant property names), as in filter-environment.ts.

/** The Filterable leaves that can be part of a key, in key order, with the JS type they need. */
const TUPLE: readonly { name: string; leaf: string; type: 'number' | 'string' }[] = [
  { name: 'conn.server_port', leaf: 'server_port', type: 'number' },
  { name: 'conn.server_name', leaf: 'server_name', type: 'string' },
  { name: 'conn.server_ip', leaf: 'server_ip', type: 'string' },
  { name: 'conn.client_ip', leaf: 'client_ip', type: 'string' },
];

// Keys that never repeat (a client_ip filter on traffic from many clients) make every lookup a
// miss that costs more than no cache. So when more than 90 % of the last WINDOW lookups missed,
// the cache is emptied and skipped for the next BYPASS events, then tried again.
const WINDOW = 1024;
const BYPASS = 16 * 1024;

/** The default bound: 4096 keys is at most a few hundred KiB per filter. */
export const DEFAULT_FILTER_CACHE_ENTRIES = 4096;

function isNode(v: unknown): v is ASTNode {
  return v !== null && typeof v === 'object' && typeof (v as ASTNode).op === 'string';
}

/**
 * The Filterable leaves an expression reads (dotted names), or undefined when it may read more
 * than it names: a top-level variable (`ev`, `conn`) used other than to select a leaf, e.g.
 * passed whole to a list or compared whole. Conservative: a name is never missed.
 */
export function readFields(type: TrafficEventType, expression: string): Set<string> | undefined {
  const fe = filterEnvironment(type);
  const variables = new Set(fe.variables);
  const allowed = new Set(fe.allowedFields);
  const out = new Set<string>();
  let whole = false;

  // A select chain `x.a.b`: its base node and the selected names, outermost last.
  function chain(node: ASTNode): { base: unknown; names: string[] } {
    const names: string[] = [];
    let v: unknown = node;
    while (isNode(v) && v.op === '.') {
      const [object, name] = v.args as [unknown, unknown];
      names.unshift(String(name));
      v = object;
    }
    return { base: v, names };
  }

  function visit(v: unknown): void {
    if (Array.isArray(v)) {
      for (const item of v) visit(item);
      return;
    }
    if (!isNode(v)) return;
    if (v.op === 'id') {
      const name = String(v.args);
      if (allowed.has(name)) out.add(name);
      else if (variables.has(name)) whole = true;
      return;
    }
    if (v.op === '.') {
      const { base, names } = chain(v);
      if (isNode(base) && base.op === 'id' && variables.has(String(base.args))) {
        const path = [String(base.args), ...names];
        if (path[0] === 'ev') path.shift();
        const name = path.join('.');
        if (allowed.has(name)) out.add(name);
        else whole = true; // a group selected whole, or something the checker would refuse
        return;
      }
      visit(base);
      return;
    }
    visit(v.args);
  }

  visit(fe.env.parse(expression).ast);
  return whole ? undefined : out;
}

type Matches = (event: EventJson) => boolean;

// The generated matches(): reads the key fields, checks their types, looks up both generations,
// evaluates and stores on a miss. `s` holds the generations; `inner` is the uncached filter.
function generateMatches(keys: typeof TUPLE, inner: Matches, half: number): Matches {
  for (const k of keys) identifier(k.leaf);
  const vars = keys.map((_, i) => `k${i}`);
  const checks = keys.map((k, i) =>
    k.type === 'number' ? `!Number.isSafeInteger(k${i})` : `typeof k${i} !== 'string'`,
  );
  const get = (root: string) => `${root}.${vars.map((k) => `get(${k})`).join('?.')}`;
  const store = vars
    .slice(0, -1)
    .map((k) => `m = n; n = m.get(${k}); if (n === undefined) { n = new Map(); m.set(${k}, n); }`);
  const body = `
    const s = { young: new Map(), old: new Map(), size: 0, hits: 0, misses: 0, bypass: 0 };
    return function matches(event) {
      if (s.bypass > 0) { s.bypass--; return inner(event); }
      const c = event.conn;
      if (c === null || typeof c !== 'object') return inner(event);
      ${keys.map((k, i) => `const k${i} = c.${k.leaf};`).join(' ')}
      if (${checks.join(' || ')}) return inner(event);
      let r = ${get('s.young')};
      if (r !== undefined) { s.hits++; return r; }
      r = ${get('s.old')};
      if (r === undefined) {
        r = inner(event);
        if (++s.misses + s.hits >= WINDOW) {
          if (s.misses > s.hits * 9) {
            s.young = new Map(); s.old = new Map(); s.size = 0; s.bypass = BYPASS;
          }
          s.hits = 0; s.misses = 0;
          if (s.bypass > 0) return r;
        }
      } else {
        s.hits++;
      }
      if (s.size >= half) { s.old = s.young; s.young = new Map(); s.size = 0; }
      let m, n = s.young;
      ${store.join('\n      ')}
      n.set(${vars.at(-1)}, r);
      s.size++;
      return r;
    };`;
  return generate<Matches>(['inner', 'half', 'WINDOW', 'BYPASS'], body, [
    inner,
    half,
    WINDOW,
    BYPASS,
  ]);
}

/**
 * Wraps a compiled filter with a bounded cache of its answers keyed by the connection-tuple fields
 * it reads (client_ip, server_ip, server_name, server_port). Same interface, same answers: an
 * event whose key fields are not plain strings / a safe-integer port (never the case for
 * trafficToJson output) skips the cache. Returned unchanged: the match-all filter (nothing to
 * save), a cheap filter (cheaper than a lookup) and a filter that may read a Filterable field
 * outside the tuple. `maxEntries` (>= 2) bounds the keys kept.
 */
export function cachedFilter(
  compiled: CompiledFilter,
  maxEntries = DEFAULT_FILTER_CACHE_ENTRIES,
): CompiledFilter {
  if (compiled.expression === '' || compiled.cheap === true) return compiled;
  const fields =
    readFields(compiled.type, compiled.expression) ??
    new Set(filterEnvironment(compiled.type).allowedFields);
  const keys = TUPLE.filter((k) => fields.has(k.name));
  if (keys.length !== fields.size) return compiled; // reads a field the key cannot hold
  const inner: Matches = (event) => compiled.matches(event);
  let matches: Matches;
  if (keys.length === 0) {
    // Reads no event field: one answer for every event.
    let answer: boolean | undefined;
    matches = (event) => (answer ??= inner(event));
  } else {
    matches = generateMatches(keys, inner, Math.max(1, Math.floor(maxEntries / 2)));
  }
  return Object.freeze({ type: compiled.type, expression: compiled.expression, matches });
}
