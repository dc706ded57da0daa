import { cachedFilter } from '../filter/cached-filter.ts';
import {
  type CompiledFilter,
  compileFilter,
  compileProjection,
  type Projection,
} from '../filter/index.ts';
import type { EventJson } from '../wire-json/to-json.ts';

// The worker's half of a tap (docs/decisions.md#taps): copies out the records an open tap wants.
// Bounded per request, so a busy subscription costs a tap at most TEE_PER_REQUEST copies of
// strings the routing made anyway; with no tap open, createTee answers undefined once per request
// and routing does nothing more.

/** What a tap watches. */
export type TapTarget =
  /** A subscription's deliveries (after filter, sampling and field selection), one type or all. */
  | { kind: 'subscription'; subscriptionId: string; type?: string }
  /** A filter not saved yet (POST /filters/preview): one account's events of one type. */
  | { kind: 'preview'; accountId: string; type: string; filter: string; fields: string[] };

/** An open tap, as the main thread sends it with each task while the tap is open. */
export type TapSpec = TapTarget & { id: string };

/** What a request gave one tap: the records copied out and how many matched in all. */
export interface TapCatch {
  id: string;
  records: string[];
  matched: number;
}

/** Records one tap takes from one request at most; the rest are only counted. */
export const TEE_PER_REQUEST = 16;

interface Preview {
  filter: CompiledFilter | undefined;
  project: Projection | undefined;
}

// Compiled once per preview tap and worker; forgotten when the tap is no longer sent. null: it
// does not compile here (the route compiled it first, so only a catalogue change can do that);
// such a tap sees nothing rather than fail the request.
const previews = new Map<string, Preview | null>();

function compilePreview(spec: Extract<TapSpec, { kind: 'preview' }>): Preview | null {
  try {
    return {
      filter:
        spec.filter.trim() === '' ? undefined : cachedFilter(compileFilter(spec.type, spec.filter)),
      project: spec.fields.length === 0 ? undefined : compileProjection(spec.type, spec.fields),
    };
  } catch {
    return null;
  }
}

function previewOf(spec: Extract<TapSpec, { kind: 'preview' }>): Preview | null {
  let preview = previews.get(spec.id);
  if (preview === undefined) {
    preview = compilePreview(spec);
    previews.set(spec.id, preview);
  }
  return preview;
}

/** The tee of one request: fed by routeRequest, read once at the end. */
export interface Tee {
  /** A subscription routed `json` (its delivered record) for an event of `type`. */
  routed(subscriptionId: string, type: string, json: string): void;
  /**
   * Every valid event, for preview taps: `object` decodes its payload (only for an open preview
   * of its account and kind), `envelope` serializes it with an object.
   */
  event(
    accountId: string,
    type: string,
    object: () => EventJson,
    envelope: (object: EventJson) => string,
  ): void;
  catches(): TapCatch[];
}

/** A tee for `specs` (the taps open now); undefined when none is, so routing skips it. */
export function createTee(specs: readonly TapSpec[] | undefined): Tee | undefined {
  if (specs === undefined || specs.length === 0) {
    previews.clear();
    return undefined;
  }
  for (const id of previews.keys()) if (!specs.some((spec) => spec.id === id)) previews.delete(id);
  const caught = new Map<string, TapCatch>();
  const take = (id: string, json: () => string) => {
    let tapCatch = caught.get(id);
    if (tapCatch === undefined) {
      tapCatch = { id, records: [], matched: 0 };
      caught.set(id, tapCatch);
    }
    tapCatch.matched++;
    if (tapCatch.records.length < TEE_PER_REQUEST) tapCatch.records.push(json());
  };
  const subscriptions = specs.filter((spec) => spec.kind === 'subscription');
  const previewSpecs = specs.filter((spec) => spec.kind === 'preview');
  return {
    routed(subscriptionId, type, json) {
      for (const spec of subscriptions) {
        if (spec.subscriptionId !== subscriptionId) continue;
        if (spec.type !== undefined && spec.type !== type) continue;
        take(spec.id, () => json);
      }
    },
    event(accountId, type, object, envelope) {
      let payload: EventJson | undefined;
      for (const spec of previewSpecs) {
        if (spec.accountId !== accountId || spec.type !== type) continue;
        const preview = previewOf(spec);
        if (preview === null) continue;
        const { filter, project } = preview;
        if (payload === undefined) payload = object();
        const selected = payload;
        if (filter !== undefined && !filter.matches(selected)) continue;
        take(spec.id, () => envelope(project === undefined ? selected : project(selected)));
      }
    },
    catches: () => [...caught.values()],
  };
}
