import { readFile } from 'node:fs/promises';
import { createSecureContext, type SecureContext } from 'node:tls';
import { ConfigError } from '../../config/load.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Keyring } from '../../shared/secrets.ts';
import type { Queryable } from '../../store/db.ts';
import { uploadedCertificateFor } from '../../store/uploaded-certificates.ts';
import type { SniCertificates } from '../edge/sni-certificates.ts';
import { connectCertificate } from './connect-files.ts';

// The certificate the agent listener presents, chosen by the TLS server name the agent dialled:
// the service's own connect name (`connect.<SERVICE_DOMAIN>`) gets AGENT_TLS_CERT_FILE's (or one
// made into DATA_DIR on first start, connect-certificate.ts); any
// other name is looked up as the edge does (sni-certificates.ts: an Agent Ingress's managed
// certificate for its domain and region domains, a reserved domain's uploaded or automatic one),
// then among uploaded certificates (`/tls_certificates`) by their DNS names: the name then
// belongs to that certificate's account (dialled.ts). A name nothing covers fails the handshake.

export interface AgentCertificates {
  contextFor(serverName: string): Promise<SecureContext | undefined>;
}

/** The own connect name of a service domain. */
export function connectName(serviceDomain: string): string {
  return `connect.${serviceDomain}`;
}

export async function agentCertificates(deps: {
  sni: SniCertificates;
  db: Queryable;
  keyring: Keyring;
  serviceDomain: string;
  certFile: string | undefined;
  keyFile: string | undefined;
  dataDir: string;
  logger: Logger;
}): Promise<AgentCertificates> {
  const connect = connectName(deps.serviceDomain);
  if ((deps.certFile === undefined) !== (deps.keyFile === undefined)) {
    throw new ConfigError(
      deps.certFile === undefined ? 'AGENT_TLS_KEY_FILE' : 'AGENT_TLS_CERT_FILE',
      'goes with AGENT_TLS_CERT_FILE / AGENT_TLS_KEY_FILE: set both, or neither',
    );
  }
  let files = { certFile: deps.certFile ?? '', keyFile: deps.keyFile ?? '' };
  if (deps.certFile === undefined) {
    const made = await connectCertificate(deps.dataDir, connect);
    deps.logger.info(
      { name: connect, caFile: made.caFile, caFingerprint: made.caFingerprint },
      'agent listener: a local CA signs the certificate of the connect name; agents trust its ca.pem',
    );
    files = made;
  }
  const own = createSecureContext({
    cert: await readFile(files.certFile),
    key: await readFile(files.keyFile),
  });
  const uploaded = new Map<string, SecureContext>();
  return {
    async contextFor(serverName) {
      const name = serverName.toLowerCase().replace(/\.$/, '');
      if (name === connect) return own;
      const known = await deps.sni.contextFor(name);
      if (known !== undefined) return known;
      const row = await uploadedCertificateFor(deps.db, name);
      if (row === undefined) return undefined;
      let context = uploaded.get(row.id);
      if (context === undefined) {
        context = createSecureContext({
          cert: row.certificatePem,
          key: deps.keyring.open(row.secret),
        });
        uploaded.set(row.id, context);
      }
      return context;
    },
  };
}
