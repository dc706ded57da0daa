import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../../shared/errors.ts';
import { isUniqueViolation, type Queryable } from '../../../store/db.ts';
import { withAudit } from '../audit.ts';
import type { ApiDeps } from '../deps.ts';
import { listRoute } from '../pagination.ts';
import type { JsonObject, Resource } from '../resource-types.ts';
import { auditEvent, notFound } from '../resources.ts';
import { routingChange } from '../routing-change.ts';
import { acceptPathEchoes, readBody, rejectUnstorableStrings } from '../validate.ts';
import type { Draft, Family, FamilyContext, FamilyKit, StoredObject, Update } from './family.ts';
import { presentObject } from './present.ts';
import { accountObjects, newObject } from './storage.ts';

type Change = 'created' | 'updated' | 'deleted';
type ById = FastifyRequest<{ Params: { id: string } }>;

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

/** The true/false flags DELETE takes as `resource` declares them; undefined when it declares none. */
function readDeleteQuery(resource: Resource, query: unknown): Record<string, boolean> | undefined {
  if (resource.deleteQuery === undefined) return undefined;
  const names = Object.keys(resource.deleteQuery);
  const params = (query ?? {}) as Record<string, unknown>;
  for (const key of Object.keys(params)) {
    if (!names.includes(key)) {
      throw new AppError(
        'ERR_INVALID_QUERY',
        `unknown query parameter "${key}"; allowed: ${names.join(', ')}`,
        { parameter: key },
      );
    }
  }
  const flags: Record<string, boolean> = {};
  for (const name of names) {
    const value = params[name] ?? 'false';
    if (value !== 'true' && value !== 'false') {
      throw new AppError('ERR_INVALID_QUERY', `"${name}" must be true or false`, {
        parameter: name,
      });
    }
    flags[name] = value === 'true';
  }
  return flags;
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

/** CRUD routes of one family at the resource's path, each change with its audit event. */
export function familyRoutes(family: Family) {
  const { resource } = family;
  const path = `/${resource.path}`;
  return async function routes(app: FastifyInstance, deps: ApiDeps): Promise<void> {
    app.addHook('preValidation', rejectUnstorableStrings);
    const echoId = { preValidation: acceptPathEchoes({ id: 'id' }) };
    const { db, config, keyring } = deps;
    const storage = family.storage?.(keyring) ?? accountObjects(resource.path);
    const openSecret = (row: StoredObject) =>
      row.secret === null ? undefined : keyring.open(row.secret);

    /** Objects as shown (the audit event's object), with what the family's `shown` adds. */
    const present = async (tx: Queryable, rows: StoredObject[]) => {
      const shown = (await family.shown?.(rows, { db: tx, config, openSecret })) ?? [];
      return rows.map((row, i) => presentObject(resource, row, config.publicUrl, shown[i]));
    };
    const presentOne = async (tx: Queryable, row: StoredObject) => (await present(tx, [row]))[0];
    /** An object as answers show it: what audit events carry, and what the family adds live. */
    const answer = (object: JsonObject) => ({
      ...object,
      ...family.live?.(object.id as string, deps),
    });

    /** Runs a change in a transaction with its audit event; the work returns the object shown. */
    const change = async (
      request: FastifyRequest,
      kind: Change,
      work: (ctx: FamilyContext) => Promise<JsonObject>,
    ) => {
      const eventType = auditEvent(resource, kind);
      let shown: JsonObject | undefined;
      // The audit event carries what `audited` makes of the object; the answer, the object.
      const write = async (tx: Queryable) => {
        shown = await work(context(tx, request));
        return family.audited?.(shown) ?? shown;
      };
      const { accountId } = request.caller;
      const audit = {
        eventType,
        accountId,
        principal: request.caller,
        publicUrl: config.publicUrl,
      };
      if (family.routing) await routingChange(deps, request, eventType, write);
      else await withAudit(db, audit, write);
      return answer(shown!);
    };

    const context = (tx: Queryable, request: FastifyRequest): FamilyContext => ({
      tx,
      accountId: request.caller.accountId,
      caller: request.caller,
      clientIp: request.ip,
      config,
      deps,
      openSecret,
      find: (kind, id) => accountObjects(kind).get(tx, request.caller.accountId, id, false),
    });

    /** An object of the caller's, locked for the change, or the 404. */
    async function locked(ctx: FamilyContext, id: string): Promise<StoredObject> {
      const row = await storage.get(ctx.tx, ctx.accountId, id, true);
      if (row === undefined) throw notFound(resource, id);
      return row;
    }

    app.post(path, async (request, reply) => {
      const { body, text } = readBody(request.body, resource, 'create');
      let shownOnce: JsonObject | undefined;
      const prepared = await family.prepare?.(body, 'create');
      const created = await change(request, 'created', async (base) => {
        const ctx = { ...base, prepared };
        const refs = await readRefs(body, resource, ctx);
        const draft = await family.create(body, ctx);
        shownOnce = draft.shownOnce;
        const row = newObject(resource, ctx.accountId, draft, text, refs);
        if (draft.secret !== undefined) row.secret = keyring.seal(draft.secret);
        await stored(() => storage.insert(ctx.tx, row), draft.unique);
        await family.afterChange?.(row, undefined, ctx);
        return presentOne(ctx.tx, row);
      });
      return reply.code(201).send({ ...created, ...shownOnce });
    });

    /** The caller's object `id` as GET answers it, or the 404. */
    async function show(request: FastifyRequest, id: string): Promise<JsonObject> {
      const row = await storage.get(db, request.caller.accountId, id, false);
      if (row === undefined) throw notFound(resource, id);
      return answer(await presentOne(db, row));
    }

    app.get<{ Params: { id: string } }>(`${path}/:id`, (request) =>
      show(request, request.params.id),
    );

    listRoute<StoredObject>(
      app,
      deps,
      resource,
      (accountId, limit, beforeId) => storage.page(db, accountId, limit, beforeId),
      async (rows) => (await present(db, rows)).map(answer),
    );

    /** Applies an update to the caller's object `id`, with its audit event. */
    const updated = (
      request: ById,
      make: (row: StoredObject, ctx: FamilyContext) => Promise<Partial<StoredObject>>,
      prepared?: unknown,
    ) =>
      change(request, 'updated', async (base) => {
        const ctx = { ...base, prepared };
        const row = await locked(ctx, request.params.id);
        const next = { ...row, ...(await make(row, ctx)) };
        await storage.update(ctx.tx, next);
        await family.afterChange?.(next, row, ctx);
        return presentOne(ctx.tx, next);
      });

    /** The columns an update changes. */
    const applied = (row: StoredObject, update: Update, more: JsonObject = {}) => ({
      fields: { ...row.fields, ...update.fields, ...more },
      secret: update.secret === undefined ? row.secret : keyring.seal(update.secret),
    });

    app.patch<{ Params: { id: string } }>(`${path}/:id`, echoId, async (request) => {
      const { body, text } = readBody(request.body, resource, 'update');
      const prepared = await family.prepare?.(body, 'update');
      const make = async (row: StoredObject, ctx: FamilyContext) => ({
        description: text.description ?? row.description,
        metadata: text.metadata ?? row.metadata,
        ...applied(
          row,
          (await family.update?.(row, body, ctx)) ?? {},
          await readRefs(body, resource, ctx),
        ),
      });
      return updated(request, make, prepared);
    });

    for (const [name, clear] of Object.entries(family.clear ?? {})) {
      app.delete<{ Params: { id: string } }>(`${path}/:id/${name}`, async (request, reply) => {
        await updated(request, async (row) => applied(row, clear(row)));
        return reply.code(204).send();
      });
    }

    app.delete<{ Params: { id: string } }>(`${path}/:id`, async (request, reply) => {
      const query = readDeleteQuery(resource, request.query);
      await change(request, 'deleted', async (base) => {
        const ctx = { ...base, query };
        const row = await locked(ctx, request.params.id);
        // Shown before the family's work: what the object was (an ingress's running job).
        const object = await presentOne(ctx.tx, row);
        await family.beforeDelete?.(row, ctx);
        await storage.delete(ctx.tx, row);
        return object;
      });
      deps.onObjectDeleted?.(resource.path, request.params.id);
      return reply.code(204).send();
    });

    const kit: FamilyKit = {
      deps,
      show,
      change: (request, id, work) =>
        change(request, 'updated', async (ctx) => {
          const row = await locked(ctx, id);
          await work(row, ctx);
          return presentOne(ctx.tx, row);
        }),
    };
    family.routes?.(app, kit);
  };
}
