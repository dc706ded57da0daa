import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';

describe('configuration', () => {
  it('has documented defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 8080,
      publicUrl: 'http://127.0.0.1:8080',
      databaseUrl: undefined,
      regions: ['au', 'eu', 'ap', 'us', 'us-cal-1', 'jp', 'in', 'sa'],
      ingestTokens: [],
      logLevel: 'info',
    });
    expect(config.dataDir).toMatch(/\/data$/);
    expect(config).toMatchObject({
      requestTimeoutMs: 30_000,
      headersTimeoutMs: 10_000,
      keepAliveTimeoutMs: 72_000,
      maxConnections: 512,
    });
  });

  it("has the documented defaults of the listeners' limits (OpenSSH's for SSH)", () => {
    expect(loadConfig({})).toMatchObject({
      sshLoginGraceMs: 120_000,
      sshMaxStartups: { start: 10, rate: 30, full: 100 },
      sshMaxAuthTries: 6,
      dnsTcpIdleTimeoutMs: 10_000,
      dnsTcpTimeoutMs: 60_000,
    });
  });

  it('reads SSH_MAX_STARTUPS as start:rate:full, or one number that refuses every connection beyond it', () => {
    expect(loadConfig({ SSH_MAX_STARTUPS: '5:50:20' }).sshMaxStartups).toEqual({
      start: 5,
      rate: 50,
      full: 20,
    });
    expect(loadConfig({ SSH_MAX_STARTUPS: '8' }).sshMaxStartups).toEqual({
      start: 8,
      rate: 100,
      full: 8,
    });
  });

  it('reads INTERNAL_URL as an origin, unset as none', () => {
    expect(loadConfig({ INTERNAL_URL: 'http://10.0.0.5:8089/' }).internalUrl).toBe(
      'http://10.0.0.5:8089',
    );
    expect(loadConfig({}).internalUrl).toBe('');
    expect(loadConfig({}).sessionLeaseMs).toBe(30_000);
  });

  it('keeps the headers timeout within the request timeout', () => {
    expect(loadConfig({ REQUEST_TIMEOUT_MS: '4000' }).headersTimeoutMs).toBe(4000);
    expect(loadConfig({ HEADERS_TIMEOUT_MS: '2000' }).headersTimeoutMs).toBe(2000);
  });

  it.each([
    [{ PORT: '70000' }, 'PORT must be between 0 and 65535, got 70000'],
    [{ PORT: '8o' }, 'PORT must be a whole number, got "8o"'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL must be one of'],
    [{ REGIONS: 'eu,not a region' }, 'REGIONS has "not a region"'],
    [{ NAME_SERVERS: 'ns1..example' }, 'NAME_SERVERS has "ns1..example"'],
    [{ NAME_SERVERS: ' , ' }, 'NAME_SERVERS must name at least one server'],
    [{ INGEST_TOKENS: 'short' }, 'INGEST_TOKENS has a token shorter than 16'],
    [{ BOOTSTRAP_API_KEY: 'tiny' }, 'BOOTSTRAP_API_KEY must be 20-200'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL must start with postgres://'],
    [{ PUBLIC_URL: 'ftp://x' }, 'PUBLIC_URL must be an http(s) URL'],
    [{ SECRETS_KEY: 'c2hvcnQ=' }, 'SECRETS_KEY must be 32 bytes'],
    [{ SECRETS_KEY: 'z'.repeat(64) }, 'SECRETS_KEY must be 32 bytes'],
    [{ SECRETS_KEY_PREVIOUS: `${'a'.repeat(64)},nope` }, 'SECRETS_KEY_PREVIOUS must be 32 bytes'],
    [
      { REQUEST_TIMEOUT_MS: '5000', HEADERS_TIMEOUT_MS: '6000' },
      'HEADERS_TIMEOUT_MS must be between 100 and 5000, got 6000',
    ],
    [{ MAX_CONNECTIONS: '0' }, 'MAX_CONNECTIONS must be between 1 and 1000000, got 0'],
    [{ INTERNAL_URL: 'https://10.0.0.5:8089' }, 'INTERNAL_URL must be http://host:port'],
    [{ INTERNAL_URL: 'http://10.0.0.5' }, 'INTERNAL_URL must be http://host:port'],
    [{ INTERNAL_URL: 'http://10.0.0.5:8089/relay' }, 'INTERNAL_URL must be http://host:port'],
    [{ SESSION_LEASE_MS: '100' }, 'SESSION_LEASE_MS must be between 300 and 3600000, got 100'],
    [{ SSH_MAX_STARTUPS: '10:30' }, 'SSH_MAX_STARTUPS must be start:rate:full'],
    [{ SSH_MAX_STARTUPS: '20:30:10' }, 'SSH_MAX_STARTUPS must be start:rate:full'],
    [{ SSH_MAX_STARTUPS: '10:130:100' }, 'SSH_MAX_STARTUPS must be start:rate:full'],
    [{ SSH_MAX_STARTUPS: '0' }, 'SSH_MAX_STARTUPS must be start:rate:full'],
    [{ SSH_LOGIN_GRACE_MS: '0' }, 'SSH_LOGIN_GRACE_MS must be between 100 and 3600000, got 0'],
    [{ SSH_MAX_AUTH_TRIES: '0' }, 'SSH_MAX_AUTH_TRIES must be between 1 and 100, got 0'],
  ])('rejects %o', (env, message) => {
    expect(() => loadConfig(env)).toThrow(`invalid configuration: ${message}`);
  });

  it('reads SECRETS_KEY and SECRETS_KEY_PREVIOUS as 32-byte keys in base64 or hex', () => {
    const hex = 'ab'.repeat(32);
    const base64 = Buffer.alloc(32, 7).toString('base64');
    const config = loadConfig({ SECRETS_KEY: base64, SECRETS_KEY_PREVIOUS: `${hex}, ${base64}` });
    expect(config.secretsKey).toEqual(Buffer.alloc(32, 7));
    expect(config.secretsKeyPrevious).toEqual([Buffer.from(hex, 'hex'), Buffer.alloc(32, 7)]);
    expect(loadConfig({}).secretsKey).toBeUndefined();
    expect(loadConfig({}).secretsKeyPrevious).toEqual([]);
  });
});
