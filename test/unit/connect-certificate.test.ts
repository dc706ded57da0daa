import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSecureContext } from 'node:tls';
import { afterAll, describe, expect, it } from 'vitest';
import { makeConnectCertificate } from '../../src/agent-plane/ngrok/connect-certificate.ts';
import { connectCertificate } from '../../src/agent-plane/ngrok/connect-files.ts';

// The agent listener's own certificate (AGENT_PORT without AGENT_TLS_CERT_FILE) is made once into
// DATA_DIR. Its serial number once came from Node's shared Buffer pool, so a start now and then
// made a certificate OpenSSL refused ("illegal padding") and could not start.

describe("the connect name's generated certificate", () => {
  const dir = mkdtempSync(join(tmpdir(), 'connect-cert-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is one OpenSSL loads, every time (200 made)', async () => {
    for (let i = 0; i < 200; i++) {
      const files = {
        caFile: join(dir, `${i}`, 'ca.pem'),
        certFile: join(dir, `${i}`, 'cert.pem'),
        keyFile: join(dir, `${i}`, 'key.pem'),
      };
      await makeConnectCertificate(files, 'connect.agent-ingress.example');
      expect(() =>
        createSecureContext({
          cert: readFileSync(files.certFile),
          key: readFileSync(files.keyFile),
        }),
      ).not.toThrow();
    }
  });

  it('is made on the first start and read, not made again, on the next', async () => {
    const first = await connectCertificate(join(dir, 'data'), 'connect.agent-ingress.example');
    const again = await connectCertificate(join(dir, 'data'), 'connect.agent-ingress.example');
    expect(again).toEqual(first);
    expect(first.caFingerprint).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
  });
});
