import { AppError } from '../../../shared/errors.ts';
import { objectsOfKind } from '../../../store/account-objects.ts';
import type { Family } from '../objects/family.ts';
import { TLS_CERTIFICATES } from './resource.ts';

/**
 * TLS certificates: the fields are read from the chain's leaf (src/shared/pki/, loaded on first use so
 * that a start does not pay for the ASN.1 library); the private key, checked against the leaf,
 * is the object's secret, which the layer seals and never shows. A certificate a reserved domain
 * serves is not deleted from under it.
 */
export const TLS_CERTIFICATES_FAMILY: Family = {
  resource: TLS_CERTIFICATES,
  async create(body) {
    const { readTlsCertificate } = await import('../../../shared/pki/tls-certificate.ts');
    const upload = readTlsCertificate(
      body.certificate_pem as string,
      body.private_key_pem as string,
    );
    return { fields: upload.fields, secret: upload.privateKeyPem };
  },
  async beforeDelete(current, ctx) {
    const domains = await objectsOfKind(ctx.tx, ctx.accountId, 'reserved_domains');
    const serving = domains.filter((domain) => domain.fields.certificate === current.id);
    if (serving.length > 0) {
      const ids = serving.map((domain) => domain.id);
      throw new AppError(
        'ERR_IN_USE',
        `TLS certificate "${current.id}" is served by reserved domain ${ids.join(', ')}; ` +
          'give them another certificate or DELETE /reserved_domains/{id}/certificate first',
        { reserved_domain_ids: ids },
      );
    }
  },
};
