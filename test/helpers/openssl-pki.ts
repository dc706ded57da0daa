import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Certificates and keys made by the real `openssl` command, in a temp dir, for the X.509 tests.

/** A key type as ngrok names it, or a key the service must refuse. */
export type KeyKind = 'rsa' | 'ecdsa' | 'ed25519' | 'rsa1024' | 'secp256k1' | 'ed448';

/** A PEM certificate and the PEM (PKCS#8) private key it was made for. */
export interface Issued {
  name: string;
  cert: string;
  key: string;
}

/** What a certificate is made of: its key, subject, extensions and life. */
export interface CertSpec {
  key?: KeyKind;
  /** An OpenSSL subject, e.g. `/CN=app.example.com/O=Acme`. */
  subject: string;
  /** openssl.cnf extension lines, e.g. `basicConstraints=critical,CA:TRUE`. */
  extensions?: string[];
  days?: number;
}

const KEY_ARGS: Record<KeyKind, string[]> = {
  rsa: ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048'],
  rsa1024: ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:1024'],
  ecdsa: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256'],
  secp256k1: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:secp256k1'],
  ed25519: ['-algorithm', 'ED25519'],
  ed448: ['-algorithm', 'ED448'],
};

/** Extensions of a CA that may sign certificates. */
export const CA_EXTENSIONS = [
  'basicConstraints=critical,CA:TRUE',
  'keyUsage=critical,keyCertSign,cRLSign',
  'subjectKeyIdentifier=hash',
];

/** A workshop of certificates in a temp dir; `close()` removes it. */
export class OpensslPki {
  readonly dir = mkdtempSync(join(tmpdir(), 'x509-test-'));

  /** Runs `openssl args` in the workshop and returns what it printed. */
  openssl(args: string[], input?: string): string {
    return execFileSync('openssl', args, { cwd: this.dir, input, encoding: 'utf8', stdio: 'pipe' });
  }

  read(file: string): string {
    return readFileSync(join(this.dir, file), 'utf8');
  }

  /** A new PKCS#8 key in `<name>.key`. */
  newKey(name: string, kind: KeyKind = 'rsa'): string {
    this.openssl(['genpkey', ...KEY_ARGS[kind], '-out', `${name}.key`]);
    return this.read(`${name}.key`);
  }

  /** A self-signed certificate (a root CA when given CA_EXTENSIONS). */
  selfSigned(name: string, spec: CertSpec): Issued {
    const key = this.newKey(name, spec.key);
    this.writeExtensions(name, spec.extensions ?? []);
    this.openssl([
      'req',
      '-utf8',
      '-x509',
      '-new',
      '-key',
      `${name}.key`,
      '-subj',
      spec.subject,
      '-days',
      String(spec.days ?? 30),
      '-config',
      `${name}.cnf`,
      '-extensions',
      'ext',
      '-out',
      `${name}.pem`,
    ]);
    return { name, cert: this.read(`${name}.pem`), key };
  }

  /** A certificate `issuer` signs for a new key. */
  issue(name: string, issuer: Issued, spec: CertSpec): Issued {
    const key = this.newKey(name, spec.key);
    this.writeExtensions(name, spec.extensions ?? []);
    this.openssl([
      'req',
      '-utf8',
      '-new',
      '-key',
      `${name}.key`,
      '-subj',
      spec.subject,
      '-out',
      `${name}.csr`,
    ]);
    this.openssl([
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      `${issuer.name}.pem`,
      '-CAkey',
      `${issuer.name}.key`,
      '-set_serial',
      `0x${serialOf(name)}`,
      '-days',
      String(spec.days ?? 30),
      '-extfile',
      `${name}.cnf`,
      '-extensions',
      'ext',
      '-out',
      `${name}.pem`,
    ]);
    return { name, cert: this.read(`${name}.pem`), key };
  }

  /** A certificate `issuer` signed for a new RSA key, valid only in January 2020. */
  issueExpired(
    name: string,
    issuer: Issued,
    commonName: string,
    extensions: string[] = [],
  ): Issued {
    const key = this.newKey(name);
    this.writeExtensions(name, extensions);
    this.openssl([
      'req',
      '-new',
      '-key',
      `${name}.key`,
      '-subj',
      `/CN=${commonName}`,
      '-out',
      `${name}.csr`,
    ]);
    writeFileSync(join(this.dir, `${name}.db`), '');
    writeFileSync(join(this.dir, `${name}.serial`), '01\n');
    writeFileSync(
      join(this.dir, `${name}.ca.cnf`),
      `[ca]\ndefault_ca = d\n[d]\ndatabase = ${name}.db\nnew_certs_dir = .\nserial = ${name}.serial\n` +
        'default_md = sha256\npolicy = p\nunique_subject = no\n[p]\ncommonName = supplied\n',
    );
    this.openssl([
      'ca',
      '-batch',
      '-config',
      `${name}.ca.cnf`,
      '-cert',
      `${issuer.name}.pem`,
      '-keyfile',
      `${issuer.name}.key`,
      '-in',
      `${name}.csr`,
      '-out',
      `${name}.pem`,
      '-startdate',
      '20200101000000Z',
      '-enddate',
      '20200201000000Z',
      '-notext',
      '-extfile',
      `${name}.cnf`,
      '-extensions',
      'ext',
    ]);
    return { name, cert: this.read(`${name}.pem`), key };
  }

  /** What `openssl x509 -noout <flag>` prints for `cert`, after its `=`. */
  x509Field(cert: string, flag: string): string {
    const out = this.openssl(['x509', '-noout', flag], cert).trim();
    return out.slice(out.indexOf('=') + 1);
  }

  close(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  private writeExtensions(name: string, lines: string[]): void {
    const config = `[req]\ndistinguished_name = dn\n[dn]\n[ext]\n${lines.join('\n')}\n`;
    writeFileSync(join(this.dir, `${name}.cnf`), config);
  }
}

/** A serial number derived from the name (stable, distinct, with a leading zero nibble kept). */
function serialOf(name: string): string {
  return `0a${Buffer.from(name).toString('hex').padEnd(16, '0').slice(0, 30)}`;
}
