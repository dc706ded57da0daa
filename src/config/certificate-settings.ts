import { ms, optional, optionalUrl } from './kinds.ts';
import { DAY, HOUR, type Setting } from './setting.ts';

/** The certificate jobs' settings: the ACME server and the job runner (settings.ts). */
export const CERTIFICATE_SETTINGS = {
  acmeDirectoryUrl: {
    env: 'ACME_DIRECTORY_URL',
    planes: ['control'],
    kind: optionalUrl(),
    meaning:
      "The ACME server's directory; none: certificate jobs fail saying so, and no CA is asked (Let's Encrypt: `https://acme-v02.api.letsencrypt.org/directory`, staging: `https://acme-staging-v02.api.letsencrypt.org/directory`, pebble for local tries: docs/dns-and-certificates.md#pebble).",
  },
  acmeCaFile: {
    env: 'ACME_CA_FILE',
    planes: ['control'],
    kind: optional({ accepts: 'a PEM file', note: 'the system CAs' }),
    meaning: 'Extra CAs to trust for the ACME server (a test server such as pebble).',
  },
  acmeEmail: {
    env: 'ACME_EMAIL',
    planes: ['control'],
    kind: optional({ accepts: 'an email address', note: 'none' }),
    meaning: "Contact address of the service's ACME account.",
  },
  delegationResolver: {
    env: 'DELEGATION_RESOLVER',
    planes: ['control'],
    kind: optional({
      accepts: 'host:port',
      note: "the system's resolvers",
      pattern: /^[^\s:]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/,
      problem: (raw) => `must be host:port, got "${raw}"`,
    }),
    meaning: "The resolver that checks a domain's delegation (its parent's NS records).",
  },
  certPollMs: {
    env: 'CERT_POLL_MS',
    planes: ['control'],
    kind: ms(5_000, 0, HOUR),
    meaning:
      'How often the certificate job runner looks for due jobs; `0`: no runner on this instance.',
  },
  certJobLeaseMs: {
    env: 'CERT_JOB_LEASE_MS',
    planes: ['control'],
    kind: ms(300_000, 1_000, DAY),
    meaning: 'How long a runner holds a certificate job before another instance may take it over.',
  },
  certRetryMaxMs: {
    env: 'CERT_RETRY_MAX_MS',
    planes: ['control'],
    kind: ms(HOUR, 1_000, DAY),
    meaning: 'Longest wait between retries of a failing certificate job.',
  },
} satisfies Record<string, Setting<unknown>>;
