import { AppError } from '../errors.ts';

// PEM (RFC 7468) as users paste it: blocks between BEGIN and END lines, possibly with explanatory
// text around them (what `openssl x509 -text` or a CA's bundle adds), which is ignored.

/** One PEM block: its label (`CERTIFICATE`, `PRIVATE KEY`, …) and the DER bytes it holds. */
export interface PemBlock {
  label: string;
  der: Buffer;
}

const BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END ([A-Z0-9 ]+)-----/g;
const HEADER = /^[ \t]*[A-Za-z-]+:/m;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The PEM blocks of `text`, in order; none, a bad block or bad base64 is a 400 naming `field`. */
export function pemBlocks(text: string, field: string): PemBlock[] {
  const blocks: PemBlock[] = [];
  for (const [, label, body, endLabel] of text.matchAll(BLOCK)) {
    if (label !== endLabel) {
      throw invalidPem(field, `a "BEGIN ${label}" line ends with "END ${endLabel}"`);
    }
    if (HEADER.test(body)) {
      throw invalidPem(field, `the ${label} block has RFC 1421 headers (a legacy encrypted key?)`);
    }
    const base64 = body.replace(/\s+/g, '');
    if (base64 === '' || base64.length % 4 !== 0 || !BASE64.test(base64)) {
      throw invalidPem(field, `the ${label} block is not valid base64`);
    }
    blocks.push({ label, der: Buffer.from(base64, 'base64') });
  }
  if (blocks.length === 0) {
    throw invalidPem(field, 'no "-----BEGIN …-----" block was found');
  }
  return blocks;
}

/** `der` as a PEM block labelled `label`, 64 characters a line. */
export function toPem(label: string, der: Buffer): string {
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}

function invalidPem(field: string, why: string): AppError {
  return new AppError('ERR_INVALID_FIELD', `"${field}" must be PEM: ${why}`, { field });
}
