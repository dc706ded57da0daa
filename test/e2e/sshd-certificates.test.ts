import { userInfo } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/service.ts';
import {
  authoritySigner,
  type GeneratedAuthority,
  generateAuthority,
} from '../../src/shared/ssh-keys/authorities.ts';
import {
  type CertificateKind,
  readCriticalOptions,
  readExtensions,
  readValidity,
  signCertificate,
} from '../../src/shared/ssh-keys/certificates.ts';
import { parsePublicKey } from '../../src/shared/ssh-keys/public-keys.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { keygen, sshDir } from '../helpers/ssh-keygen.ts';
import { type Sshd, sshLogin, startSshd } from '../helpers/sshd.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';

// A real OpenSSH server trusts our authorities and nothing else: it serves our host certificate
// (the client trusts only an @cert-authority line) and lets in exactly the user certificates our
// CAs signed for the right user, time, source address and command.

const dir = sshDir();
const user = userInfo().username;
let hostCa: GeneratedAuthority;
const userCas: Record<string, GeneratedAuthority> = {};
let userKey: { path: string; pub: string };
let sshd: Sshd;

function certify(
  ca: GeneratedAuthority,
  kind: CertificateKind,
  subject: string,
  body: Record<string, unknown> = {},
): string {
  return signCertificate(
    {
      kind,
      subject: parsePublicKey(subject),
      keyId: `${kind}-${Math.random().toString(36).slice(2)}`,
      principals: (body.principals as string[]) ?? [],
      ...readValidity(body, kind),
      criticalOptions: kind === 'user' ? readCriticalOptions(body.critical_options) : {},
      extensions: kind === 'user' ? readExtensions(body.extensions) : {},
    },
    authoritySigner(ca.privateKeyPem),
  );
}

async function hostWithCertificate(name: string, ca: GeneratedAuthority, principals: string[]) {
  const hostKey = await keygen(dir.path, name, 'ed25519');
  dir.file(`${name}-cert.pub`, certify(ca, 'host', hostKey.pub, { principals }));
  return { hostKey: hostKey.path, hostCertificate: `${hostKey.path}-cert.pub` };
}

function login(
  certificate: string,
  options: { port?: number; command?: string; knownHosts?: string } = {},
) {
  return sshLogin({
    port: options.port ?? sshd.port,
    dir: dir.path,
    key: userKey.path,
    certificate: dir.file(`user-${Math.random().toString(36).slice(2)}-cert.pub`, certificate),
    knownHosts: options.knownHosts ?? `@cert-authority * ${hostCa.publicKey}\n`,
    command: options.command ?? 'echo logged-in',
  });
}

beforeAll(async () => {
  hostCa = await generateAuthority({ private_key_type: 'ed25519' });
  userCas.ed25519 = await generateAuthority({ private_key_type: 'ed25519' });
  userCas.ecdsa = await generateAuthority({ private_key_type: 'ecdsa', elliptic_curve: 'p384' });
  userCas.rsa = await generateAuthority({ private_key_type: 'rsa', key_size: 2048 });
  userKey = await keygen(dir.path, 'user', 'ecdsa');
  sshd = await startSshd({
    dir: dir.path,
    ...(await hostWithCertificate('host', hostCa, ['127.0.0.1'])),
    trustedUserCaKeys: `${Object.values(userCas)
      .map((ca) => ca.publicKey)
      .join('\n')}\n`,
  });
});

afterAll(async () => {
  await sshd?.close();
  dir.remove();
});

describe('sshd with our authorities', () => {
  it.each(['ed25519', 'ecdsa', 'rsa'])(
    'lets in a user certificate signed by the %s CA',
    async (type) => {
      const result = await login(
        certify(userCas[type], 'user', userKey.pub, { principals: [user] }),
      );
      expect(result, result.stderr).toMatchObject({ code: 0, stdout: 'logged-in\n' });
      const caType = { ed25519: 'ED25519', ecdsa: 'ECDSA', rsa: 'RSA' }[type];
      expect(sshd.log()).toMatch(
        new RegExp(
          `Accepted publickey for ${user} .* ECDSA-CERT SHA256:\\S+ ID user-\\S+ \\(serial \\d+\\) CA ${caType} `,
        ),
      );
    },
  );

  it('refuses a certificate for another user, from an untrusted CA, expired, or from elsewhere', async () => {
    const untrusted = await generateAuthority({});
    const refused = [
      certify(userCas.ed25519, 'user', userKey.pub, { principals: ['someone-else'] }),
      certify(untrusted, 'user', userKey.pub, { principals: [user] }),
      certify(userCas.ed25519, 'user', userKey.pub, {
        principals: [user],
        valid_after: '2020-01-01T00:00:00Z',
        valid_until: '2021-01-01T00:00:00Z',
      }),
      certify(userCas.ed25519, 'user', userKey.pub, {
        principals: [user],
        critical_options: { 'source-address': '10.255.255.1/32' },
      }),
    ];
    for (const certificate of refused) {
      const result = await login(certificate);
      expect(result.code).toBe(255);
      expect(result.stderr).toContain('Permission denied (publickey)');
    }
  });

  it('runs the forced command of a certificate instead of the one asked for', async () => {
    const certificate = certify(userCas.ecdsa, 'user', userKey.pub, {
      principals: [user],
      critical_options: { 'force-command': 'echo forced', 'source-address': '127.0.0.1/32' },
    });
    expect(await login(certificate, { command: 'echo asked' })).toMatchObject({
      code: 0,
      stdout: 'forced\n',
    });
  });

  it('is trusted by the client only through our host CA and the host certificate principal', async () => {
    const userCertificate = certify(userCas.ed25519, 'user', userKey.pub, { principals: [user] });
    const otherCa = await generateAuthority({});
    const untrusted = await login(userCertificate, {
      knownHosts: `@cert-authority * ${otherCa.publicKey}\n`,
    });
    expect(untrusted.code).toBe(255);
    expect(untrusted.stderr).toContain('Host key verification failed');

    const wrongName = await startSshd({
      dir: dir.path,
      ...(await hostWithCertificate('host2', hostCa, ['other.example.com'])),
      trustedUserCaKeys: `${userCas.ed25519.publicKey}\n`,
    });
    try {
      const result = await login(userCertificate, { port: wrongName.port });
      expect(result.code).toBe(255);
      expect(result.stderr).toContain('Certificate invalid: name is not a listed principal');
      expect(result.stderr).toContain('Host key verification failed');
    } finally {
      await wrongName.close();
    }
  });
});

describe('sshd with authorities and certificates made through the REST API', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let server: Sshd;
  let userCa: { id: string; public_key: string };
  let hostCaKey = '';

  /** A certificate of `path` for `body`, signed through the API. */
  async function issued(path: string, body: Record<string, unknown>): Promise<string> {
    const created = await api('POST', path, body);
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    return created.body.certificate;
  }

  beforeAll(async () => {
    store = await pgliteStore();
    service = await startTestService(store);
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    const hostCa = (
      await api('POST', '/ssh_certificate_authorities', { private_key_type: 'rsa', key_size: 2048 })
    ).body;
    userCa = (
      await api('POST', '/ssh_certificate_authorities', {
        private_key_type: 'ecdsa',
        elliptic_curve: 'p521',
      })
    ).body;
    hostCaKey = hostCa.public_key;
    const hostKey = await keygen(dir.path, 'api-host', 'ecdsa');
    const hostCertificate = await issued('/ssh_host_certificates', {
      ssh_certificate_authority_id: hostCa.id,
      public_key: hostKey.pub,
      principals: ['127.0.0.1'],
    });
    server = await startSshd({
      dir: dir.path,
      hostKey: hostKey.path,
      hostCertificate: dir.file('api-host-cert.pub', hostCertificate),
      trustedUserCaKeys: `${userCa.public_key}\n`,
    });
  });
  afterAll(async () => {
    await server?.close();
    await service?.close();
    await store?.cleanup();
  });

  it('lets in the API’s user certificate for this user, and no other', async () => {
    const options = { port: server.port, knownHosts: `@cert-authority * ${hostCaKey}\n` };
    const body = { ssh_certificate_authority_id: userCa.id, public_key: userKey.pub };
    const good = await issued('/ssh_user_certificates', { ...body, principals: [user] });
    const result = await login(good, options);
    expect(result, result.stderr).toMatchObject({ code: 0, stdout: 'logged-in\n' });
    expect(server.log()).toMatch(/Accepted publickey for .* ID sucrt_\S+ \(serial \d+\) CA ECDSA /);

    const wrong = await issued('/ssh_user_certificates', { ...body, principals: ['someone-else'] });
    const refused = await login(wrong, options);
    expect(refused.code).toBe(255);
    expect(refused.stderr).toContain('Permission denied (publickey)');
  });
});
