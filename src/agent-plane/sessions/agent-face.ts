import type { Config } from '../../config/load.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Db } from '../../store/db.ts';
import type { IpAllowed } from './ip-allowed.ts';
import type { LiveSession } from './live-session.ts';
import type { SessionRegistry } from './registry.ts';

// What every agent face (the SSH listener, ngrok's agent listener) serves its agents with.

/** Opens the TCP endpoint of a session bound to a reserved address. */
export type OpenTcp = (
  session: LiveSession,
  address: { host: string; port: number },
) => Promise<{ close(): Promise<void> }>;

export interface AgentFaceDeps {
  config: Config;
  db: Db;
  logger: Logger;
  registry: SessionRegistry;
  /** Wakes the audit relay after a session event is written. */
  kick: () => void;
  /** The IP restriction check; absent: every address is allowed. */
  ipAllowed?: IpAllowed;
  /** Opens a reserved address's TCP endpoint; absent: TCP is off. */
  openTcp?: OpenTcp;
}
