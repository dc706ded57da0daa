import { readFile } from 'node:fs/promises';
import { createSecureContext, type SecureContext } from 'node:tls';
import type { SniCertificates } from '../edge/sni-certificates.ts';

// The certificate the agent listener presents, chosen by the TLS server name the agent dialled:
// the service's own connect name (`connect.<SERVICE_DOMAIN>`) gets AGENT_TLS_CERT_FILE's; any
// other name is looked up as the edge does (sni-certificates.ts: an Agent Ingress's managed
// certificate for its domain and region domains, a reserved domain's uploaded or automatic one).
// A name nothing covers fails the handshake.

export interface AgentCertificates {
  contextFor(serverName: string): Promise<SecureContext | undefined>;
}

/** The own connect name of a service domain. */
export function connectName(serviceDomain: string): string {
  return `connect.${serviceDomain}`;
}

export async function agentCertificates(deps: {
  sni: SniCertificates;
  serviceDomain: string;
  certFile: string;
  keyFile: string;
}): Promise<AgentCertificates> {
  const own =
    deps.certFile === ''
      ? undefined
      : createSecureContext({
          cert: await readFile(deps.certFile),
          key: await readFile(deps.keyFile),
        });
  const connect = connectName(deps.serviceDomain);
  return {
    async contextFor(serverName) {
      const name = serverName.toLowerCase().replace(/\.$/, '');
      if (name === connect) return own;
      return deps.sni.contextFor(name);
    },
  };
}
