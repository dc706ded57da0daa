// The worker's count of what one request matched, for the per-account stats (GET /pipeline/stats):
// per account, events received and matched; per subscription, events matched. Counted on the
// route objects and in runs of one account, so the hot loop pays a comparison and an increment;
// the main thread gets one small summary per request, never a message per event.

/** What one request matched, as the worker answers it. */
export interface Tally {
  /** [account id, events, events that matched a subscription], one entry per account. */
  accounts: [string, number, number][];
  /** [subscription id, events matched], per source; a subscription may appear once per source. */
  subscriptions: [string, number][];
}

/** A route's scratch count (one per route and worker): valid while `request` is the current one. */
export interface RouteTally {
  request: number;
  matched: number;
}

/** A fresh scratch count for a compiled route. */
export const newRouteTally = (): RouteTally => ({ request: 0, matched: 0 });

let requests = 0;

/** The tally of one request: fed by routeRequest, read once at the end. */
export class RequestTally {
  private readonly request = ++requests;
  private readonly touched: { subscriptionId: string; tally: RouteTally }[] = [];
  private readonly accounts = new Map<string, [string, number, number]>();
  private account: string | undefined;
  private received = 0;
  private matched = 0;

  /** One event of `accountId` was read; `matched`: it matched at least one subscription. */
  event(accountId: string, matched: boolean): void {
    if (accountId !== this.account) {
      this.flush();
      this.account = accountId;
    }
    this.received++;
    if (matched) this.matched++;
  }

  /** `route` matched one event (after its filter and sampling). */
  route(route: { subscriptionId: string; tally: RouteTally }): void {
    const { tally } = route;
    if (tally.request !== this.request) {
      tally.request = this.request;
      tally.matched = 0;
      this.touched.push(route);
    }
    tally.matched++;
  }

  result(): Tally {
    this.flush();
    return {
      accounts: [...this.accounts.values()],
      subscriptions: this.touched.map(({ subscriptionId, tally }) => [
        subscriptionId,
        tally.matched,
      ]),
    };
  }

  private flush(): void {
    if (this.account === undefined || this.received === 0) return;
    const entry = this.accounts.get(this.account);
    if (entry === undefined) {
      this.accounts.set(this.account, [this.account, this.received, this.matched]);
    } else {
      entry[1] += this.received;
      entry[2] += this.matched;
    }
    this.received = 0;
    this.matched = 0;
  }
}

/** Events per account: what a refused request carried (its events' accounts once decoded). */
export function eventsByAccount(events: readonly { accountId: string }[]): [string, number][] {
  const counts = new Map<string, number>();
  for (const { accountId } of events) counts.set(accountId, (counts.get(accountId) ?? 0) + 1);
  return [...counts];
}
