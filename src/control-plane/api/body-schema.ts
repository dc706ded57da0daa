import { createRequire } from 'node:module';
import type { Ajv2020, ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import { AppError } from '../../shared/errors.ts';
import type { JsonSchema, Resource, ShapeCodes } from './resource-types.ts';

// Request bodies are checked by Ajv (the JSON Schema validator Fastify itself uses) against
// schemas derived from the declarations; this module turns Ajv's errors into the catalogue's.
// Schemas are compiled on first use, not at start: the service starts in ~100 ms and most
// routes are never called by a given process.

const BYTES = 'x-max-utf8-bytes';
const NOT_UPDATABLE = 'x-not-updatable';

let ajv: Ajv2020 | undefined;

/** Ajv, loaded on the first request that needs it (it costs ~30 ms of start-up otherwise). */
function loadAjv(): typeof Ajv2020 {
  return createRequire(import.meta.url)('ajv/dist/2020.js').Ajv2020;
}
const validators = new WeakMap<JsonSchema, ValidateFunction>();

function validator(schema: JsonSchema): ValidateFunction {
  let validate = validators.get(schema);
  if (validate !== undefined) return validate;
  ajv ??= new (loadAjv())({ allErrors: true, strict: false, validateFormats: false, verbose: true })
    .addKeyword({
      keyword: BYTES,
      type: 'string',
      schemaType: 'number',
      validate: (max: number, data: string) => Buffer.byteLength(data, 'utf8') <= max,
    })
    .addKeyword({ keyword: NOT_UPDATABLE, schemaType: 'string' });
  validate = ajv.compile(requestShape(schema));
  validators.set(schema, validate);
  return validate;
}

/** A schema as requests must meet it: read-only properties (shown, never taken) left out. */
function requestShape(schema: JsonSchema): JsonSchema {
  const shape = { ...schema };
  if (schema.properties !== undefined) {
    const properties = Object.entries(schema.properties as Record<string, JsonSchema>).filter(
      ([, property]) => property.readOnly !== true,
    );
    shape.properties = Object.fromEntries(properties.map(([k, p]) => [k, requestShape(p)]));
  }
  if (schema.items !== undefined) shape.items = requestShape(schema.items as JsonSchema);
  return shape;
}

const bodySchemas = new WeakMap<Resource, Record<'create' | 'update', JsonSchema>>();

/**
 * What a create or update of `resource` takes: every field the service does not assign, of its
 * declared schema (text fields: a string within their bound, counted in UTF-8 bytes or in
 * characters), the required ones on create; on update a field that cannot change is refused.
 */
export function bodySchema(resource: Resource, mode: 'create' | 'update'): JsonSchema {
  let schemas = bodySchemas.get(resource);
  if (schemas === undefined) {
    schemas = { create: deriveBody(resource, 'create'), update: deriveBody(resource, 'update') };
    bodySchemas.set(resource, schemas);
  }
  return schemas[mode];
}

function deriveBody(resource: Resource, mode: 'create' | 'update'): JsonSchema {
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const [name, field] of Object.entries(resource.fields)) {
    if (field.serverAssigned) continue;
    if (mode === 'update' && field.notUpdatable !== undefined) {
      properties[name] = { not: {}, [NOT_UPDATABLE]: field.notUpdatable };
      continue;
    }
    const { maxBytes, maxChars } = field.text ?? {};
    properties[name] = field.checkedByRoute
      ? {}
      : field.text === undefined
        ? field.schema
        : {
            type: 'string',
            ...(maxBytes === undefined ? {} : { [BYTES]: maxBytes }),
            ...(maxChars === undefined ? {} : { maxLength: maxChars }),
          };
    properties[name] = { ...properties[name], description: field.doc };
    if (mode === 'create' && field.required) required.push(name);
  }
  return { type: 'object', properties, required, additionalProperties: false };
}

/** The error a request should hear first: the shallowest, and at one depth the most basic. */
export function firstError(value: unknown, schema: JsonSchema): ErrorObject | undefined {
  const validate = validator(schema);
  if (validate(value)) return undefined;
  const rank = (error: ErrorObject) => depth(error) * 10 + (RANKS[error.keyword] ?? RANKS.other);
  return [...(validate.errors ?? [])].sort((a, b) => rank(a) - rank(b))[0];
}

const RANKS: Record<string, number> = {
  not: 0,
  type: 1,
  additionalProperties: 2,
  required: 3,
  other: 4,
};

function depth(error: ErrorObject): number {
  const path = error.instancePath;
  return path === '' ? 0 : path.split('/').length - 1;
}

/** `where` and a JSON pointer below it as a dotted name, like `target.kafka.brokers[0]`. */
function dotted(where: string, pointer: string, key?: string): string {
  const segments = pointer === '' ? [] : pointer.slice(1).split('/');
  if (key !== undefined) segments.push(key);
  let name = where;
  for (const raw of segments) {
    const segment = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (/^\d+$/.test(segment)) name += `[${segment}]`;
    else name = name === '' ? segment : `${name}.${segment}`;
  }
  return name;
}

const KINDS: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  integer: 'a whole number',
  boolean: 'true or false',
  object: 'an object',
  null: 'null',
};

/** What a value of `schema` must be, in words. */
function kindOf(schema: JsonSchema): string {
  if (schema.enum !== undefined) {
    return `one of ${(schema.enum as unknown[]).map((c) => JSON.stringify(c)).join(', ')}`;
  }
  const types = [schema.type ?? 'object'].flat() as string[];
  return types
    .map((type) => {
      if (type !== 'array') return KINDS[type] ?? type;
      const items = schema.items as JsonSchema | undefined;
      return items?.type === 'string' ? 'a list of strings' : 'a list';
    })
    .join(' or ');
}

const count = (n: number, what: string) => (n === 1 ? `one ${what}` : `${n} ${what}s`);

/** Ajv's other keywords in the catalogue's words. */
const WORDS: Record<string, (params: { limit: number; pattern: string }) => string> = {
  minItems: ({ limit }) => `must have at least ${count(limit, 'item')}`,
  maxItems: ({ limit }) => `must have at most ${count(limit, 'item')}`,
  uniqueItems: () => 'must not name the same value twice',
  minLength: ({ limit }) => `must be at least ${count(limit, 'character')} long`,
  minimum: ({ limit }) => `must be at least ${limit}`,
  maximum: ({ limit }) => `must be at most ${limit}`,
  pattern: ({ pattern }) => `must match ${pattern}`,
  minProperties: ({ limit }) => `must have at least ${count(limit, 'key')}`,
  maxProperties: ({ limit }) => `must have at most ${count(limit, 'key')}`,
};

/** An Ajv error as the catalogue's error; `where` names the checked value. */
export function toAppError(error: ErrorObject, where: string, codes: ShapeCodes): AppError {
  const field = dotted(where, error.instancePath);
  const parent = error.parentSchema as JsonSchema;
  switch (error.keyword) {
    case 'type':
    case 'enum':
      if (field === '') {
        return new AppError('ERR_INVALID_FIELD', 'the request body must be a JSON object');
      }
      return new AppError(codes.invalid, `"${field}" must be ${kindOf(parent)}`, { field });
    case 'additionalProperties': {
      const name = dotted(where, error.instancePath, error.params.additionalProperty);
      const allowed = Object.entries((parent.properties ?? {}) as Record<string, JsonSchema>)
        .filter(([, property]) => property[NOT_UPDATABLE] === undefined)
        .map(([key]) => key);
      return new AppError(
        'ERR_UNKNOWN_FIELD',
        `unknown field "${name}"; allowed fields: ${allowed.join(', ')}`,
        { field: name },
      );
    }
    case 'required': {
      const key = error.params.missingProperty as string;
      const name = dotted(where, error.instancePath, key);
      const doc = ((parent.properties ?? {}) as Record<string, JsonSchema>)[key]?.description;
      const why = doc === undefined ? '' : `: ${doc}`;
      return new AppError(codes.missing, `"${name}" is required${why}`, { field: name });
    }
    case 'not':
      return new AppError(
        'ERR_FIELD_NOT_UPDATABLE',
        `"${field}" cannot be changed; ${parent[NOT_UPDATABLE]}`,
        { field },
      );
    case BYTES:
      return new AppError(
        'ERR_FIELD_TOO_LONG',
        `"${field}" must be at most ${error.schema} bytes of UTF-8`,
        { field, max_bytes: error.schema },
      );
    case 'maxLength':
      return new AppError(
        'ERR_FIELD_TOO_LONG',
        `"${field}" must be at most ${error.schema} characters`,
        { field, max_chars: error.schema },
      );
    default:
      return new AppError(
        codes.invalid,
        `"${field}" ${WORDS[error.keyword]?.(error.params as { limit: number; pattern: string }) ?? error.message}`,
        {
          field,
        },
      );
  }
}
