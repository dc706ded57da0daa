import type { Config } from '../../../config/load.ts';
import type { Caller } from '../../../shared/caller.ts';
import type { AccountObjectRow } from '../../../store/account-objects.ts';
import type { Queryable } from '../../../store/db.ts';
import type { JsonObject, Resource } from '../resource-types.ts';

/**
 * One family of account objects (credentials, certificates, IP policies, …): its declaration
 * and only the code that is truly its own. The generic routes (routes.ts) check bodies against
 * the declaration, store, page, present and audit; a family turns a checked body into what is
 * stored and may refuse a change.
 */
export interface Family {
  resource: Resource;
  /**
   * Slow work a create needs that reads no store (generating a key pair), done before the
   * change's transaction so the store is not held meanwhile; create gets it as `ctx.prepared`.
   */
  prepare?(body: JsonObject): Promise<unknown>;
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
}

/** What a create stores. */
export interface Draft {
  /** The id, when the object must name itself (a certificate's key id); else a new one. */
  id?: string;
  /** The shown fields beyond id, uri, created_at, description, metadata and declared refs. */
  fields: JsonObject;
  /** A secret in clear (a private key); the layer seals it. Never shown. */
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

/** A stored object of a family. */
export type StoredObject = AccountObjectRow;

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
  /** The object's secret in clear. */
  openSecret(object: StoredObject): string | undefined;
  /** What `prepare` made for this create (undefined otherwise). */
  prepared?: unknown;
  /** An object of the caller's account at another family's `path`. */
  find(path: string, id: string): Promise<StoredObject | undefined>;
}
