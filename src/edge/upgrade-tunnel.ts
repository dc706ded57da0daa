import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { RELAY_HEADER } from './relay-auth.ts';
import { splice } from './splice.ts';

// A WebSocket (any Upgrade) through the edge: the request head goes to the agent, then bytes flow
// both ways untouched until either side closes. The agent's answer head (`101 Switching
// Protocols`, or a refusal) is read as it passes, so the connection's one event can say what the
// agent answered and how many bytes went each way after the heads.

/** What passed through one upgraded connection, known when it closes. */
export interface UpgradeOutcome {
  /** The agent's status code; 0 when it sent no complete head. */
  statusCode: number;
  headers: NodeJS.Dict<string | string[]>;
  /** Bytes from the client after its request head (WebSocket frames, both directions framed). */
  requestBytes: number;
  /** Bytes from the agent after its answer head. */
  responseBytes: number;
}

/** A head longer than this is not read: its bytes count as the answer's. */
const MAX_HEAD_BYTES = 64 * 1024;
const HEAD_END = Buffer.from('\r\n\r\n');

/** The status code and headers of an HTTP/1.1 answer head (without its blank line). */
export function parseResponseHead(head: string): Pick<UpgradeOutcome, 'statusCode' | 'headers'> {
  const [statusLine = '', ...lines] = head.split('\r\n');
  const statusCode = Number(statusLine.split(' ')[1]);
  const headers: NodeJS.Dict<string | string[]> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    const before = headers[name];
    headers[name] = before === undefined ? value : [before, value].flat();
  }
  return { statusCode: Number.isInteger(statusCode) ? statusCode : 0, headers };
}

/** Watches the agent's bytes: the answer head once complete, then a count of what follows. */
function answerReader(outcome: UpgradeOutcome): (chunk: Buffer) => void {
  let pending: Buffer | undefined = Buffer.alloc(0);
  return (chunk) => {
    if (pending === undefined) {
      outcome.responseBytes += chunk.length;
      return;
    }
    pending = Buffer.concat([pending, chunk]);
    const end = pending.indexOf(HEAD_END);
    if (end >= 0) {
      Object.assign(outcome, parseResponseHead(pending.subarray(0, end).toString('latin1')));
      outcome.responseBytes += pending.length - end - HEAD_END.length;
      pending = undefined;
    } else if (pending.length > MAX_HEAD_BYTES) {
      outcome.responseBytes += pending.length;
      pending = undefined;
    }
  };
}

/**
 * Sends the request head (and `head`, the bytes read past it) to the agent over `channel`, then
 * joins the client's socket and the channel; `onClose` gets the outcome once either side closes.
 */
export function tunnelUpgrade(
  request: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  channel: Duplex,
  onClose: (outcome: UpgradeOutcome) => void,
): void {
  const lines = [`${request.method} ${request.url} HTTP/1.1`];
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    // A relayed Upgrade's signature is for this instance, not the agent.
    if (request.rawHeaders[i].toLowerCase() === RELAY_HEADER) continue;
    lines.push(`${request.rawHeaders[i]}: ${request.rawHeaders[i + 1]}`);
  }
  channel.write(`${lines.join('\r\n')}\r\n\r\n`);
  if (head.length > 0) channel.write(head);
  const outcome: UpgradeOutcome = {
    statusCode: 0,
    headers: {},
    requestBytes: head.length,
    responseBytes: 0,
  };
  socket.on('data', (chunk: Buffer) => {
    outcome.requestBytes += chunk.length;
  });
  channel.on('data', answerReader(outcome));
  splice(socket, channel, () => onClose(outcome));
}
