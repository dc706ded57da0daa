// What routeRequest needs per event, worked out once per (account, event type) when the routing
// compiles: which routes share a field selection (their record is written once and copied), and
// each route's destinations as small indexes. Per event, who already has which record is kept in
// typed arrays marked with the event's number, so nothing is allocated or cleared per event
// (it was a list of objects searched by projection key and destination id).

/** The part of a route a plan indexes. */
interface PlannedRoute {
  projectionKey: string;
  destinationIds: readonly string[];
}

/** The routes of one account and event type, indexed for routeRequest. */
export class RoutePlan<R extends PlannedRoute = PlannedRoute> {
  readonly routes: readonly R[];
  /** Per route, its field selection's index (routes with one projection key share it). */
  readonly group: Int32Array;
  /** Per route, its destinations as indexes into `destinationIds`. */
  readonly destinations: readonly Int32Array[];
  /** The plan's distinct destinations. */
  readonly destinationIds: readonly string[];
  /**
   * Per destination, what routeRequest writes its records with in the current request (its
   * own type: the routing does not know it).
   */
  readonly outputs: unknown[];
  private request = -1;
  private readonly width: number;
  private stamp = 0;
  /** Per group, the stamp of the event whose record for it is written. */
  private readonly groupStamp: Int32Array;
  /** Per group × destination, the stamp of the event whose record it has. */
  private readonly sentStamp: Int32Array;

  constructor(routes: readonly R[]) {
    this.routes = routes;
    const groups = new Map<string, number>();
    const destinations = new Map<string, number>();
    this.group = Int32Array.from(routes, (route) => {
      if (!groups.has(route.projectionKey)) groups.set(route.projectionKey, groups.size);
      return groups.get(route.projectionKey)!;
    });
    this.destinations = routes.map((route) =>
      Int32Array.from(route.destinationIds, (id) => {
        if (!destinations.has(id)) destinations.set(id, destinations.size);
        return destinations.get(id)!;
      }),
    );
    this.destinationIds = [...destinations.keys()];
    this.width = destinations.size;
    this.outputs = new Array(destinations.size).fill(undefined);
    this.groupStamp = new Int32Array(groups.size);
    this.sentStamp = new Int32Array(groups.size * destinations.size);
  }

  /** Starts request number `serial`: the outputs of another request are forgotten. */
  forRequest(serial: number): void {
    if (this.request === serial) return;
    this.request = serial;
    this.outputs.fill(undefined);
  }

  /** Starts the next event: no record of it written, no destination has one. */
  nextEvent(): void {
    if (this.stamp === 0x7fffffff) {
      this.stamp = 0;
      this.groupStamp.fill(0);
      this.sentStamp.fill(0);
    }
    this.stamp++;
  }

  /** Whether this event's record for group `g` is written (then marks it written). */
  written(g: number): boolean {
    if (this.groupStamp[g] === this.stamp) return true;
    this.groupStamp[g] = this.stamp;
    return false;
  }

  /** Whether destination `d` has this event's record for group `g` (then marks it sent). */
  sent(g: number, d: number): boolean {
    const at = g * this.width + d;
    if (this.sentStamp[at] === this.stamp) return true;
    this.sentStamp[at] = this.stamp;
    return false;
  }
}
