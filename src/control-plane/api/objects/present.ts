import type { AccountObjectRow } from '../../../store/account-objects.ts';
import type { JsonObject, Resource } from '../resource-types.ts';

const COMMON = new Set(['id', 'uri', 'created_at', 'description', 'metadata']);

/** The fields a resource shows references under, with the path of what they name. */
export function shownRefs(resource: Resource): Map<string, string> {
  const refs = new Map<string, string>();
  for (const field of Object.values(resource.fields)) {
    if (field.ref !== undefined) refs.set(field.ref.shownAs, field.ref.path);
  }
  return refs;
}

/**
 * An object as the API shows it and as its audit events carry it: the declared fields in
 * declaration order, from the row or `shown` (what the family's `shown` hook adds); references
 * as `{id, uri}`; write-only fields never, fields shown only when known when the row or `shown`
 * has them (else answers add them);
 * a shown-once field null (the create response adds it).
 */
export function presentObject(
  resource: Resource,
  row: AccountObjectRow,
  publicUrl: string,
  shown: JsonObject = {},
): JsonObject {
  const refs = shownRefs(resource);
  const common: JsonObject = {
    id: row.id,
    uri: `${publicUrl}/${resource.path}/${row.id}`,
    created_at: row.created_at.toISOString(),
    description: row.description,
    metadata: row.metadata,
  };
  const values = { ...row.fields, ...shown };
  const ref = (path: string, id: unknown) => ({ id, uri: `${publicUrl}/${path}/${id}` });
  const object: JsonObject = {};
  for (const [name, field] of Object.entries(resource.fields)) {
    if (field.writeOnly || (field.sometimes && values[name] === undefined)) continue;
    if (COMMON.has(name)) object[name] = common[name];
    else if (field.shownOnce) object[name] = null;
    else if (refs.has(name)) {
      const value = values[name];
      const path = refs.get(name)!;
      object[name] = Array.isArray(value)
        ? value.map((id) => ref(path, id))
        : value == null
          ? null
          : ref(path, value);
    } else object[name] = values[name] ?? null;
  }
  return object;
}
