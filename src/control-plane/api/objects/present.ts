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
 * An account object as the API shows it and as its audit events carry it: the declared fields
 * in declaration order; references as `{id, uri}`; write-only fields never; a shown-once field
 * only from `shownOnce` (the create response), null otherwise.
 */
export function presentObject(
  resource: Resource,
  row: AccountObjectRow,
  publicUrl: string,
  shownOnce: JsonObject = {},
): JsonObject {
  const refs = shownRefs(resource);
  const common: JsonObject = {
    id: row.id,
    uri: `${publicUrl}/${resource.path}/${row.id}`,
    created_at: row.created_at.toISOString(),
    description: row.description,
    metadata: row.metadata,
  };
  const ref = (path: string, id: unknown) => ({ id, uri: `${publicUrl}/${path}/${id}` });
  const shown: JsonObject = {};
  for (const [name, field] of Object.entries(resource.fields)) {
    if (field.writeOnly) continue;
    if (COMMON.has(name)) shown[name] = common[name];
    else if (field.shownOnce) shown[name] = shownOnce[name] ?? null;
    else if (refs.has(name)) {
      const value = row.fields[name];
      const path = refs.get(name)!;
      shown[name] = Array.isArray(value)
        ? value.map((id) => ref(path, id))
        : value == null
          ? null
          : ref(path, value);
    } else shown[name] = row.fields[name] ?? null;
  }
  return shown;
}
