import type { Config } from '../../config/load.ts';
import { newId } from '../../shared/ids.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Keyring } from '../../shared/secrets.ts';
import type { Db } from '../../store/db.ts';
import { claimJob, endJob, type JobRow, reportJob, retryFailedJobs } from '../../store/jobs.ts';
import { acmeAccountKey } from './account-key.ts';
import { type AcmeOrder, type Issued, newAccountKey, orderCertificate } from './acme.ts';
import { checkDelegation } from './delegation.ts';
import { PROVISIONING_JOB, queueRenewals } from './renewals.ts';
import { deleteReplacedCertificate, storeIssuedCertificate } from './store-certificate.ts';
import { type CertSubject, loadSubject, recordCertificate, showStatus } from './subjects.ts';

// The certificate job runner: takes due provisioning jobs from the store under a lease (any
// instance may run it; none runs a job another holds), checks the domain's delegation, orders the
// certificate over ACME, and stores it. Failures are honest in the job's msg and retried later.

const DAY_MS = 86_400_000;
/** A job's message while ACME_DIRECTORY_URL is unset (the default: no CA is chosen for you). */
export const NO_ACME_SERVER =
  "no ACME server is configured: set ACME_DIRECTORY_URL (Let's Encrypt: https://acme-v02.api.letsencrypt.org/directory; for local tries, pebble: docs/dns-and-certificates.md#pebble) and restart";

const FIRST_RETRY_MS = 30_000;

/** What the runner needs; `clock` and `order` are injectable for tests. */
export interface CertRunnerDeps {
  db: Db;
  config: Config;
  keyring: Keyring;
  logger: Logger;
  clock?: () => Date;
  order?: (order: AcmeOrder, caFile?: string) => Promise<Issued>;
  /** Called once a new certificate is committed (the edge serves it at once). */
  onIssued?: () => void;
}

/** A job that cannot end as it meant to: it was cancelled or taken over meanwhile. */
class JobLost extends Error {}

/** When to renew: 30 days before the end, or at two thirds of a shorter certificate's life. */
export function renewalTime(notBefore: Date, notAfter: Date): Date {
  const life = notAfter.getTime() - notBefore.getTime();
  return new Date(notAfter.getTime() - Math.min(30 * DAY_MS, life / 3));
}

/** Capped exponential backoff: 30 s, 1 min, 2 min, … up to `maxMs`. */
export function retryDelay(attempts: number, maxMs: number): number {
  return Math.min(maxMs, FIRST_RETRY_MS * 2 ** Math.min(attempts, 30));
}

/** What every step of a job works with: the runner's deps, defaults filled in. */
interface Context {
  db: Db;
  config: Config;
  keyring: Keyring;
  logger: Logger;
  clock: () => Date;
  order: (order: AcmeOrder, caFile?: string) => Promise<Issued>;
  onIssued: (() => void) | undefined;
  /** The ACME directory's host, as messages name it. */
  directoryHost: string;
}

/** Builds the runner: `kick()` runs due jobs now, `start()` also every CERT_POLL_MS. */
export function createCertRunner(deps: CertRunnerDeps) {
  const { config, logger } = deps;
  const ctx: Context = {
    ...deps,
    clock: deps.clock ?? (() => new Date()),
    order: deps.order ?? orderCertificate,
    onIssued: deps.onIssued,
    directoryHost: config.acmeDirectoryUrl === '' ? '' : new URL(config.acmeDirectoryUrl).host,
  };
  const owner = newId('runner');
  const runOnce = () => runDueJob(ctx, owner);
  const retryWaiting = waitingJobsRetry(ctx);

  let working: Promise<void> | undefined;
  let again = false;
  /** Runs due jobs until none is left; a kick while running runs another round after. */
  function kick(): Promise<void> {
    if (working !== undefined) {
      again = true;
      return working;
    }
    working = (async () => {
      do {
        again = false;
        try {
          await retryWaiting();
          while (await runOnce());
        } catch (error) {
          logger.error({ err: error }, 'certificate runner: a round failed');
        }
      } while (again);
    })().finally(() => {
      working = undefined;
    });
    return working;
  }

  let timer: NodeJS.Timeout | undefined;
  return {
    kick,
    runOnce,
    start(): void {
      if (config.certPollMs > 0) timer = setInterval(() => void kick(), config.certPollMs);
      void kick();
    },
    async close(): Promise<void> {
      clearInterval(timer);
      await working;
    },
  };
}

/**
 * With an ACME server configured, the jobs that failed for want of one run at once instead of at
 * the end of their backoff: setting ACME_DIRECTORY_URL is a restart away from them. Once per runner.
 */
function waitingJobsRetry(ctx: Context): () => Promise<unknown> {
  const { db, config, clock, logger } = ctx;
  let retried: Promise<unknown> | undefined;
  return () => {
    if (config.acmeDirectoryUrl === '') return Promise.resolve();
    retried ??= retryFailedJobs(db, PROVISIONING_JOB, NO_ACME_SERVER, clock()).catch(
      (error: unknown) => {
        logger.warn(
          { err: error },
          'certificate runner: jobs waiting for an ACME server not retried',
        );
      },
    );
    return retried;
  };
}

/** Queues due renewals, then runs one due job; false when there was none. */
async function runDueJob(ctx: Context, owner: string): Promise<boolean> {
  const { db, config, clock } = ctx;
  await queueRenewals(db, clock());
  const job = await claimJob(db, {
    kind: PROVISIONING_JOB,
    owner,
    now: clock(),
    leaseMs: config.certJobLeaseMs,
  });
  if (job === undefined) return false;
  await runJob(ctx, job);
  return true;
}

/** One provisioning job: the delegation checked (when needed), then the certificate ordered and stored. */
async function runJob(ctx: Context, job: JobRow): Promise<void> {
  const { db, config, directoryHost } = ctx;
  const subject = await loadSubject(db, job.subject_id, config);
  if (subject === undefined || subject.policy === null) {
    await endJob(
      db,
      job,
      { state: 'done' },
      'nothing to certify: the domain or its policy is gone',
    );
    return;
  }
  try {
    if (config.acmeDirectoryUrl === '') {
      return await fail(ctx, job, subject, 'INTERNAL_ERROR', NO_ACME_SERVER);
    }
    if (subject.needsDelegation && !(await delegated(ctx, job, subject))) return;
    await report(
      ctx,
      job,
      subject,
      `ordering a certificate for ${subject.names.join(', ')} from ${directoryHost} (DNS-01)`,
    );
    await issue(ctx, job, subject);
  } catch (error) {
    if (error instanceof JobLost) return;
    const why = `could not obtain a certificate from ${directoryHost}: ${(error as Error).message}`;
    await fail(ctx, job, subject, 'INTERNAL_ERROR', why);
  } finally {
    await db.query('DELETE FROM acme_challenges WHERE job_id = $1', [job.id]);
  }
}

/** Whether the subject's domain is delegated to this service; the job fails, saying why, when not. */
async function delegated(ctx: Context, job: JobRow, subject: CertSubject): Promise<boolean> {
  const { config } = ctx;
  const servers = config.nameServers.join(', ');
  await report(ctx, job, subject, `checking that ${subject.domain} is delegated to ${servers}`);
  const delegation = await checkDelegation(
    subject.domain,
    config.nameServers,
    config.delegationResolver,
  );
  if (delegation.delegated) return true;
  const found = delegation.found.length === 0 ? 'none' : delegation.found.join(', ');
  const why = `${subject.domain} is not delegated to this service: publish NS records ${servers} for it at its parent zone (NS found: ${found})`;
  await fail(ctx, job, subject, 'DNS_ERROR', why);
  return false;
}

/** Shows the job's progress in its msg and the subject's status; JobLost when it is no longer held. */
async function report(ctx: Context, job: JobRow, subject: CertSubject, msg: string): Promise<void> {
  const held = await ctx.db.transaction(async (tx) => {
    if (!(await reportJob(tx, job, msg))) return false;
    await showStatus(tx, subject, { ...job, msg });
    return true;
  });
  if (!held) throw new JobLost();
}

/** Ends the job as failed, to be retried after the backoff, saying why and when. */
async function fail(ctx: Context, job: JobRow, subject: CertSubject, code: string, why: string) {
  const { db, config, clock } = ctx;
  const retriesAt = new Date(
    clock().getTime() + retryDelay(job.attempts ?? 0, config.certRetryMaxMs),
  );
  const msg = `${why}; trying again at ${retriesAt.toISOString()}`;
  await db.transaction(async (tx) => {
    const ended = await endJob(tx, job, { state: 'failed', errorCode: code, retriesAt }, msg);
    if (ended !== undefined) await showStatus(tx, subject, ended);
  });
  ctx.logger.warn({ job: job.id, subject: subject.id, code }, msg);
}

/** Orders the certificate over ACME, then stores it (see store()) and tells onIssued. */
async function issue(ctx: Context, job: JobRow, subject: CertSubject): Promise<void> {
  const { db, config, keyring, clock } = ctx;
  const accountKeyPem = await acmeAccountKey(db, keyring, config.acmeDirectoryUrl, () =>
    newAccountKey(config.acmeCaFile),
  );
  const published = (identifier: string) => subject.challengeNames(identifier);
  const issued = await ctx.order(
    {
      directoryUrl: config.acmeDirectoryUrl,
      accountKeyPem,
      email: config.acmeEmail,
      names: subject.names,
      keyType: subject.policy!.private_key_type,
      publish: async (identifier, value) => {
        for (const name of published(identifier)) {
          await db.query(
            `INSERT INTO acme_challenges (name, value, job_id, created_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT DO NOTHING`,
            [name, value, job.id, clock()],
          );
        }
      },
      withdraw: async (identifier, value) => {
        await db.query('DELETE FROM acme_challenges WHERE name = ANY($1) AND value = $2', [
          published(identifier),
          value,
        ]);
      },
    },
    config.acmeCaFile,
  );
  await store(ctx, job, subject, issued);
  ctx.onIssued?.();
}

/**
 * In one transaction: the new certificate stored, the job done, the subject pointed at it with
 * its renewal time, and the certificate it replaces deleted. JobLost if the job was cancelled.
 */
async function store(ctx: Context, job: JobRow, subject: CertSubject, issued: Issued) {
  const { config, keyring, clock } = ctx;
  const secrets = { keyring, publicUrl: config.publicUrl };
  await ctx.db.transaction(async (tx) => {
    const issuedAt = clock();
    const stored = await storeIssuedCertificate(
      tx,
      { accountId: subject.accountId, ...issued, issuedAt },
      secrets,
    );
    const renewsAt = renewalTime(
      new Date(stored.fields.not_before as string),
      new Date(stored.fields.not_after as string),
    );
    const msg = `certificate ${stored.id} issued for ${subject.names.length} names; renews at ${renewsAt.toISOString()}`;
    const ended = await endJob(tx, job, { state: 'done' }, msg);
    // Cancelled meanwhile (policy changed or removed): nothing of this order is kept.
    if (ended === undefined) throw new JobLost();
    await recordCertificate(tx, subject, stored.id, renewsAt);
    if (subject.certificateId !== null) {
      const replaced = { accountId: subject.accountId, id: subject.certificateId, at: issuedAt };
      await deleteReplacedCertificate(tx, replaced, secrets);
    }
    await showStatus(tx, subject, ended, renewsAt);
    ctx.logger.info({ job: job.id, subject: subject.id, certificate: stored.id }, msg);
  });
}

/** The runner's interface. */
export type CertRunner = ReturnType<typeof createCertRunner>;
