// ngrok's tunnel protocol over typed muxado streams: the stream types, the messages the
// service reads and writes (PascalCase JSON, as ngrok's agents send them), and its errors: a
// message and, on its own line, an ERR_NGROK_<n> code, which the SDK shows as the error's text
// and `errorCode`.

/** Stream types: client RPCs (Auth, Bind, Unbind), server RPCs (Restart … StopTunnel), Proxy. */
export const STREAM_TYPES = {
  auth: 0,
  bind: 1,
  unbind: 2,
  proxy: 3,
  restart: 4,
  stop: 5,
  update: 6,
  bindLabeled: 7,
  stopTunnel: 9,
} as const;

/** Auth: who the agent is (Extra carries its authtoken and what it runs on). */
export interface AuthRequest {
  Version?: string[];
  ClientId?: string;
  Extra?: {
    OS?: string;
    Arch?: string;
    AuthToken?: string;
    Version?: string;
    Hostname?: string;
    UserAgent?: string;
    Metadata?: string;
    ClientType?: string;
    /** Nanoseconds. */
    HeartbeatInterval?: number;
    HeartbeatTolerance?: number;
    StopUnsupportedError?: string | null;
    RestartUnsupportedError?: string | null;
    UpdateUnsupportedError?: string | null;
  };
}

/** Bind: one endpoint (http, https, tcp, tls) and its options. */
export interface BindRequest {
  Id?: string;
  Proto?: string;
  ForwardsTo?: string;
  ForwardsProto?: string;
  Opts?: Record<string, unknown>;
  Extra?: { Token?: string; Metadata?: string; Bindings?: string[]; IPPolicyRef?: string };
}

/** The header of a proxy stream, ahead of the connection's bytes. */
export interface ProxyHeader {
  Id: string;
  ClientAddr: string;
  Proto: string;
  /** "1" TCP, "2" TLS, "3" HTTPS. */
  EdgeType: string;
  PassthroughTLS: boolean;
}

/** Protocol versions the service speaks, best first (the agent's list is matched against it). */
export const VERSIONS = ['3', '2'];

/** ngrok's error codes for the refusals that have one. */
export const NGROK_ERRORS = {
  /** The authtoken is no tunnel credential's. */
  invalidAuthtoken: 'ERR_NGROK_107',
  /** The account may not use the agent ingress dialled (another account's). */
  ingressNotPermitted: 'ERR_NGROK_127',
  /** The account holds its most live sessions. */
  sessionLimit: 'ERR_NGROK_108',
  /** A domain the account has not reserved. */
  domainNotReserved: 'ERR_NGROK_319',
  /** A domain of another account. */
  domainOfAnotherAccount: 'ERR_NGROK_320',
  /** An address the account has not reserved. */
  addressNotReserved: 'ERR_NGROK_7113',
  /** The endpoint is already online (another session serves it). */
  endpointOnline: 'ERR_NGROK_334',
} as const;

/** A refusal as ngrok writes one: the message, then the code on its own line when there is one. */
export function ngrokError(message: string, code?: string): { Error: string } {
  return { Error: code === undefined ? message : `${message}\n${code}` };
}

/** Why an RPC was refused, as the agent will show it. */
export class NgrokRefusal extends Error {
  readonly code: string | undefined;
  constructor(message: string, code?: string) {
    super(message);
    this.name = 'NgrokRefusal';
    this.code = code;
  }

  /** The RPC answer carrying it. */
  answer(): { Error: string } {
    return ngrokError(this.message, this.code);
  }
}
