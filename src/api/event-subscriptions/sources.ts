import {
  EVENT_TYPES,
  isKnownEventType,
  isTrafficType,
  TRAFFIC_EVENT_TYPES,
} from '../../catalogue/index.ts';
import { AppError } from '../../errors.ts';
import {
  compileFilter,
  compileProjection,
  FieldSelectionError,
  FilterError,
} from '../../filter/index.ts';
import { type JsonObject, objectWith } from '../validate.ts';

// A subscription's sources: which event kinds it delivers, each with a CEL filter and a field
// selection (traffic kinds only). Both are compiled here, when the subscription is written, so
// a bad expression is a 400 naming its position and the allowed fields, never an event-time
// failure (DESIGN.md §4 "Filter syntax", "Field selection").

/** One source as written: '' filter = every event, [] fields = every field. */
export interface SourceInput {
  type: string;
  filter: string;
  fields: string[];
}

/** The fields a request may give for one source. */
export const SOURCE_FIELDS = ['type', 'filter', 'fields'];
/** The fields a PATCH of one source may change (its type names it, so it cannot change). */
export const SOURCE_UPDATE_FIELDS = ['filter', 'fields'];

function unknownEventType(type: string, field: string): AppError {
  const versioned = `${type}.v0`;
  const hint = isKnownEventType(versioned) ? ` (did you mean "${versioned}"?)` : '';
  const examples = [...TRAFFIC_EVENT_TYPES, 'api_key_created.v0', 'agent_session_start.v0'];
  return new AppError(
    'ERR_UNKNOWN_EVENT_TYPE',
    `unknown event type "${type}"${hint}; valid types include ${examples.join(', ')} (${EVENT_TYPES.length} in all)`,
    { field, type },
  );
}

// The dotted name of `key` inside the object at `where` ('' = the request body itself).
function at(where: string, key: string): string {
  return where === '' ? key : `${where}.${key}`;
}

function filterField(body: JsonObject, where: string): string | undefined {
  const value = body.filter;
  if (value === undefined || typeof value === 'string') return value;
  const field = at(where, 'filter');
  throw new AppError('ERR_INVALID_FIELD', `"${field}" must be a string`, { field });
}

function fieldsField(body: JsonObject, where: string): string[] | undefined {
  const value = body.fields;
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || !value.every((name) => typeof name === 'string')) {
    const field = at(where, 'fields');
    throw new AppError('ERR_INVALID_FIELD', `"${field}" must be a list of field names`, { field });
  }
  return value;
}

/**
 * Checks a source's filter and field selection against the catalogue by compiling them. Audit
 * kinds take neither (the compilers' own messages say so when one is given).
 */
export function checkSource(source: SourceInput, where: string): void {
  const traffic = isTrafficType(source.type);
  if (traffic || source.filter !== '') {
    try {
      compileFilter(source.type, source.filter);
    } catch (error) {
      if (!(error instanceof FilterError)) throw error;
      throw new AppError('ERR_INVALID_FILTER', error.message, {
        field: at(where, 'filter'),
        type: source.type,
        reason: error.code,
        ...(error.position === undefined ? {} : { position: error.position }),
        allowed_fields: error.allowedFields,
      });
    }
  }
  if (traffic || source.fields.length > 0) {
    try {
      compileProjection(source.type, source.fields);
    } catch (error) {
      if (!(error instanceof FieldSelectionError)) throw error;
      throw new AppError('ERR_INVALID_FIELDS', error.message, {
        field: at(where, 'fields'),
        type: source.type,
        invalid_fields: error.invalidNames,
      });
    }
  }
}

/**
 * Reads and checks one source `{type, filter?, fields?}`; `where` locates it in messages ('' when
 * the source is the whole request body).
 */
export function readSource(value: unknown, where: string): SourceInput {
  const body = objectWith(value, SOURCE_FIELDS, where);
  const type = body.type;
  const field = at(where, 'type');
  if (type === undefined) {
    throw new AppError('ERR_MISSING_FIELD', `"${field}" is required`, { field });
  }
  if (typeof type !== 'string') {
    throw new AppError('ERR_INVALID_FIELD', `"${field}" must be a string`, { field });
  }
  if (!isKnownEventType(type)) throw unknownEventType(type, field);
  const source = {
    type,
    filter: filterField(body, where) ?? '',
    fields: fieldsField(body, where) ?? [],
  };
  checkSource(source, where);
  return source;
}

/** Reads a request's `sources` list: each source checked, each event kind at most once. */
export function readSources(value: unknown): SourceInput[] {
  if (!Array.isArray(value)) {
    throw new AppError('ERR_INVALID_FIELD', '"sources" must be a list of sources', {
      field: 'sources',
    });
  }
  const seen = new Set<string>();
  return value.map((item, index) => {
    const source = readSource(item, `sources[${index}]`);
    if (seen.has(source.type)) {
      throw new AppError(
        'ERR_INVALID_FIELD',
        `"sources" names the event type "${source.type}" twice; a subscription has one source per type`,
        { field: `sources[${index}].type`, type: source.type },
      );
    }
    seen.add(source.type);
    return source;
  });
}

/** Reads a PATCH of one source: `filter` and/or `fields`; checked later against its type. */
export function readSourceChanges(value: unknown): { filter?: string; fields?: string[] } {
  if (value !== null && typeof value === 'object' && 'type' in value) {
    throw new AppError(
      'ERR_FIELD_NOT_UPDATABLE',
      '"type" of a source cannot be changed; add a source of the new type and delete this one',
      { field: 'type' },
    );
  }
  const body = objectWith(value, SOURCE_UPDATE_FIELDS);
  return { filter: filterField(body, ''), fields: fieldsField(body, '') };
}
