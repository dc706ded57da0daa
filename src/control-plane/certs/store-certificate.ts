import { newId } from '../../shared/ids.ts';
import type { Keyring } from '../../shared/secrets.ts';
import {
  type AccountObjectRow,
  deleteObject,
  getObject,
  insertObject,
} from '../../store/account-objects.ts';
import type { Queryable } from '../../store/db.ts';
import { appendToOutbox } from '../../store/outbox.ts';
import { presentObject } from '../api/objects/present.ts';
import { auditEvent } from '../api/resources.ts';
import { TLS_CERTIFICATES } from '../api/tls-certificates/resource.ts';

/** What storing a certificate needs beyond the transaction: the keyring and the API's base URL. */
export interface CertificateStoreDeps {
  keyring: Keyring;
  publicUrl: string;
}

/**
 * Stores a certificate the service obtained as the account's `tls_certificate` (read and checked
 * like an upload, `issued_at` set, the key sealed) with its `tls_certificate_created.v0` event,
 * in the caller's transaction; returns the stored row (its secret sealed).
 */
export async function storeIssuedCertificate(
  tx: Queryable,
  issued: { accountId: string; certificatePem: string; privateKeyPem: string; issuedAt: Date },
  deps: CertificateStoreDeps,
): Promise<AccountObjectRow> {
  // Loaded on first use, as the family does: a start does not pay for the ASN.1 library.
  const { readTlsCertificate } = await import('../../shared/pki/tls-certificate.ts');
  const read = readTlsCertificate(issued.certificatePem, issued.privateKeyPem);
  const row: AccountObjectRow = {
    id: newId(TLS_CERTIFICATES.idPrefix),
    account_id: issued.accountId,
    kind: TLS_CERTIFICATES.path,
    parent_id: null,
    unique_scope: null,
    unique_key: null,
    description: 'issued by the service (automatic certificate management)',
    metadata: '',
    fields: { ...read.fields, issued_at: issued.issuedAt.toISOString() },
    secret: deps.keyring.seal(read.privateKeyPem),
    created_at: issued.issuedAt,
  };
  await insertObject(tx, row);
  await appendToOutbox(tx, {
    event_id: newId('ev'),
    event_type: auditEvent(TLS_CERTIFICATES, 'created'),
    event_timestamp: issued.issuedAt.toISOString(),
    account_id: issued.accountId,
    principal: null,
    object: presentObject(TLS_CERTIFICATES, row, deps.publicUrl),
  });
  return row;
}

/**
 * Deletes the automatic certificate a new one replaces, with its `tls_certificate_deleted.v0`
 * event (nothing when the account deleted it already).
 */
export async function deleteReplacedCertificate(
  tx: Queryable,
  replaced: { accountId: string; id: string; at: Date },
  deps: CertificateStoreDeps,
): Promise<void> {
  const row = await getObject(tx, replaced.accountId, TLS_CERTIFICATES.path, replaced.id, true);
  if (row === undefined) return;
  await deleteObject(tx, row.id);
  await appendToOutbox(tx, {
    event_id: newId('ev'),
    event_type: auditEvent(TLS_CERTIFICATES, 'deleted'),
    event_timestamp: replaced.at.toISOString(),
    account_id: replaced.accountId,
    principal: null,
    object: presentObject(TLS_CERTIFICATES, row, deps.publicUrl),
  });
}
