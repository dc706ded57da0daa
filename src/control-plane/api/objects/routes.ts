import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../../shared/errors.ts';
import { newId } from '../../../shared/ids.ts';
import {
  type AccountObjectRow,
  deleteObject,
  getObject,
  insertObject,
  updateObject,
} from '../../../store/account-objects.ts';
import { isUniqueViolation, type Queryable } from '../../../store/db.ts';
import { withAudit } from '../audit.ts';
import type { ApiDeps } from '../deps.ts';
import { listRoute } from '../pagination.ts';
import type { JsonObject, Resource } from '../resource-types.ts';
import { auditEvent, notFound } from '../resources.ts';
import { acceptPathEchoes, readBody, rejectUnstorableStrings } from '../validate.ts';
import type { Draft, Family, FamilyContext, Update } from './family.ts';
import { presentObject } from './present.ts';

type Change = 'created' | 'updated' | 'deleted';

/** The declared references a body gives, checked to name objects of the caller's account. */
async function readRefs(body: JsonObject, resource: Resource, ctx: FamilyContext) {
  const refs: JsonObject = {};
  for (const [name, field] of Object.entries(resource.fields)) {
    if (field.ref === undefined || body[name] === undefined) continue;
    const ids = [body[name]].flat().filter((id) => id !== null) as string[];
    for (const id of ids) {
      if ((await ctx.find(field.ref.path, id)) === undefined) {
        throw new AppError('ERR_INVALID_FIELD', `"${name}": "${id}" was not found`, {
          field: name,
        });
      }
    }
    refs[field.ref.shownAs] = body[name];
  }
  return refs;
}

/** CRUD routes of one family at the resource's path, each change with its audit event. */
export function familyRoutes(family: Family) {
  const { resource } = family;
  const path = `/${resource.path}`;
  return async function routes(app: FastifyInstance, deps: ApiDeps): Promise<void> {
    app.addHook('preValidation', rejectUnstorableStrings);
    app.addHook('preValidation', acceptPathEchoes({ id: 'id' }));
    const { db, config, keyring } = deps;
    const base = config.publicUrl;
    const present = (row: AccountObjectRow, shownOnce?: JsonObject) =>
      presentObject(resource, row, base, shownOnce);

    /** Runs a change in a transaction with its audit event; the work returns the object shown. */
    const change = (
      request: FastifyRequest,
      kind: Change,
      work: (ctx: FamilyContext) => Promise<AccountObjectRow>,
    ) =>
      withAudit(
        db,
        {
          eventType: auditEvent(resource, kind),
          accountId: request.caller.accountId,
          principal: request.caller,
          publicUrl: base,
        },
        async (tx) => present(await work(context(tx, request))),
      );

    const context = (tx: Queryable, request: FastifyRequest): FamilyContext => ({
      tx,
      accountId: request.caller.accountId,
      caller: request.caller,
      clientIp: request.ip,
      config,
      openSecret: (row) => (row.secret === null ? undefined : keyring.open(row.secret)),
      find: (kind, id) => getObject(tx, request.caller.accountId, kind, id),
    });

    /** An object of the caller's, locked for the change, or the 404. */
    async function locked(ctx: FamilyContext, id: string): Promise<AccountObjectRow> {
      const row = await getObject(ctx.tx, ctx.accountId, resource.path, id, true);
      if (row === undefined) throw notFound(resource, id);
      return row;
    }

    /** Stores a change, turning a unique clash into a 409 naming the field. */
    async function stored(write: () => Promise<unknown>, unique: Draft['unique']): Promise<void> {
      try {
        await write();
      } catch (error) {
        if (unique === undefined || !isUniqueViolation(error)) throw error;
        throw new AppError('ERR_ALREADY_EXISTS', `this "${unique.field}" is already in use`, {
          field: unique.field,
        });
      }
    }

    app.post(path, async (request, reply) => {
      const { body, text } = readBody(request.body, resource, 'create');
      let shownOnce: JsonObject | undefined;
      const prepared = await family.prepare?.(body);
      const created = await change(request, 'created', async (ctx) => {
        const refs = await readRefs(body, resource, ctx);
        const draft = await family.create(body, { ...ctx, prepared });
        shownOnce = draft.shownOnce;
        const row: AccountObjectRow = {
          id: draft.id ?? newId(resource.idPrefix),
          account_id: ctx.accountId,
          kind: resource.path,
          parent_id: draft.parentId ?? null,
          unique_scope: scopeOf(draft.unique, ctx.accountId),
          unique_key: draft.unique?.key ?? null,
          description: text.description ?? '',
          metadata: text.metadata ?? '',
          fields: { ...draft.fields, ...refs },
          secret: draft.secret === undefined ? null : keyring.seal(draft.secret),
          created_at: new Date(),
        };
        await stored(() => insertObject(ctx.tx, row), draft.unique);
        await family.afterChange?.(row, undefined, ctx);
        return row;
      });
      return reply.code(201).send({ ...created, ...shownOnce });
    });

    app.get<{ Params: { id: string } }>(`${path}/:id`, async (request) => {
      const row = await getObject(db, request.caller.accountId, resource.path, request.params.id);
      if (row === undefined) throw notFound(resource, request.params.id);
      return present(row);
    });

    listRoute<AccountObjectRow>(app, deps, resource, (rows) => rows.map((row) => present(row)));

    /** Applies an update to the caller's object `id`, with its audit event. */
    const updated = (
      request: FastifyRequest<{ Params: { id: string } }>,
      make: (row: AccountObjectRow, ctx: FamilyContext) => Promise<Partial<AccountObjectRow>>,
    ) =>
      change(request, 'updated', async (ctx) => {
        const row = await locked(ctx, request.params.id);
        const next = { ...row, ...(await make(row, ctx)) };
        await updateObject(ctx.tx, next);
        await family.afterChange?.(next, row, ctx);
        return next;
      });

    /** The columns an update changes. */
    const applied = (row: AccountObjectRow, update: Update, more: JsonObject = {}) => ({
      fields: { ...row.fields, ...update.fields, ...more },
      secret: update.secret === undefined ? row.secret : keyring.seal(update.secret),
    });

    app.patch<{ Params: { id: string } }>(`${path}/:id`, async (request) => {
      const { body, text } = readBody(request.body, resource, 'update');
      return updated(request, async (row, ctx) => ({
        description: text.description ?? row.description,
        metadata: text.metadata ?? row.metadata,
        ...applied(
          row,
          (await family.update?.(row, body, ctx)) ?? {},
          await readRefs(body, resource, ctx),
        ),
      }));
    });

    for (const [name, clear] of Object.entries(family.clear ?? {})) {
      app.delete<{ Params: { id: string } }>(`${path}/:id/${name}`, async (request, reply) => {
        await updated(request, async (row) => applied(row, clear(row)));
        return reply.code(204).send();
      });
    }

    app.delete<{ Params: { id: string } }>(`${path}/:id`, async (request, reply) => {
      await change(request, 'deleted', async (ctx) => {
        const row = await locked(ctx, request.params.id);
        await family.beforeDelete?.(row, ctx);
        await deleteObject(ctx.tx, row.id);
        return row;
      });
      deps.onObjectDeleted?.(resource.path, request.params.id);
      return reply.code(204).send();
    });
  };
}

/** The store's scope of a unique key: the account, or '' across the service. */
function scopeOf(unique: Draft['unique'], accountId: string): string | null {
  if (unique === undefined) return null;
  return unique.scope === 'account' ? accountId : '';
}
