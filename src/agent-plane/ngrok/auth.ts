import type { Queryable } from '../../store/db.ts';
import { type AgentCredential, credentialOfToken } from '../sessions/authenticate.ts';
import type { IpAllowed } from '../sessions/ip-allowed.ts';
import { recordable } from '../sessions/session-events.ts';
import { dialledAccount } from './dialled.ts';
import { type AuthRequest, NGROK_ERRORS, NgrokRefusal, VERSIONS } from './messages.ts';

// Auth, the first RPC of an ngrok agent: its authtoken is a tunnel credential's token (found by
// its hash, as over SSH), the credential's account must own the agent ingress the agent dialled
// (unless it dialled the service's own connect name), and the account's `agent` IP restrictions
// must let the agent's address in. What the agent says of itself (Extra) fills its sessions.

/** What an authenticated agent is. */
export interface AuthenticatedAgent {
  credential: AgentCredential;
  /** The protocol version both speak. */
  version: string;
  os: string;
  arch: string;
  agentVersion: string;
  hostname: string;
  userAgent: string;
  metadata: string;
  /** Its heartbeat timing, ms. */
  heartbeat: { intervalMs: number; toleranceMs: number };
  /** Whether the agent can be told to stop (it registered a handler), and if not, why. */
  stopUnsupported: string | undefined;
  /** Likewise for the commands the API sends (agent-commands.ts). */
  commandsUnsupported: { restart: string | undefined; update: string | undefined };
}

/** A refusal the session event records: the agent's credential is known. */
export class AuthRefusal extends NgrokRefusal {
  readonly credential: AgentCredential | undefined;
  constructor(message: string, code: string | undefined, credential?: AgentCredential) {
    super(message, code);
    this.credential = credential;
  }
}

/** Agent-given text as it may be recorded (control characters out, bounded). */
const text = (value: unknown): string => (typeof value === 'string' ? recordable(value) : '');

/** A duration in nanoseconds as ms (0 when absent or not a number). */
const nsToMs = (value: unknown): number =>
  typeof value === 'number' && Number.isFinite(value) ? value / 1e6 : 0;

/** ngrok's capability fields: null (an old agent), '' (supported), or why not. */
function unsupported(value: unknown): string | undefined {
  if (value === '') return undefined;
  return typeof value === 'string' ? value : 'the agent is too old for this operation';
}

/** Authenticates `request` from `address`, dialled at `serverName`; throws an AuthRefusal. */
export async function authenticate(
  db: Queryable,
  ipAllowed: IpAllowed | undefined,
  request: AuthRequest,
  peer: { address: string; serverName: string },
): Promise<AuthenticatedAgent> {
  const extra = request.Extra ?? {};
  const offered = Array.isArray(request.Version) ? request.Version : [];
  const version = offered.find((v) => VERSIONS.includes(v));
  if (version === undefined) {
    throw new AuthRefusal(
      `this server speaks ngrok protocol versions ${VERSIONS.join(', ')}; the agent offered ${offered.join(', ') || 'none'}`,
      undefined,
    );
  }
  const token = typeof extra.AuthToken === 'string' ? extra.AuthToken : '';
  const credential = await credentialOfToken(db, token);
  if (credential === undefined) {
    throw new AuthRefusal(
      'The authtoken you specified is not valid: it is no tunnel credential of this Agent Ingress service (POST /credentials makes one).',
      NGROK_ERRORS.invalidAuthtoken,
    );
  }
  const owner = await dialledAccount(db, peer.serverName);
  if (owner !== undefined && owner !== credential.accountId) {
    throw new AuthRefusal(
      `Your account is not permitted to use the agent ingress via "${peer.serverName}": its authtoken belongs to another account.`,
      NGROK_ERRORS.ingressNotPermitted,
      credential,
    );
  }
  const allowed = (await ipAllowed?.(credential.accountId, 'agent', peer.address)) ?? true;
  if (!allowed) {
    throw new AuthRefusal(
      `agents from ${peer.address} are not allowed by an IP restriction`,
      undefined,
      credential,
    );
  }
  return {
    credential,
    version,
    os: text(extra.OS),
    arch: text(extra.Arch),
    agentVersion: text(extra.Version),
    hostname: text(extra.Hostname),
    userAgent: text(extra.UserAgent),
    metadata: text(extra.Metadata),
    heartbeat: {
      intervalMs: nsToMs(extra.HeartbeatInterval),
      toleranceMs: nsToMs(extra.HeartbeatTolerance),
    },
    stopUnsupported: unsupported(extra.StopUnsupportedError),
    commandsUnsupported: {
      restart: unsupported(extra.RestartUnsupportedError),
      update: unsupported(extra.UpdateUnsupportedError),
    },
  };
}
