import type { Duplex } from 'node:stream';
import type { Caller } from '../../shared/caller.ts';
import type { EndpointPolicy } from '../policy/index.ts';
import type { SessionFacts } from './session-events.ts';

// What the edge knows of an agent's live session, whatever protocol the agent speaks: its facts,
// the endpoint it serves, where streams to it come from, and how it ends. The SSH listener
// (listener.ts) and the ngrok agent listener (../ngrok/) each make them; nothing past this
// interface knows which made one.

/** The code of the error openStream rejects with at MAX_CHANNELS_PER_SESSION (the edge's 503). */
export const TOO_MANY_STREAMS = 'ETOOMANYSTREAMS';

/** Where an edge connection's stream to the agent comes from (an SSH channel, a muxado stream). */
export interface StreamSource {
  /**
   * Opens a stream to the agent's local service for one edge connection from `client`: bytes
   * written reach the service, its bytes come back, the far end's close ends it.
   */
  openStream(client: { ip: string; port: number }): Promise<Duplex>;
}

/** A command the API sends an agent through its session (ngrok's Restart and Update RPCs). */
export type AgentCommand =
  | { name: 'restart' }
  | { name: 'update'; version: string; permitMajorVersion: boolean };

/** One agent's live session serving one endpoint, as the edge and the API see it. */
export interface LiveSession extends StreamSource {
  facts: SessionFacts;
  /** The hostname it serves (HTTP, TLS), or its TCP address. */
  hostname: string;
  /** A TLS endpoint: the edge's TLS listener passes its connections through unterminated. */
  passthroughTls?: boolean;
  /** The agent endpoint's own Traffic Policy (an ngrok agent's Bind), run by the edge. */
  policy?: EndpointPolicy;
  /** Ends the session; the stop event carries `reason`. */
  end(reason: string, principal?: Caller): Promise<void>;
  /**
   * What an ngrok agent said it serves (its Bind): the protocol and where it forwards to. An SSH
   * session says neither: its protocol follows from `hostname` and its target is the client's.
   */
  tunnel?: { proto: 'http' | 'https' | 'tcp' | 'tls'; forwardsTo: string };
  /**
   * Sends `command` to the agent and resolves once it accepted it; rejects with an AppError
   * (ERR_AGENT_COMMAND_UNSUPPORTED, ERR_AGENT_COMMAND_FAILED). Absent where the protocol has no
   * such command (ssh -R).
   */
  command?(command: AgentCommand): Promise<void>;
}
