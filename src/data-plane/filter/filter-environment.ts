import {
  filterableFields,
  groupNames,
  type TrafficEventType,
  trafficFields,
} from '../../catalogue/index.ts';
import type { EventJson } from '../wire-json/to-json.ts';
import { type CelEnvironment, celEnvironment } from './cel-environment.ts';

export { GLOBAL_MATCHES } from './cel-environment.ts';

// The CEL environment of one traffic kind, declared from the catalogue's Filterable fields only:
// the event is `ev`, and each top-level group is also bound by its name (docs/decisions.md#filters). A field
// that is not declared cannot type-check, so a filter can never read a non-filterable field.
// The views and their types are cel-environment.ts's, shared with Traffic Policy.

/** The declarations of one traffic kind, shared by every filter compiled for it. */
export interface FilterEnvironment extends CelEnvironment {
  readonly type: TrafficEventType;
  /** The evaluation context of one event: `{ev, conn}` built from the event's JSON payload. */
  toContext(event: EventJson): Record<string, unknown>;
}

// A name the event kind has (a leaf, a group, or a path below a leaf such as a header name).
function isCatalogueName(type: TrafficEventType, name: string): boolean {
  return (
    groupNames(type).includes(name) ||
    trafficFields(type).some((f) => name === f.name || name.startsWith(`${f.name}.`))
  );
}

function buildEnvironment(type: TrafficEventType): FilterEnvironment {
  const ce = celEnvironment({
    label: 'filter',
    leaves: filterableFields(type).map((f) => ({ name: f.name, path: f.path, kind: f.kind })),
    rootAlias: 'ev',
    unreadable: (name, written) =>
      isCatalogueName(type, name) ? `field '${written}' is not filterable` : undefined,
  });
  return Object.freeze({ ...ce, type });
}

const cache = new Map<TrafficEventType, FilterEnvironment>();

/** The (cached) filter environment of a traffic kind; built once, on first use. */
export function filterEnvironment(type: TrafficEventType): FilterEnvironment {
  let fe = cache.get(type);
  if (!fe) {
    fe = buildEnvironment(type);
    cache.set(type, fe);
  }
  return fe;
}
