import { storeIssuedCertificate } from '../../src/control-plane/certs/store-certificate.ts';
import type { Service } from '../../src/service.ts';
import type { Issued, OpensslPki } from './openssl-pki.ts';

/**
 * Gives an Agent Ingress a certificate for `names`, signed by `ca`, stored as the certificate
 * runner stores what ACME issued (for tests whose agents check the ingress's certificate).
 */
export async function giveIngressCertificate(
  service: Pick<Service, 'db' | 'keyring' | 'url'>,
  pki: OpensslPki,
  ca: Issued,
  ingress: { accountId: string; domain: string; names: string[] },
): Promise<void> {
  const issued = pki.issue('ingress', ca, {
    key: 'ecdsa',
    subject: `/CN=${ingress.domain}`,
    extensions: [
      'basicConstraints=critical,CA:FALSE',
      'extendedKeyUsage=serverAuth',
      `subjectAltName=${ingress.names.map((n) => `DNS:${n}`).join(',')}`,
    ],
  });
  await service.db.transaction(async (tx) => {
    const row = await storeIssuedCertificate(
      tx,
      {
        accountId: ingress.accountId,
        certificatePem: issued.cert,
        privateKeyPem: issued.key,
        issuedAt: new Date(),
      },
      { keyring: service.keyring, publicUrl: service.url },
    );
    await tx.query('UPDATE agent_ingresses SET certificate_id = $1 WHERE domain = $2', [
      row.id,
      ingress.domain,
    ]);
  });
}
