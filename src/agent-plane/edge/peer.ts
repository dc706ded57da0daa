import type { CompletedRequest, TlsFacts } from './traffic-event.ts';

/** Where a request came from: the client's connection, read on the instance it reached. */
export interface Peer {
  conn: CompletedRequest['conn'];
  tls: TlsFacts | undefined;
}
