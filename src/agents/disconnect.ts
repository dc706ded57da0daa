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
const SSH_DISCONNECT_BY_APPLICATION = 11;

interface ProtocolInternals {
  _packetRW: {
    write: {
      allocStartKEX: number;
      alloc(length: number, force: boolean): Buffer;
      finalize(packet: Buffer, force: boolean): Buffer;
    };
  };
}

/** Ends an agent's connection, telling its SSH client `reason` (one line, at most 400 bytes). */
export function disconnectWith(client: Connection, reason: string): void {
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
  const text = Buffer.from(reason.replace(/[\r\n]+/g, ' ').slice(0, 400), 'utf8');
  const length = 1 + 4 + 4 + text.length + 4;
  const writer = protocol._packetRW.write;
  const start = writer.allocStartKEX;
  const packet = writer.alloc(length, true);
  packet[start] = SSH_MSG_DISCONNECT;
  packet.writeUInt32BE(SSH_DISCONNECT_BY_APPLICATION, start + 1);
  packet.writeUInt32BE(text.length, start + 5);
  text.copy(packet, start + 9);
  packet.writeUInt32BE(0, start + 9 + text.length); // language tag: empty
  sendPacket(protocol, writer.finalize(packet, true), true);
  socket.end();
}
