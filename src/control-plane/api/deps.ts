import type { SessionRegistry } from '../../agent-plane/sessions/registry.ts';
import type { Config } from '../../config/load.ts';
import type { PipelineStats } from '../../data-plane/pipeline/account-stats.ts';
import type { Taps } from '../../data-plane/pipeline/taps.ts';
import type { TestDelivery } from '../../data-plane/pipeline/test-delivery.ts';
import type { RestrictionCache } from '../../shared/net/restriction-cache.ts';
import type { Keyring } from '../../shared/secrets.ts';
import type { Db } from '../../store/db.ts';
import type { LongLivedAnswers } from './long-lived.ts';

/** What every REST resource plugin is given. */
export interface ApiDeps {
  db: Db;
  config: Config;
  /** Seals and opens destination secrets in the store. */
  keyring: Keyring;
  /** The pipeline's view of a destination's delivery health, shown as its `health`; optional. */
  destinationHealth?: (id: string) => unknown;
  /** Called after a routing change commits, so this instance reloads its routing at once. */
  onPipelineChange?: () => void;
  /**
   * Sends one test event to a destination through the pipeline (POST /event_destinations/{id}/test);
   * the route has already checked that the account owns it. Absent: the action answers 503.
   */
  testDestination?: (accountId: string, id: string) => Promise<TestDelivery>;
  /** The live agent sessions (/tunnel_sessions); absent without an agent listener. */
  sessions?: SessionRegistry;
  /** Called after an account object's delete commits (a deleted credential ends its sessions). */
  onObjectDeleted?: (kind: string, id: string) => void;
  /**
   * The accounts' IP restrictions (createIpRestrictions), to share with other listeners (agents,
   * endpoints) that check them; absent, the REST API makes its own.
   */
  ipRestrictions?: RestrictionCache;
  /** The pipeline's open taps (GET …/tap, POST /filters/preview); absent: those answer 503. */
  taps?: Taps;
  /** An account's own pipeline counters (GET /pipeline/stats); absent: it answers 503. */
  stats?: (accountId: string) => PipelineStats;
  /**
   * The places of event streams and destination tests, sized for the API listener's cap (restApi
   * makes them from MAX_CONNECTIONS unless given).
   */
  longLived: LongLivedAnswers;
}
