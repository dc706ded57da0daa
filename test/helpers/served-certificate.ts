import { connect } from 'node:tls';

// What a TLS listener presents for a server name (SNI), seen by a real Node TLS client.

/** The SHA-256 fingerprint of the leaf served on 127.0.0.1:`port` for `serverName`. */
export function servedFingerprint(port: number, serverName: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({
      host: '127.0.0.1',
      port,
      servername: serverName,
      rejectUnauthorized: false,
    });
    socket.once('secureConnect', () => {
      resolve(socket.getPeerCertificate().fingerprint256);
      socket.destroy();
    });
    socket.once('error', reject);
  });
}
