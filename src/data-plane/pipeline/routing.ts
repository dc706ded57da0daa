import { isTrafficType } from '../../catalogue/index.ts';
import { cachedFilter } from '../filter/cached-filter.ts';
import {
  type CompiledFilter,
  compileFilter,
  compileSpanProjection,
  type SpanProjection,
} from '../filter/index.ts';
import {
  DEFAULT_REDACTION,
  type Redaction,
  type RedactionSettings,
  redactionOf,
} from '../redaction/policy.ts';
import { newRouteTally, type RouteTally } from './match-tally.ts';
import { RoutePlan } from './route-plan.ts';
import { sampleBound } from './sampling.ts';

/** The subscriptions the pipeline routes by, for all accounts (loaded from the store). */
export interface RoutingConfig {
  version: number;
  subscriptions: {
    id: string;
    accountId: string;
    /**
     * sampleRate: the share of filtered events delivered (0 < r <= 1); omitted: 1. The
     * redaction settings (redactHeaders, keepCredentials): omitted, the defaults.
     */
    sources: ({
      type: string;
      filter: string;
      fields: string[];
      sampleRate?: number;
    } & RedactionSettings)[];
    destinationIds: string[];
  }[];
}

/** Where one subscription sends one event type, with its compiled filter and projection. */
export interface Route {
  subscriptionId: string;
  /** Undefined: every event matches. */
  filter: CompiledFilter | undefined;
  /** The source's sampling bound (sampling.ts), applied after the filter; undefined: keep all. */
  sampleBound: number | undefined;
  /** The selected fields as spans of the event's JSON text ([0]: every field). */
  projection: SpanProjection;
  /** What the source's deliveries redact (docs/security.md#redacted). */
  redaction: Redaction;
  /** Equal for routes that select the same fields and redact alike: their output is written once. */
  projectionKey: string;
  destinationIds: readonly string[];
  /** Where routeRequest counts this route's matches in one request (match-tally.ts). */
  tally: RouteTally;
}

/** Routes by account and event type, compiled once per configuration version. */
export interface Routing {
  readonly version: number;
  routes(accountId: string, eventType: string): readonly Route[];
  /** The same routes indexed for routeRequest (route-plan.ts). */
  plan(accountId: string, eventType: string): RoutePlan<Route>;
  /** The redaction an event's text is written with first: its first route's, or the default. */
  redaction(accountId: string, eventType: string): Redaction;
  /** Sources that no longer compile (the catalogue changed under a stored filter); skipped. */
  readonly broken: readonly { subscriptionId: string; type: string; error: string }[];
}

const NONE: readonly Route[] = Object.freeze([]);
const NO_PLAN = new RoutePlan<Route>(NONE);

/**
 * A lookup by account, then event type, that remembers the last account's table: requests mostly
 * carry runs of one account's events, an event's type is one of a few constant strings (their
 * hashes are kept), and no key is built per event.
 */
function lookup<T>(
  table: Map<string, Map<string, Route[]>>,
  value: (routes: Route[]) => T,
  none: T,
): (accountId: string, eventType: string) => T {
  const byAccount = new Map<string, Map<string, T>>();
  for (const [accountId, routesByType] of table) {
    const types = new Map<string, T>();
    for (const [eventType, routes] of routesByType) types.set(eventType, value(routes));
    byAccount.set(accountId, types);
  }
  const noTypes = new Map<string, T>();
  let lastAccount: string | undefined;
  let types = noTypes;
  return (accountId, eventType) => {
    if (accountId !== lastAccount) {
      types = byAccount.get(accountId) ?? noTypes;
      lastAccount = accountId;
    }
    return types.get(eventType) ?? none;
  };
}

/** Compiles every source of every subscription; a broken source is skipped and reported. */
export function compileRouting(config: RoutingConfig): Routing {
  // By account, then event type.
  const table = new Map<string, Map<string, Route[]>>();
  const broken: { subscriptionId: string; type: string; error: string }[] = [];
  for (const subscription of config.subscriptions) {
    if (subscription.destinationIds.length === 0) continue;
    for (const source of subscription.sources) {
      let route: Route;
      try {
        const traffic = isTrafficType(source.type);
        const redaction = redactionOf(source);
        const fieldsKey =
          traffic && source.fields.length > 0 ? [...source.fields].sort().join(',') : '*';
        route = {
          subscriptionId: subscription.id,
          filter:
            traffic && source.filter.trim() !== ''
              ? cachedFilter(compileFilter(source.type, source.filter))
              : undefined,
          sampleBound: sampleBound(source.sampleRate ?? 1),
          projection: traffic ? compileSpanProjection(source.type, source.fields) : [0],
          redaction,
          projectionKey: `${fieldsKey}|${redaction.key}`,
          destinationIds: subscription.destinationIds,
          tally: newRouteTally(),
        };
      } catch (error) {
        broken.push({ subscriptionId: subscription.id, type: source.type, error: String(error) });
        continue;
      }
      let types = table.get(subscription.accountId);
      if (types === undefined) {
        types = new Map();
        table.set(subscription.accountId, types);
      }
      const routes = types.get(source.type);
      if (routes === undefined) types.set(source.type, [route]);
      else routes.push(route);
    }
  }
  const plan = lookup(table, (routes) => new RoutePlan(routes), NO_PLAN);
  return {
    version: config.version,
    broken,
    routes: (accountId, eventType) => plan(accountId, eventType).routes,
    plan,
    redaction: lookup(table, (routes) => routes[0].redaction, DEFAULT_REDACTION),
  };
}
