import type { Connection } from 'ssh2';
// ssh2 sends SSH_MSG_DISCONNECT with an empty description; the description is what the OpenSSH
// client prints ("Received disconnect from …: 11: <description>"), so it is built here with the
// library's own packet writer.
// @ts-expect-error: ssh2's internal module has no types (CommonJS: its exports are one object)
import protocolUtils from 'ssh2/lib/protocol/utils.js';

const { sendPacket } = protocolUtils as {
  sendPacket(protocol: unknown, packet: Buffer, bypass: boolean): boolean;
};

const SSH_MSG_DISCONNECT = 1;

/** The reason codes of SSH_MSG_DISCONNECT the service sends (RFC 4253 11.1). */
export const DISCONNECT_CODES = {
  byApplication: 11,
  tooManyConnections: 12,
  noMoreAuthMethods: 14,
} as const;

interface ProtocolInternals {
  _packetRW: {
    write: {
      allocStartKEX: number;
      alloc(length: number, force: boolean): Buffer;
      finalize(packet: Buffer, force: boolean): Buffer;
    };
  };
}

/** The payload of SSH_MSG_DISCONNECT: its code and `reason` (one line, at most 400 bytes). */
function disconnectPayload(code: number, reason: string): Buffer {
  const text = Buffer.from(reason.replace(/[\r\n]+/g, ' ').slice(0, 400), 'utf8');
  const payload = Buffer.alloc(1 + 4 + 4 + text.length + 4); // the language tag stays empty
  payload[0] = SSH_MSG_DISCONNECT;
  payload.writeUInt32BE(code, 1);
  payload.writeUInt32BE(text.length, 5);
  text.copy(payload, 9);
  return payload;
}

/** Ends an agent's connection, telling its SSH client `reason` (one line, at most 400 bytes). */
export function disconnectWith(
  client: Connection,
  reason: string,
  code: number = DISCONNECT_CODES.byApplication,
): void {
  const internals = client as unknown as {
    _protocol?: ProtocolInternals;
    _sock?: { writable: boolean; end(): void };
  };
  const { _protocol: protocol, _sock: socket } = internals;
  if (socket === undefined || !socket.writable) return;
  if (protocol === undefined) {
    client.end();
    return;
  }
  const payload = disconnectPayload(code, reason);
  const writer = protocol._packetRW.write;
  const packet = writer.alloc(payload.length, true);
  payload.copy(packet, writer.allocStartKEX);
  sendPacket(protocol, writer.finalize(packet, true), true);
  socket.end();
}

/**
 * What a connection refused before the SSH handshake hears: the server's identification line
 * and an unencrypted SSH_MSG_DISCONNECT, which OpenSSH prints ("Received disconnect from …:
 * 12: <reason>") where a bare close would say only "Connection closed by remote host".
 */
export function refusalBytes(ident: string, code: number, reason: string): Buffer {
  const payload = disconnectPayload(code, reason);
  // Padding: at least 4 bytes, and the packet a multiple of 8 (no cipher yet: RFC 4253 6).
  const padding = 4 + ((8 - ((4 + 1 + payload.length + 4) % 8)) % 8);
  const packet = Buffer.alloc(4 + 1 + payload.length + padding);
  packet.writeUInt32BE(1 + payload.length + padding, 0);
  packet[4] = padding;
  payload.copy(packet, 5);
  return Buffer.concat([Buffer.from(`SSH-2.0-${ident}\r\n`), packet]);
}
