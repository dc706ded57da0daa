import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Config } from '../../../config/load.ts';
import type { Caller } from '../../../shared/caller.ts';
import type { Keyring } from '../../../shared/secrets.ts';
import type { AccountObjectRow } from '../../../store/account-objects.ts';
import type { Queryable } from '../../../store/db.ts';
import type { ApiDeps } from '../deps.ts';
import type { JsonObject, Resource } from '../resource-types.ts';

/**
 * One family of REST objects (API keys, Agent Ingresses, event destinations and subscriptions,
 * credentials, certificates, IP policies, …): its declaration and only the code that is truly its
 * own. The generic routes (routes.ts) check bodies against the declaration, lock, store, page,
 * present and audit; a family turns a checked body into what is stored and may refuse a change.
 * Every hook is optional but `create`.
 */
export interface Family {
  resource: Resource;
  /** Where its objects are kept; a kind of account_objects when absent. */
  storage?: (keyring: Keyring) => Storage;
  /**
   * Its changes alter the pipeline's routing: each bumps the routing version in its transaction
   * and tells the pipeline once committed (routing-change.ts).
   */
  routing?: boolean;
  /**
   * Work on a checked body before the change's transaction: slow work that reads no store
   * (generating a key pair), so the store is not held meanwhile, and checks whose errors come
   * before a 404 (a target's shape). The change gets it as `ctx.prepared`.
   */
  prepare?(body: JsonObject, mode: 'create' | 'update'): unknown;
  /** What a create stores, from a body already checked against the declaration. */
  create(body: JsonObject, ctx: FamilyContext): Draft | Promise<Draft>;
  /** What an update changes beyond description and metadata (which the layer merges). */
  update?(current: StoredObject, body: JsonObject, ctx: FamilyContext): Update | Promise<Update>;
  /** Throws an AppError to refuse a delete (an object still in use), or deletes dependents. */
  beforeDelete?(current: StoredObject, ctx: FamilyContext): void | Promise<void>;
  /** Runs in the change's transaction once it is stored (`previous`: undefined on create). */
  afterChange?(
    stored: StoredObject,
    previous: StoredObject | undefined,
    ctx: FamilyContext,
  ): void | Promise<void>;
  /**
   * Parts that `DELETE /<path>/{id}/<name>` takes off (ngrok's sub-resource deletes, e.g. a
   * reserved domain's certificate): the update each makes. Declare them as extraRoutes too.
   */
  clear?: Record<string, (current: StoredObject) => Update>;
  /**
   * The fields shown that are not stored as shown, for a page of objects at once: read from
   * other tables (a subscription's sources), from the configuration (an ingress's name servers),
   * or shown otherwise than kept (a target without its secrets). In a change, read in its
   * transaction; the audit event carries them.
   */
  shown?(objects: StoredObject[], ctx: ShowContext): JsonObject[] | Promise<JsonObject[]>;
  /**
   * The object as its audit events carry it, when that differs from answers (an endpoint's
   * policy with its secrets redacted); answers show what `shown` made.
   */
  audited?(object: JsonObject): JsonObject;
  /** What answers add that audit events do not carry (a destination's health now). */
  live?(id: string, deps: ApiDeps): JsonObject;
  /** Routes of its own beyond CRUD (actions, sub-collections); declare them as extraRoutes too. */
  routes?(app: FastifyInstance, kit: FamilyKit): void;
}

/** A stored object of a family, whatever its table: common columns, `fields` for the rest. */
export type StoredObject = AccountObjectRow;

/**
 * Where a family keeps its objects: a kind of account_objects (most families), or a table of its
 * own (API keys, Agent Ingresses, event destinations and subscriptions) seen through the same
 * shape. The generic routes call only these.
 */
export interface Storage {
  /** One object of the account; `lock` holds it until the change's transaction ends. */
  get(
    db: Queryable,
    accountId: string,
    id: string,
    lock: boolean,
  ): Promise<StoredObject | undefined>;
  /** A page of the account's objects, newest first (pagination.ts). */
  page(
    db: Queryable,
    accountId: string,
    limit: number,
    beforeId: string | undefined,
  ): Promise<{ rows: StoredObject[]; more: boolean }>;
  /** Stores a new object; a clash of a unique key throws the store's unique violation. */
  insert(tx: Queryable, object: StoredObject): Promise<void>;
  /** Writes an object's changed values back. */
  update(tx: Queryable, object: StoredObject): Promise<void>;
  delete(tx: Queryable, object: StoredObject): Promise<void>;
}

/** What a create stores. */
export interface Draft {
  /** The id, when the object must name itself (a certificate's key id); else a new one. */
  id?: string;
  /** The shown fields beyond id, uri, created_at, description, metadata and declared refs. */
  fields: JsonObject;
  /** A secret in clear (a private key, an endpoint's policy); the layer seals it. Shown only by `shown`. */
  secret?: string;
  /** What must not repeat: a clash answers 409 ERR_ALREADY_EXISTS naming `field`. */
  unique?: { key: string; scope: 'account' | 'service'; field: string };
  /** The object this one belongs to (a rule's policy). */
  parentId?: string;
  /** Shown in the create response only (a token); null in every other answer and event. */
  shownOnce?: JsonObject;
}

/** What an update changes: fields merged over the stored ones, and a new secret. */
export type Update = Pick<Partial<Draft>, 'fields' | 'secret'>;

/** What `shown` may read. */
export interface ShowContext {
  /** The change's transaction, or the store for a read. */
  db: Queryable;
  config: Config;
  /** The object's secret in clear (an endpoint's policy, shown to its owner). */
  openSecret(object: StoredObject): string | undefined;
}

/** What a family's code may use while a change is made. */
export interface FamilyContext {
  /** The change's transaction (its audit event is written in it). */
  tx: Queryable;
  accountId: string;
  /** The API key making the change (the audit principal of events a family writes itself). */
  caller: Caller;
  /** The client's address (TCP peer), e.g. to refuse a change that would lock it out. */
  clientIp: string;
  config: Config;
  deps: ApiDeps;
  /** The object's secret in clear. */
  openSecret(object: StoredObject): string | undefined;
  /** What `prepare` made for this change (undefined otherwise). */
  prepared?: unknown;
  /** The flags DELETE took, as its declaration's `deleteQuery` names them (delete only). */
  query?: Record<string, boolean>;
  /** An object of the caller's account at another family's `path`. */
  find(path: string, id: string): Promise<StoredObject | undefined>;
}

/** The generic steps a family's own routes use, so they read, lock, audit and answer like CRUD. */
export interface FamilyKit {
  deps: ApiDeps;
  /** The caller's object `id` as GET answers it, or the 404. */
  show(request: FastifyRequest, id: string): Promise<JsonObject>;
  /**
   * A change of what the object keeps outside its row (a subscription's sources): the object is
   * locked (or the 404), `work` runs, the change is audited as an update of the object; answers
   * the object as shown.
   */
  change(
    request: FastifyRequest,
    id: string,
    work: (object: StoredObject, ctx: FamilyContext) => Promise<void>,
  ): Promise<JsonObject>;
}
