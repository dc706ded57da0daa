import { newId } from '../../../shared/ids.ts';
import {
  deleteObject,
  getObject,
  insertObject,
  updateObject,
} from '../../../store/account-objects.ts';
import type { Queryable } from '../../../store/db.ts';
import { deleteOwn, type OwnTable, selectOwn, selectPage } from '../../../store/pages.ts';
import type { JsonObject, Resource } from '../resource-types.ts';
import type { Draft, Storage, StoredObject } from './family.ts';

/**
 * A new object of `resource` from a family's draft, the body's description and metadata and the
 * references it gives (`refs`); its secret is sealed by the caller.
 */
export function newObject(
  resource: Resource,
  accountId: string,
  draft: Draft,
  text: { description?: string; metadata?: string },
  refs: JsonObject = {},
): StoredObject {
  const scope = draft.unique?.scope;
  return {
    id: draft.id ?? newId(resource.idPrefix),
    account_id: accountId,
    kind: resource.path,
    parent_id: draft.parentId ?? null,
    unique_scope: scope === undefined ? null : scope === 'account' ? accountId : '',
    unique_key: draft.unique?.key ?? null,
    description: text.description ?? '',
    metadata: text.metadata ?? '',
    fields: { ...draft.fields, ...refs },
    secret: null,
    created_at: new Date(),
  };
}

/** Objects of `kind` in account_objects. */
export function accountObjects(kind: string): Storage {
  return {
    get: (db, accountId, id, lock) => getObject(db, accountId, kind, id, lock),
    page: (db, accountId, limit, beforeId) => selectPage(db, { kind }, accountId, limit, beforeId),
    insert: insertObject,
    update: updateObject,
    delete: (tx, object) => deleteObject(tx, object.id),
  };
}

/** The columns every table of its own has. */
export interface OwnRow {
  id: string;
  account_id: string;
  description: string;
  metadata: string;
  created_at: Date;
}

/** How a table of its own maps onto stored objects; reads and deletes are generic. */
export interface OwnTableMapping<Row extends OwnRow> {
  table: OwnTable;
  /** The values of a row beyond the common columns, as the family's hooks read them. */
  fields(row: Row): StoredObject['fields'];
  /** The token hash or other unique key a row holds, if any (an API key's). */
  uniqueKey?(row: Row): string;
  insert(tx: Queryable, object: StoredObject): Promise<void>;
  update(tx: Queryable, object: StoredObject): Promise<void>;
}

/** A family's own table seen as stored objects. */
export function ownTable<Row extends OwnRow>(mapping: OwnTableMapping<Row>): Storage {
  const { table } = mapping;
  const toObject = (row: Row): StoredObject => ({
    id: row.id,
    account_id: row.account_id,
    kind: table,
    parent_id: null,
    unique_scope: mapping.uniqueKey === undefined ? null : '',
    unique_key: mapping.uniqueKey?.(row) ?? null,
    description: row.description,
    metadata: row.metadata,
    fields: mapping.fields(row),
    secret: null,
    created_at: row.created_at,
  });
  return {
    async get(db, accountId, id, lock) {
      const row = await selectOwn<Row>(db, table, accountId, id, lock);
      return row === undefined ? undefined : toObject(row);
    },
    async page(db, accountId, limit, beforeId) {
      const page = await selectPage<Row>(db, { table }, accountId, limit, beforeId);
      return { rows: page.rows.map(toObject), more: page.more };
    },
    insert: mapping.insert,
    update: mapping.update,
    delete: (tx, object) => deleteOwn(tx, table, object.id),
  };
}
