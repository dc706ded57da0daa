import { ListValueSchema, StructSchema, ValueSchema } from '@bufbuild/protobuf/wkt';
import { StringListSchema } from '../../gen/agent_ingress/events/v0/traffic_pb.ts';
import {
  bool,
  type Cursor,
  double,
  fieldNamed,
  type MessageInfo,
  messageInfo,
  overrun,
  RECURSION_LIMIT,
  setOwn,
  skip,
  string,
  tag,
  tagOf,
  tooDeep,
  truncated,
  varint32,
  WIRE_64BIT,
  WIRE_LEN,
  WIRE_VARINT,
} from './wire-reader.ts';

// The two nested shapes of the catalogue the generated decoders hand over to hand-written code:
// map<string, StringList> entries (header maps) and google.protobuf.Struct, decoded to the JSON
// protobuf-es and to-json would give. Same bounds as wire-reader.ts: every read stays inside its
// message.

// Map entries: key = 1, value = 2 (protobuf's map encoding).
export const ENTRY_KEY = tagOf(1, WIRE_LEN);
export const ENTRY_VALUE = tagOf(2, WIRE_LEN);
export const ENTRY_INFO: MessageInfo = {
  typeName: 'map entry',
  fields: { 1: { name: 'key', wireType: WIRE_LEN }, 2: { name: 'value', wireType: WIRE_LEN } },
};

// agent_ingress.events.v0.StringList, the values of one header.
const STRING_LIST_VALUES = fieldNamed(StringListSchema, 'values');
export const STRING_LIST_VALUES_TAG = tagOf(STRING_LIST_VALUES.number, WIRE_LEN);
export const STRING_LIST_INFO = messageInfo(
  StringListSchema,
  new Map([[STRING_LIST_VALUES.number, WIRE_LEN]]),
);

/**
 * One entry of a map<string, StringList> into `out` as its own property `key`, as to-json does
 * (a later entry with the same key replaces the earlier one in place).
 */
export function stringListEntry(
  c: Cursor,
  buf: Uint8Array,
  pos: number,
  end: number,
  out: Record<string, string[]>,
  depth: number,
): void {
  let key = '';
  let values: string[] | undefined;
  while (pos < end) {
    let t = buf[pos];
    if (t < 0x80) pos++;
    else {
      t = tag(c, buf, pos, end);
      pos = c.pos;
    }
    if (t === ENTRY_KEY || t === ENTRY_VALUE) {
      let n = buf[pos];
      if (n < 0x80 && pos < end) pos++;
      else {
        n = varint32(c, buf, pos, end);
        pos = c.pos;
      }
      if (n > end - pos) overrun(n, pos, end);
      if (t === ENTRY_KEY) key = string(buf, pos, pos + n);
      // A repeated value within one entry merges into the first, like a message field.
      else values = stringList(c, buf, pos, pos + n, values, depth + 1);
      pos += n;
    } else {
      pos = skip(c, buf, pos, end, t, depth, ENTRY_INFO);
    }
  }
  setOwn(out, key, values === undefined ? [] : values);
}

// The values of a StringList appended to `values` (undefined until the first one: an array
// literal of the first value is smaller and cheaper than pushing onto []).
function stringList(
  c: Cursor,
  buf: Uint8Array,
  pos: number,
  end: number,
  values: string[] | undefined,
  depth: number,
): string[] | undefined {
  if (depth > RECURSION_LIMIT) tooDeep(StringListSchema.typeName);
  while (pos < end) {
    let t = buf[pos];
    if (t < 0x80) pos++;
    else {
      t = tag(c, buf, pos, end);
      pos = c.pos;
    }
    if (t === STRING_LIST_VALUES_TAG) {
      let n = buf[pos];
      if (n < 0x80 && pos < end) pos++;
      else {
        n = varint32(c, buf, pos, end);
        pos = c.pos;
      }
      if (n > end - pos) overrun(n, pos, end);
      const value = string(buf, pos, pos + n);
      if (values === undefined) values = [value];
      else values.push(value);
      pos += n;
    } else {
      pos = skip(c, buf, pos, end, t, depth, STRING_LIST_INFO);
    }
  }
  return values;
}

// google.protobuf.Struct, Value and ListValue, decoded straight to the JsonObject protobuf-es
// gives a Struct field (and to-json passes through): Value's kind oneof becomes null, a number,
// a string, a bool, an object or an array; a Value without a kind is null.

const STRUCT_FIELDS = fieldNamed(StructSchema, 'fields');
const STRUCT_FIELDS_TAG = tagOf(STRUCT_FIELDS.number, WIRE_LEN);
const STRUCT_INFO = messageInfo(StructSchema, new Map([[STRUCT_FIELDS.number, WIRE_LEN]]));

const LIST_VALUES = fieldNamed(ListValueSchema, 'values');
const LIST_VALUES_TAG = tagOf(LIST_VALUES.number, WIRE_LEN);
const LIST_INFO = messageInfo(ListValueSchema, new Map([[LIST_VALUES.number, WIRE_LEN]]));

const VALUE_NULL = fieldNamed(ValueSchema, 'null_value').number;
const VALUE_NUMBER = fieldNamed(ValueSchema, 'number_value').number;
const VALUE_STRING = fieldNamed(ValueSchema, 'string_value').number;
const VALUE_BOOL = fieldNamed(ValueSchema, 'bool_value').number;
const VALUE_STRUCT = fieldNamed(ValueSchema, 'struct_value').number;
const VALUE_LIST = fieldNamed(ValueSchema, 'list_value').number;
const VALUE_NULL_TAG = tagOf(VALUE_NULL, WIRE_VARINT);
const VALUE_NUMBER_TAG = tagOf(VALUE_NUMBER, WIRE_64BIT);
const VALUE_STRING_TAG = tagOf(VALUE_STRING, WIRE_LEN);
const VALUE_BOOL_TAG = tagOf(VALUE_BOOL, WIRE_VARINT);
const VALUE_STRUCT_TAG = tagOf(VALUE_STRUCT, WIRE_LEN);
const VALUE_LIST_TAG = tagOf(VALUE_LIST, WIRE_LEN);
const VALUE_INFO = messageInfo(
  ValueSchema,
  new Map([
    [VALUE_NULL, WIRE_VARINT],
    [VALUE_NUMBER, WIRE_64BIT],
    [VALUE_STRING, WIRE_LEN],
    [VALUE_BOOL, WIRE_VARINT],
    [VALUE_STRUCT, WIRE_LEN],
    [VALUE_LIST, WIRE_LEN],
  ]),
);

/** A JSON value of a decoded google.protobuf.Value. */
export type JsonValue = null | number | string | boolean | JsonValue[] | { [k: string]: JsonValue };

// The length of a length-delimited field at `pos`, leaving c.pos after it.
function lengthAt(c: Cursor, buf: Uint8Array, pos: number, end: number): number {
  const n = varint32(c, buf, pos, end);
  if (n > end - c.pos) overrun(n, c.pos, end);
  return n;
}

/**
 * The entries of a google.protobuf.Struct message into `out` (a fresh object, or the object of
 * an earlier occurrence of the same field, into which protobuf merges).
 */
export function struct(
  c: Cursor,
  buf: Uint8Array,
  pos: number,
  end: number,
  out: { [k: string]: JsonValue },
  depth: number,
): void {
  if (depth > RECURSION_LIMIT) tooDeep(StructSchema.typeName);
  while (pos < end) {
    const t = tag(c, buf, pos, end);
    pos = c.pos;
    if (t !== STRUCT_FIELDS_TAG) {
      pos = skip(c, buf, pos, end, t, depth, STRUCT_INFO);
      continue;
    }
    const entryEnd = lengthAt(c, buf, pos, end) + c.pos;
    pos = c.pos;
    let key = '';
    let value: JsonValue | undefined;
    while (pos < entryEnd) {
      const et = tag(c, buf, pos, entryEnd);
      pos = c.pos;
      if (et === ENTRY_KEY || et === ENTRY_VALUE) {
        const n = lengthAt(c, buf, pos, entryEnd);
        pos = c.pos;
        if (et === ENTRY_KEY) key = string(buf, pos, pos + n);
        else value = valueJson(c, buf, pos, pos + n, value ?? null, depth + 1);
        pos += n;
      } else {
        pos = skip(c, buf, pos, entryEnd, et, depth, ENTRY_INFO);
      }
    }
    setOwn(out, key, value === undefined ? null : value);
  }
}

function isStruct(v: JsonValue): v is { [k: string]: JsonValue } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// One google.protobuf.Value, merged into `v` (the value of an earlier occurrence, or null).
function valueJson(
  c: Cursor,
  buf: Uint8Array,
  pos: number,
  end: number,
  v: JsonValue,
  depth: number,
): JsonValue {
  if (depth > RECURSION_LIMIT) tooDeep(ValueSchema.typeName);
  while (pos < end) {
    const t = tag(c, buf, pos, end);
    pos = c.pos;
    switch (t) {
      case VALUE_NULL_TAG:
        varint32(c, buf, pos, end);
        pos = c.pos;
        v = null;
        break;
      case VALUE_NUMBER_TAG:
        if (end - pos < 8) truncated(pos);
        v = double(buf, pos);
        pos += 8;
        break;
      case VALUE_STRING_TAG: {
        const n = lengthAt(c, buf, pos, end);
        pos = c.pos;
        v = string(buf, pos, pos + n);
        pos += n;
        break;
      }
      case VALUE_BOOL_TAG:
        v = bool(c, buf, pos, end);
        pos = c.pos;
        break;
      case VALUE_STRUCT_TAG: {
        // Another occurrence of the kind the value already has merges into it; another kind
        // replaces it (protobuf's oneof rule).
        const n = lengthAt(c, buf, pos, end);
        pos = c.pos;
        if (!isStruct(v)) v = {};
        struct(c, buf, pos, pos + n, v, depth + 1);
        pos += n;
        break;
      }
      case VALUE_LIST_TAG: {
        const n = lengthAt(c, buf, pos, end);
        pos = c.pos;
        if (!Array.isArray(v)) v = [];
        list(c, buf, pos, pos + n, v, depth + 1);
        pos += n;
        break;
      }
      default:
        pos = skip(c, buf, pos, end, t, depth, VALUE_INFO);
    }
  }
  return v;
}

function list(
  c: Cursor,
  buf: Uint8Array,
  pos: number,
  end: number,
  out: JsonValue[],
  depth: number,
): void {
  if (depth > RECURSION_LIMIT) tooDeep(ListValueSchema.typeName);
  while (pos < end) {
    const t = tag(c, buf, pos, end);
    pos = c.pos;
    if (t === LIST_VALUES_TAG) {
      const n = lengthAt(c, buf, pos, end);
      pos = c.pos;
      out.push(valueJson(c, buf, pos, pos + n, null, depth + 1));
      pos += n;
    } else {
      pos = skip(c, buf, pos, end, t, depth, LIST_INFO);
    }
  }
}
