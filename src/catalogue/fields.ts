import { type DescField, type DescMessage, getOption, ScalarType } from '@bufbuild/protobuf';
import { filterable } from '../gen/agent_ingress/events/v0/options_pb.ts';
import { StringListSchema } from '../gen/agent_ingress/events/v0/traffic_pb.ts';
import { type TrafficEventType, trafficSchema } from './event-types.ts';
import type { FieldKind, FieldSpec } from './types.ts';

// The leaf fields of a traffic kind are found by walking its proto descriptor: a message field
// is a group (recursed into) unless it is a Timestamp; everything else is a leaf. The field
// names are the proto names, which are the event tables' names, so the dotted path is the field's name there.

const TIMESTAMP = 'google.protobuf.Timestamp';
const STRUCT = 'google.protobuf.Struct';

/** The catalogue kind of a proto field, or undefined when the field is a group of fields. */
export function fieldKindOf(field: DescField): FieldKind | undefined {
  switch (field.fieldKind) {
    case 'scalar':
      return scalarKind(field);
    case 'message':
      return field.message.typeName === TIMESTAMP ? 'timestamp' : undefined;
    case 'list':
      if (field.listKind === 'scalar' && field.scalar === ScalarType.STRING) return 'string_list';
      if (field.listKind === 'message' && field.message.typeName === STRUCT) return 'json';
      break;
    case 'map':
      if (field.mapKind === 'message' && field.message.typeName === StringListSchema.typeName) {
        return 'string_list_map';
      }
      break;
  }
  throw unsupported(field);
}

function scalarKind(field: DescField & { fieldKind: 'scalar' }): FieldKind {
  switch (field.scalar) {
    case ScalarType.STRING:
      return 'string';
    case ScalarType.INT64:
      return 'int64';
    case ScalarType.INT32:
      return 'int32';
    case ScalarType.BOOL:
      return 'bool';
  }
  throw unsupported(field);
}

// A proto edit that introduces a type the catalogue has no kind for must fail loudly at startup,
// not produce a column or filter declaration of the wrong kind.
function unsupported(field: DescField): Error {
  return new Error(`catalogue: field ${field.parent.typeName}.${field.name} has no catalogue kind`);
}

/** The catalogue of one traffic kind: its leaves, its groups and its filterable leaves. */
interface TrafficCatalogue {
  fields: readonly FieldSpec[];
  groups: readonly string[];
  filterable: readonly FieldSpec[];
}

const cache = new Map<TrafficEventType, TrafficCatalogue>();

// Depth-first in field order, so leaves and groups keep the proto's (= SPEC's) order.
function walk(desc: DescMessage, prefix: string[], fields: FieldSpec[], groups: string[]): void {
  for (const field of desc.fields) {
    const path = [...prefix, field.name];
    const kind = fieldKindOf(field);
    if (kind === undefined) {
      groups.push(path.join('.'));
      walk((field as DescField & { fieldKind: 'message' }).message, path, fields, groups);
      continue;
    }
    fields.push(
      Object.freeze({
        name: path.join('.'),
        path: Object.freeze(path) as string[],
        kind,
        filterable: getOption(field, filterable) === true,
      }),
    );
  }
}

function catalogueOf(type: TrafficEventType): TrafficCatalogue {
  let entry = cache.get(type);
  if (entry) return entry;
  const fields: FieldSpec[] = [];
  const groups: string[] = [];
  walk(trafficSchema(type), [], fields, groups);
  entry = Object.freeze({
    fields: Object.freeze(fields),
    groups: Object.freeze(groups),
    filterable: Object.freeze(fields.filter((f) => f.filterable)),
  });
  cache.set(type, entry);
  return entry;
}

/** Every leaf field of a traffic kind, with SPEC's dotted name, its kind and filterability. */
export function trafficFields(type: TrafficEventType): readonly FieldSpec[] {
  return catalogueOf(type).fields;
}

/** Every group of a traffic kind as a dotted name (`conn`, `http`, `http.request`, ...). */
export function groupNames(type: TrafficEventType): readonly string[] {
  return catalogueOf(type).groups;
}

/** The leaves SPEC marks Filterable: the only fields a CEL filter may reference. */
export function filterableFields(type: TrafficEventType): readonly FieldSpec[] {
  return catalogueOf(type).filterable;
}
