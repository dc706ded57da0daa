import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

// Where the agent listener's own certificate for connect.<SERVICE_DOMAIN> lives when
// AGENT_TLS_CERT_FILE is not set: DATA_DIR/agent-tls/, made once (connect-certificate.ts). Only
// the start that makes them loads the X.509 builder; every later start reads the files.

/** The files of the generated certificate. */
export interface ConnectFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
  /** The CA's SHA-256 fingerprint, for people to check what they trust. */
  caFingerprint: string;
}

/** The certificate for `connectName` in `dataDir`, made on the first start that needs it. */
export async function connectCertificate(
  dataDir: string,
  connectName: string,
): Promise<ConnectFiles> {
  const dir = join(dataDir, 'agent-tls');
  const files = {
    caFile: join(dir, 'ca.pem'),
    certFile: join(dir, 'cert.pem'),
    keyFile: join(dir, 'key.pem'),
  };
  const existing = await readFile(files.caFile, 'utf8').catch(() => undefined);
  if (existing !== undefined) {
    return { ...files, caFingerprint: new X509Certificate(existing).fingerprint256 };
  }
  const { makeConnectCertificate } = await import('./connect-certificate.ts');
  return { ...files, caFingerprint: await makeConnectCertificate(files, connectName) };
}
