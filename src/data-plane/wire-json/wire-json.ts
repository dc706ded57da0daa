import { Buffer } from 'node:buffer';
import type { DescField, DescMessage } from '@bufbuild/protobuf';
import { TimestampSchema } from '@bufbuild/protobuf/wkt';
import { type TrafficEventType, trafficEventSchemas } from '../../catalogue/event-types.ts';
import { fieldKindOf, filterableFields } from '../../catalogue/fields.ts';
import type { FieldKind } from '../../catalogue/types.ts';
import type { NameSet, Redaction } from '../redaction/policy.ts';
import { REDACTED } from '../redaction/policy.ts';
import { queryHasName, redactQuery, redactUrl } from '../redaction/query.ts';
import {
  checkUtf8,
  NUMBER_ROOM,
  writeAscii,
  writeBool,
  writeInteger,
  writeJsString,
  writeString,
} from './json-bytes.ts';
import { writeTimestamp } from './timestamp-bytes.ts';
import type { EventJson } from './to-json.ts';
import { formatTimestamp, wireToJson } from './wire-decode.ts';
import { readMapEntry, sameOrIndexKey } from './wire-json-map.ts';
import * as reader from './wire-reader.ts';
import { type MessageInfo, RECURSION_LIMIT, tagOf, WIRE_LEN, WIRE_VARINT } from './wire-reader.ts';
import { struct } from './wire-struct.ts';

// Writes a traffic payload's protobuf wire format straight to its JSON text, as bytes, with no
// object in between: the text JSON.stringify would give for the object wire-decode.ts decodes
// (same keys, order, values and escapes; the tests hold them to it). While it writes, it notes
// where each field's `"name":value` lies in the text (its span), so that a field selection is
// a few copies of spans (compileSpanProjection, filter/compile-projection.ts), and where the
// Filterable leaves' bytes are, so that filters get their values without the rest of the event
// being decoded.
//
// One pass, in the order the fields arrive: a message's fields are expected in declaration
// order (the order protobuf encoders write them, numbers ascending here), each singular field
// once, a repeated field's elements together; fields the event leaves out are written with
// their defaults as the writer passes them. Anything else protobuf allows (a field out of
// order, a singular field twice, which merges or wins; a map key twice, or one JS objects would
// reorder) throws OUT_OF_ORDER, and the caller writes that event from the decoder's object.
// Each message type gets code generated from its descriptor, as in wire-decode.ts: constant
// property names and byte literals, nothing else from the descriptor reaches the source.

/** Thrown by a writer for an event it cannot write in one pass; see above. */
export const OUT_OF_ORDER: unique symbol = Symbol('wire-json: write this event from its object');

/** One field of a message as the writer sees it: its span and, for a group, its message. */
export interface JsonField {
  name: string;
  /** Its dotted name from the payload (`http.request.url.query`). */
  path: string;
  kind: FieldKind | undefined;
  /** Its span's id: spans[base + 2·id] and spans[base + 2·id + 1] bound `"name":value`. */
  span: number;
  /** For a group: its fields. */
  child?: JsonNode;
  /** Its index among the kind's Filterable leaves, or -1. */
  filterable: number;
  desc: DescField;
}

/** A message at one path of a traffic kind (a group, or the payload itself: span 0). */
export interface JsonNode {
  desc: DescMessage;
  fields: JsonField[];
  /** The number of its generated functions (w·, f·, c·). */
  index: number;
}

/** The shape one traffic kind is written in: its fields' tree, spans and Filterable leaves. */
export interface JsonShape {
  type: TrafficEventType;
  root: JsonNode;
  /** Span ids in use: the payload (0) and every field below it. */
  spans: number;
  /** Dotted field name → span id, for groups and leaves. */
  spanOf: ReadonlyMap<string, number>;
  /** The Filterable leaves' dotted names, in filterableFields order. */
  filterable: readonly string[];
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** The string fields that carry a query string (docs/security.md#redacted): raw or not. */
const QUERY_FIELDS = new Map([
  ['http.request.url.query', false],
  ['http.request.url.raw', true],
]);

function shapeOf(type: TrafficEventType, nodes: JsonNode[]): JsonShape {
  const filterable = filterableFields(type).map((f) => f.name);
  const spanOf = new Map<string, number>();
  let spans = 1;
  const build = (desc: DescMessage, path: string[]): JsonNode => {
    const node: JsonNode = { desc, fields: [], index: nodes.length };
    nodes.push(node);
    for (const field of desc.fields) {
      if (!IDENTIFIER.test(field.name) || field.oneof !== undefined) {
        throw new Error(`wire json: ${desc.typeName}.${field.name} cannot be written here`);
      }
      const kind = fieldKindOf(field);
      const name = [...path, field.name].join('.');
      const span = spans++;
      spanOf.set(name, span);
      const child =
        kind === undefined
          ? build((field as DescField & { fieldKind: 'message' }).message, [...path, field.name])
          : undefined;
      node.fields.push({
        name: field.name,
        path: name,
        kind,
        span,
        child,
        filterable: filterable.indexOf(name),
        desc: field,
      });
    }
    return node;
  };
  const root = build(trafficEventSchemas[type], []);
  if (type === 'http_request_complete.v0') {
    for (const path of QUERY_FIELDS.keys()) {
      if (!spanOf.has(path))
        throw new Error(`wire json: ${type} lost ${path}, which redaction reads`);
    }
  }
  return { type, root, spans, spanOf, filterable };
}

/** Decimal byte literals writing `text` (ASCII: field names are identifiers) at `op`. */
function literal(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) out += `O[op++] = ${text.charCodeAt(i)}; `;
  return out;
}

// A length-delimited value's length into `n`, checked against the message's end.
const READ_LENGTH =
  'let n = buf[pos]; if (n < 128 && pos < end) pos++; else { n = varint32(c, buf, pos, end); pos = c.pos; }\n' +
  '        if (n > end - pos) overrun(n, pos, end);';

// A varint into `v` by `slow` (int32 | int64 | bool); one-byte values inline.
const readVarint = (slow: string, small: string) =>
  `let v; { const b = buf[pos]; if (b < 128 && pos < end) { v = ${small}; pos++; } else { v = ${slow}(c, buf, pos, end); pos = c.pos; } }`;

const DEFAULTS: Record<FieldKind, string> = {
  string: '""',
  int32: '0',
  int64: '0',
  bool: 'false',
  timestamp: 'null',
  string_list: '[]',
  string_list_map: '{}',
  json: '[]',
};

/** The source of one message's writer (w·), its defaults writer (f·) and its closer (c·). */
function messageSource(node: JsonNode, info: number): string {
  const i = node.index;
  const cases: string[] = [];
  const defaults: string[] = [];
  const closers: string[] = [];
  node.fields.forEach((f, k) => {
    const comma = k > 0 ? literal(',') : '';
    const head = `"${f.name}":`;
    const room = head.length + 1;
    const start = `${comma}P[pb + ${2 * f.span}] = op; ${literal(head)}`;
    const end = `P[pb + ${2 * f.span + 1}] = op;`;
    // Before a singular field: close an open list, write the defaults of the fields passed.
    const enter = `if (next > ${k}) throw OUT; if (open >= 0) { c${i}(open); open = -1; } if (next < ${k}) f${i}(next, ${k}, depth);`;
    const tuple = (value: string) =>
      f.filterable < 0 ? '' : `T[tb + ${2 * f.filterable}] = ${value}; `;
    let body: string;
    let wireType = WIRE_LEN;
    switch (f.kind) {
      case undefined:
        body = `${READ_LENGTH}\n        ${enter} need(${room}); ${start}\n        w${f.child!.index}(buf, pos, pos + n, depth + 1); ${end} pos += n; next = ${k + 1};`;
        defaults.push(`need(${room}); ${start} w${f.child!.index}(EMPTY, 0, 0, depth + 1); ${end}`);
        break;
      case 'string': {
        const raw = QUERY_FIELDS.get(f.path);
        // A query's token parameters are redacted (the rare URL that has one goes through a string).
        const write =
          raw === undefined
            ? 'op = str(O, op, buf, pos, pos + n);'
            : `if (RQ !== null && qhas(RQ, buf, pos, pos + n, ${raw})) { const s = qred(buf, pos, pos + n, ${raw}, RQ); need(18 * s.length + 2); op = jstr(O, op, s); } else op = str(O, op, buf, pos, pos + n);`;
        body = `${READ_LENGTH}\n        ${enter} need(${room} + 6 * n + 2); ${start}\n        ${write} ${end} ${tuple('pos')}${f.filterable < 0 ? '' : `T[tb + ${2 * f.filterable + 1}] = pos + n; `}pos += n; next = ${k + 1};`;
        break;
      }
      case 'int32':
      case 'int64':
      case 'bool': {
        wireType = WIRE_VARINT;
        const write =
          f.kind === 'bool'
            ? 'op = boolw(O, op, v);'
            : f.kind === 'int32'
              ? 'op = int(O, op, v);'
              : "op = typeof v === 'number' ? int(O, op, v) : ascii(O, op, v.rawJSON);";
        body = `${readVarint(f.kind, f.kind === 'bool' ? 'b !== 0' : 'b')}\n        ${enter} need(${room + NUMBER_ROOM}); ${start} ${write} ${end} ${tuple('v')}${f.filterable < 0 ? '' : `T[tb + ${2 * f.filterable + 1}] = 0; `}next = ${k + 1};`;
        break;
      }
      case 'timestamp':
        body = `${READ_LENGTH}\n        ${enter} need(${room} + 40); ${start}\n        op = tsw(O, op, buf, pos, pos + n, ts); ${end} pos += n; next = ${k + 1};`;
        break;
      case 'string_list':
      case 'string_list_map':
      case 'json': {
        const [open, close] = f.kind === 'string_list_map' ? ['{', 125] : ['[', 93];
        closers.push(`case ${k}: O[op++] = ${close}; ${end} break;`);
        const first = `if (next > ${k}) throw OUT; if (open >= 0) { c${i}(open); open = -1; } if (next < ${k}) f${i}(next, ${k}, depth); need(${room + 1}); ${start}${literal(open)}open = ${k}; next = ${k + 1};`;
        const again = `need(1); ${literal(',')}`;
        const element =
          f.kind === 'string_list'
            ? 'need(6 * n + 2); op = str(O, op, buf, pos, pos + n);'
            : f.kind === 'string_list_map'
              ? 'entry(buf, pos, pos + n, depth);'
              : 'const s = {}; struct(c, buf, pos, pos + n, s, depth + 1); const j = JSON.stringify(s); need(3 * j.length); op += O.write(j, op);';
        const reset = f.kind === 'string_list_map' ? ' mk = 0;' : '';
        body = `${READ_LENGTH}\n        if (open === ${k}) { ${again} } else { ${first}${reset} }\n        ${element} pos += n;`;
        break;
      }
      default:
        throw new Error(`wire json: no writer for kind ${f.kind satisfies never}`);
    }
    if (f.kind !== undefined) {
      defaults.push(`need(${room + 8}); ${start}${literal(DEFAULTS[f.kind])}${end}`);
    }
    cases.push(
      `      case ${tagOf(f.desc.number, wireType)}: { // ${f.name}\n        ${body} break; }`,
    );
  });
  const n = node.fields.length;
  const fill = defaults.map((d, k) => `    case ${k}: if (to <= ${k}) return; ${d}`).join('\n');
  return (
    `function w${i}(buf, pos, end, depth) {\n` +
    `  if (depth > ${RECURSION_LIMIT}) tooDeep(I[${info}].typeName);\n` +
    `  need(1); O[op++] = 123;\n  let next = 0, open = -1;\n` +
    '  while (pos < end) {\n' +
    '    let t = buf[pos]; if (t < 128) pos++; else { t = tag(c, buf, pos, end); pos = c.pos; }\n' +
    `    switch (t) {\n${cases.join('\n')}\n` +
    `      default: pos = skip(c, buf, pos, end, t, depth, I[${info}]);\n    }\n  }\n` +
    `  if (open >= 0) c${i}(open);\n  if (next < ${n}) f${i}(next, ${n}, depth);\n` +
    '  need(1); O[op++] = 125;\n}\n' +
    `function f${i}(from, to, depth) {\n  switch (from) {\n${fill}\n  }\n}\n` +
    `function c${i}(k) {\n  need(1);\n  switch (k) { ${closers.join(' ')} }\n}\n`
  );
}

// A map entry (`"key":[values]`), read by readMapEntry; a key the map had already, or one a JS
// object would move to the front (an array index), throws OUT_OF_ORDER. A header the
// redaction names keeps its key and gets MARK for its values (still checked to be UTF-8).
//
// The layout every encoder writes (key, then one StringList of values, every length under 128)
// is written by a fast path in one go: no entry read into an array first, one room check.
const ENTRY_SOURCE = `
function entry(buf, pos, end, depth) {
  if (end - pos >= 4 && depth < ${RECURSION_LIMIT} && buf[pos] === 10 && buf[pos + 1] < 128) {
    const ks = pos + 2, ke = ks + buf[pos + 1];
    if (ke + 2 <= end && buf[ke] === 18 && buf[ke + 1] < 128 && buf[ke + 1] === end - ke - 2 && simpleEntry(buf, ke + 2, end, ks, ke)) return;
  }
  const e = readEntry(c, buf, pos, end, depth);
  let ks = e[0], ke = e[1];
  if (ks < 0) { ks = 0; ke = 0; }
  if (keyConflict(buf, ks, ke, MK, mk)) throw OUT;
  if (2 * mk + 2 > MK.length) { const next = new Int32Array(MK.length * 2); next.set(MK); MK = next; }
  MK[2 * mk] = ks; MK[2 * mk + 1] = ke; mk++;
  need(6 * (ke - ks) + 4); op = str(O, op, buf, ks, ke); O[op++] = 58; O[op++] = 91;
  const values = e[2];
  if (RH !== null && values > 0 && RH.has(buf, ks, ke)) {
    for (let v = 0; v < values; v++) chk(buf, e[3 + 2 * v], e[4 + 2 * v]);
    need(MARK.length); op = ascii(O, op, MARK);
  } else {
    for (let v = 0; v < values; v++) {
      const s = e[3 + 2 * v], t = e[4 + 2 * v];
      need(6 * (t - s) + 3); if (v > 0) O[op++] = 44; op = str(O, op, buf, s, t);
    }
  }
  need(1); O[op++] = 93;
}
// The values of the fast path, bytes [pos, end): every one tag 10 and a one-byte length. False
// (nothing written) for any other layout.
function simpleEntry(buf, pos, end, ks, ke) {
  let values = 0;
  for (let p = pos; p < end; p += 2 + buf[p + 1], values++) {
    if (buf[p] !== 10 || p + 2 > end || buf[p + 1] > 127 || p + 2 + buf[p + 1] > end) return false;
  }
  if (keyConflict(buf, ks, ke, MK, mk)) throw OUT;
  if (2 * mk + 2 > MK.length) { const next = new Int32Array(MK.length * 2); next.set(MK); MK = next; }
  MK[2 * mk] = ks; MK[2 * mk + 1] = ke; mk++;
  // Each input byte becomes at most 6 (an escape), a value's 2 bytes of tag and length cover its quotes and comma.
  need(6 * (end - ks) + MARK.length + 4);
  op = str(O, op, buf, ks, ke); O[op++] = 58; O[op++] = 91;
  if (RH !== null && values > 0 && RH.has(buf, ks, ke)) {
    for (let p = pos; p < end; p += 2 + buf[p + 1]) chk(buf, p + 2, p + 2 + buf[p + 1]);
    op = ascii(O, op, MARK);
  } else {
    for (let p = pos; p < end; p += 2 + buf[p + 1]) {
      if (p > pos) O[op++] = 44;
      op = str(O, op, buf, p + 2, p + 2 + buf[p + 1]);
    }
  }
  O[op++] = 93;
  return true;
}`;

/** The writers of every traffic kind, compiled once per process. */
interface Writers {
  shapes: Map<TrafficEventType, JsonShape>;
  /** Writes a payload's JSON at the current position; its spans at `pb`, Filterable bytes at `tb`. */
  roots: Map<TrafficEventType, (buf: Uint8Array, start: number, end: number) => void>;
  /** Points the writers at the buffers and positions of the event about to be written. */
  target(o: Buffer, op: number, p: Int32Array, pb: number, t: Int32Array, tb: number): void;
  /** The redaction the next payloads are written with (docs/security.md#redacted). */
  redact(redaction: Redaction): void;
  /** The text buffer (it grows as the writers need) and the position after the last write. */
  text(): Buffer;
  at(): number;
}

let compiled: Writers | undefined;

function compileWriters(): Writers {
  const nodes: JsonNode[] = [];
  const shapes = new Map<TrafficEventType, JsonShape>();
  for (const type of Object.keys(trafficEventSchemas) as TrafficEventType[]) {
    shapes.set(type, shapeOf(type, nodes));
  }
  const infos: MessageInfo[] = nodes.map((node) =>
    reader.messageInfo(
      node.desc,
      new Map(
        node.fields.map((f) => [
          f.desc.number,
          f.kind === 'int32' || f.kind === 'int64' || f.kind === 'bool' ? WIRE_VARINT : WIRE_LEN,
        ]),
      ),
    ),
  );
  const roots = [...shapes.values()].map(
    (shape, r) =>
      `function r${r}(buf, start, end) { const s = op; w${shape.root.index}(buf, start, end, 3); P[pb] = s; P[pb + 1] = op; }`,
  );
  const source = [
    "'use strict';",
    'const { tag, varint32, int32, int64, bool, skip, overrun, tooDeep } = R;',
    'const { str, int, ascii, boolw, ts, tsw, struct, readEntry, keyConflict, OUT } = W;',
    'const { chk, qhas, qred, jstr, MARK } = W;',
    'let RH = null, RQ = null;',
    'const c = R.newCursor();',
    'const EMPTY = new Uint8Array(0);',
    'let O = W.initial, op = 0, P = new Int32Array(0), pb = 0, T = new Int32Array(0), tb = 0;',
    'let MK = new Int32Array(32), mk = 0;',
    'function need(n) { if (op + n > O.length) { const next = W.alloc(Math.max(O.length * 2, op + n)); O.copy(next, 0, 0, op); O = next; } }',
    ENTRY_SOURCE,
    ...nodes.map((node, k) => messageSource(node, k)),
    ...roots,
    `return { roots: [${roots.map((_, r) => `r${r}`).join(', ')}],`,
    '  target(o, at, p, pbase, t, tbase) { O = o; op = at; P = p; pb = pbase; T = t; tb = tbase; },',
    '  redact(h, q) { RH = h; RQ = q; },',
    '  text: () => O, at: () => op };',
  ].join('\n');
  const timestamp = wireToJson(TimestampSchema);
  const runtime = {
    str: writeString,
    int: writeInteger,
    ascii: writeAscii,
    boolw: writeBool,
    ts: (buf: Uint8Array, start: number, end: number) =>
      formatTimestamp(timestamp(buf, start, end) as never),
    tsw: writeTimestamp,
    struct,
    readEntry: readMapEntry,
    keyConflict: sameOrIndexKey,
    OUT: OUT_OF_ORDER,
    chk: checkUtf8,
    qhas: queryHasName,
    qred: (buf: Uint8Array, start: number, end: number, raw: boolean, names: NameSet) => {
      const text = reader.string(buf, start, end);
      return raw ? redactUrl(text, names) : redactQuery(text, names);
    },
    jstr: writeJsString,
    MARK: JSON.stringify(REDACTED),
    alloc: (n: number) => Buffer.allocUnsafeSlow(n),
    initial: Buffer.allocUnsafeSlow(64 * 1024),
  };
  const made = new Function('R', 'W', 'I', source)(reader, runtime, infos) as {
    roots: ((buf: Uint8Array, start: number, end: number) => void)[];
    target: Writers['target'];
    redact: (headers: NameSet | null, query: NameSet | null) => void;
    text: () => Buffer;
    at: () => number;
  };
  const rootByType = new Map([...shapes.keys()].map((type, r) => [type, made.roots[r]] as const));
  return {
    shapes,
    roots: rootByType,
    target: made.target,
    redact: (redaction) => made.redact(redaction.headers, redaction.queryParams),
    text: made.text,
    at: made.at,
  };
}

/** The compiled writers (compiled on first use). */
export function jsonWriters(): Writers {
  compiled ??= compileWriters();
  return compiled;
}

/** The shape a traffic kind's JSON is written in: its spans by field name. */
export function jsonShape(type: TrafficEventType): JsonShape {
  return jsonWriters().shapes.get(type)!;
}

/** The most span ids any traffic kind uses: the stride of an event's spans. */
export function maxSpans(): number {
  let most = 0;
  for (const shape of jsonWriters().shapes.values()) most = Math.max(most, shape.spans);
  return most;
}

/**
 * Writes a payload's JSON from its decoded object (the decoder's, wire-decode.ts) with the same
 * spans: for the events the one-pass writer leaves to the decoder. `out.at` ends past it.
 */
export function writeFromObject(
  out: { text: Buffer; at: number },
  shape: JsonShape,
  object: EventJson,
  spans: Int32Array,
  base: number,
): void {
  const put = (s: string) => {
    const room = 3 * s.length;
    if (out.at + room > out.text.length) {
      const next = Buffer.allocUnsafeSlow(Math.max(out.text.length * 2, out.at + room));
      out.text.copy(next, 0, 0, out.at);
      out.text = next;
    }
    out.at += out.text.write(s, out.at);
  };
  const write = (node: JsonNode, value: Record<string, unknown>) => {
    put('{');
    node.fields.forEach((f, k) => {
      if (k > 0) put(',');
      spans[base + 2 * f.span] = out.at;
      put(`"${f.name}":`);
      if (f.child !== undefined) write(f.child, value[f.name] as Record<string, unknown>);
      else put(JSON.stringify(value[f.name]));
      spans[base + 2 * f.span + 1] = out.at;
    });
    put('}');
  };
  spans[base] = out.at;
  write(shape.root, object);
  spans[base + 1] = out.at;
}
