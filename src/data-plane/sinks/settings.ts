// A sink's settings are declared once, as a JSON Schema (2020-12, as OpenAPI 3.1 uses it): the
// API checks requests against it and shows it in the OpenAPI document, the store finds the
// secrets in it (`writeOnly`), responses show each secret as its `readOnly` `<name>_set` flag,
// and the sink's parser reads defaults and bounds from it. Nothing else names a setting.

/** A JSON Schema. */
export type JsonSchema = Record<string, unknown>;

/** Settings as stored and as requests give them: a JSON object. */
export type Settings = Record<string, unknown>;

/** A sink's settings that cannot be used; `setting` is the dotted name of the bad one. */
export class SinkConfigError extends Error {
  readonly setting: string | undefined;
  constructor(kind: string, message: string, setting?: string) {
    super(`${kind} destination: ${message}`);
    this.name = 'SinkConfigError';
    this.setting = setting;
  }
}

/** The JSON Schema of an object taking `properties`, of which `required` must be given. */
export function object(
  properties: Record<string, JsonSchema>,
  required: string[] = [],
): JsonSchema {
  return { type: 'object', properties, required, additionalProperties: false };
}

/** A write-only secret and, beside it, the flag responses show instead. */
export function secret(name: string, description: string): Record<string, JsonSchema> {
  return {
    [name]: { type: 'string', writeOnly: true, description },
    [`${name}_set`]: { type: 'boolean', readOnly: true, description: `whether ${name} is set` },
  };
}

function properties(schema: JsonSchema): Record<string, JsonSchema> {
  return (schema.properties ?? {}) as Record<string, JsonSchema>;
}

/** Whether a setting's schema declares properties (it may take an object). */
function objectSchema(schema: JsonSchema): boolean {
  return schema.properties !== undefined;
}

function isObject(value: unknown): value is Settings {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * An integer setting: its value, or the schema's `default` when not given; outside the schema's
 * `minimum`..`maximum` (or not an integer) it is refused with a message naming it.
 */
export function integer(kind: string, schema: JsonSchema, settings: Settings, name: string) {
  const declared = properties(schema)[name];
  const value = settings[name] ?? declared.default;
  const min = (declared.minimum as number | undefined) ?? 1;
  const max = (declared.maximum as number | undefined) ?? Number.MAX_SAFE_INTEGER;
  if (!Number.isSafeInteger(value) || (value as number) < min || (value as number) > max) {
    const range =
      max === Number.MAX_SAFE_INTEGER ? `a positive integer` : `an integer in ${min}..${max}`;
    throw new SinkConfigError(kind, `${name} must be ${range}`, name);
  }
  return value as number;
}

/** A setting's value, or the schema's `default` when not given. */
export function setting<T>(schema: JsonSchema, settings: Settings, name: string): T {
  return (settings[name] ?? properties(schema)[name].default) as T;
}

/** Settings with each secret (a `writeOnly` property, at any depth) replaced by `change(it)`. */
export function mapSecrets(
  schema: JsonSchema,
  settings: Settings,
  change: (secret: string) => string,
): Settings {
  const out: Settings = { ...settings };
  for (const [name, declared] of Object.entries(properties(schema))) {
    const value = settings[name];
    if (declared.writeOnly === true && typeof value === 'string') out[name] = change(value);
    else if (isObject(value) && objectSchema(declared)) {
      out[name] = mapSecrets(declared, value, change);
    }
  }
  return out;
}

/**
 * Settings with each secret the request left out taken from `previous` (the stored settings of
 * the same kind), where the object holding it is given: a PATCH need not resend a password.
 */
export function keepSecrets(schema: JsonSchema, settings: Settings, previous: unknown): Settings {
  if (!isObject(previous)) return settings;
  const out: Settings = { ...settings };
  for (const [name, declared] of Object.entries(properties(schema))) {
    const value = settings[name];
    if (declared.writeOnly === true && value === undefined && previous[name] !== undefined) {
      out[name] = previous[name];
    } else if (isObject(value) && objectSchema(declared)) {
      out[name] = keepSecrets(declared, value, previous[name]);
    }
  }
  return out;
}

/**
 * Settings as responses show them: in the schema's order, each secret replaced by its
 * `<name>_set` flag (true when set and not empty); settings not given are left out.
 */
export function present(schema: JsonSchema, settings: Settings): Settings {
  const out: Settings = {};
  for (const [name, declared] of Object.entries(properties(schema))) {
    const value = settings[name];
    if (declared.readOnly === true) {
      const secret = name.slice(0, -'_set'.length);
      out[name] = typeof settings[secret] === 'string' && settings[secret] !== '';
      continue;
    }
    if (value === undefined || declared.writeOnly === true) continue;
    out[name] = isObject(value) && objectSchema(declared) ? present(declared, value) : value;
  }
  return out;
}
