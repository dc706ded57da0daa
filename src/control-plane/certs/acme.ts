import { readFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { Agent, get as httpsGet } from 'node:https';
import { rootCertificates } from 'node:tls';
import type { CertPolicy } from '../../store/agent-ingresses.ts';

// The ACME conversation, through acme-client (loaded on first use: a service that never issues
// does not load it). DNS-01 only: the service's own DNS publishes the challenge records.

/** What an order needs. */
export interface AcmeOrder {
  directoryUrl: string;
  /** PEM of the service's ACME account key. */
  accountKeyPem: string;
  email: string | undefined;
  names: string[];
  keyType: CertPolicy['private_key_type'];
  /** Publishes the TXT value for an identifier (the name without `*.`) before validation. */
  publish(identifier: string, value: string): Promise<void>;
  /** Withdraws it after validation (whatever the outcome). */
  withdraw(identifier: string, value: string): Promise<void>;
}

/** An issued certificate: the chain (leaf first) and its private key, PEM. */
export interface Issued {
  certificatePem: string;
  privateKeyPem: string;
}

const HTTP_TIMEOUT_MS = 30_000;
/** HTTPS agents trusting the public CAs and an ACME_CA_FILE, by file (undefined: the default). */
const agents = new Map<string, Agent>();

/** A test ACME server (pebble) has its own CA; it is trusted in addition to the public ones. */
function agentFor(caFile: string | undefined): Agent | undefined {
  if (caFile === undefined) return undefined;
  let agent = agents.get(caFile);
  if (agent === undefined) {
    agent = new Agent({ ca: [...rootCertificates, readFileSync(caFile, 'utf8')] });
    agents.set(caFile, agent);
  }
  return agent;
}

/**
 * Rejects, saying why, when the directory does not answer: acme-client turns a connection error
 * into a TypeError about its own internals, which would make an unhelpful job message.
 */
function reachable(url: string, agent: Agent | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const get = url.startsWith('https:') ? httpsGet : httpGet;
    const req = get(url, { agent, timeout: HTTP_TIMEOUT_MS }, (res) => {
      res.resume();
      resolve();
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${HTTP_TIMEOUT_MS} ms`)));
    req.on('error', (error: NodeJS.ErrnoException) =>
      reject(new Error(`the ACME directory does not answer (${error.code ?? error.message})`)),
    );
  });
}

async function acmeClient(caFile: string | undefined) {
  const acme = await import('acme-client');
  acme.axios.defaults.timeout = HTTP_TIMEOUT_MS;
  // One quick retry inside a request, not five over 75 s while the job holds its lease: the
  // runner retries the whole order with its own capped backoff, and says so in the job.
  const defaults = acme.axios.defaults as unknown as { acmeSettings: Record<string, number> };
  defaults.acmeSettings.retryMaxAttempts = 1;
  defaults.acmeSettings.retryDefaultDelay = 1;
  // acme-client has one axios instance; the service one ACME_CA_FILE.
  acme.axios.defaults.httpsAgent = agentFor(caFile);
  return acme;
}

/** A new account key (ECDSA P-256), PEM. */
export async function newAccountKey(caFile: string | undefined): Promise<string> {
  const acme = await acmeClient(caFile);
  return (await acme.crypto.createPrivateEcdsaKey('P-256')).toString();
}

type AcmeClient = InstanceType<Awaited<ReturnType<typeof acmeClient>>['Client']>;

/**
 * Finds the account of the key, or creates it. (auto() alone would "update" an existing account
 * with its terms-of-service flag, which servers refuse.)
 */
async function register(client: AcmeClient, email: string | undefined): Promise<void> {
  const existing = () => client.createAccount({ onlyReturnExisting: true });
  try {
    await existing();
  } catch {
    const contact = email === undefined ? {} : { contact: [`mailto:${email}`] };
    try {
      await client.createAccount({ termsOfServiceAgreed: true, ...contact });
    } catch (error) {
      // Another instance registered the key meanwhile (the server refuses the "update"): use it.
      await existing().catch(() => Promise.reject(error));
    }
  }
}

/** Orders a certificate for the names, answering DNS-01 challenges through publish/withdraw. */
export async function orderCertificate(order: AcmeOrder, caFile?: string): Promise<Issued> {
  const acme = await acmeClient(caFile);
  await reachable(order.directoryUrl, agentFor(caFile));
  const key =
    order.keyType === 'ecdsa'
      ? await acme.crypto.createPrivateEcdsaKey('P-256')
      : await acme.crypto.createPrivateRsaKey(2048);
  const [first] = order.names;
  const [, csr] = await acme.crypto.createCsr(
    // A common name is at most 64 characters; the SANs are what clients check.
    { altNames: order.names, ...(first.length <= 64 ? { commonName: first } : {}) },
    key,
  );
  const client = new acme.Client({
    directoryUrl: order.directoryUrl,
    accountKey: order.accountKeyPem,
  });
  await register(client, order.email);
  const certificatePem = await client.auto({
    csr,
    email: order.email,
    termsOfServiceAgreed: true,
    challengePriority: ['dns-01'],
    // The records are in this service's own store: nothing to wait for before validation.
    skipChallengeVerification: true,
    challengeCreateFn: (authz, _challenge, value) => order.publish(authz.identifier.value, value),
    challengeRemoveFn: (authz, _challenge, value) => order.withdraw(authz.identifier.value, value),
  });
  return { certificatePem, privateKeyPem: key.toString() };
}
