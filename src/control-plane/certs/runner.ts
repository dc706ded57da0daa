import type { Config } from '../../config/load.ts';
import { newId } from '../../shared/ids.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Keyring } from '../../shared/secrets.ts';
import type { Db } from '../../store/db.ts';
import { claimJob, endJob, type JobRow, reportJob } from '../../store/jobs.ts';
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

export function createCertRunner(deps: CertRunnerDeps) {
  const { db, config, keyring, logger } = deps;
  const clock = deps.clock ?? (() => new Date());
  const order = deps.order ?? orderCertificate;
  const owner = newId('runner');
  const directoryHost = new URL(config.acmeDirectoryUrl).host;

  async function report(job: JobRow, subject: CertSubject, msg: string): Promise<void> {
    const held = await db.transaction(async (tx) => {
      if (!(await reportJob(tx, job, msg))) return false;
      await showStatus(tx, subject, { ...job, msg });
      return true;
    });
    if (!held) throw new JobLost();
  }

  async function fail(job: JobRow, subject: CertSubject, code: string, why: string) {
    const retriesAt = new Date(
      clock().getTime() + retryDelay(job.attempts ?? 0, config.certRetryMaxMs),
    );
    const msg = `${why}; trying again at ${retriesAt.toISOString()}`;
    await db.transaction(async (tx) => {
      const ended = await endJob(tx, job, { state: 'failed', errorCode: code, retriesAt }, msg);
      if (ended !== undefined) await showStatus(tx, subject, ended);
    });
    logger.warn({ job: job.id, subject: subject.id, code }, msg);
  }

  async function issue(job: JobRow, subject: CertSubject): Promise<void> {
    const accountKeyPem = await acmeAccountKey(db, keyring, config.acmeDirectoryUrl, () =>
      newAccountKey(config.acmeCaFile),
    );
    const published = (identifier: string) => subject.challengeNames(identifier);
    const issued = await order(
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
    await db.transaction(async (tx) => {
      const issuedAt = clock();
      const stored = await storeIssuedCertificate(
        tx,
        { accountId: subject.accountId, ...issued, issuedAt },
        { keyring, publicUrl: config.publicUrl },
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
        await deleteReplacedCertificate(tx, replaced, { keyring, publicUrl: config.publicUrl });
      }
      await showStatus(tx, subject, ended, renewsAt);
      logger.info({ job: job.id, subject: subject.id, certificate: stored.id }, msg);
    });
    deps.onIssued?.();
  }

  async function run(job: JobRow): Promise<void> {
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
      if (subject.needsDelegation) {
        const servers = config.nameServers.join(', ');
        await report(job, subject, `checking that ${subject.domain} is delegated to ${servers}`);
        const delegation = await checkDelegation(
          subject.domain,
          config.nameServers,
          config.delegationResolver,
        );
        if (!delegation.delegated) {
          const found = delegation.found.length === 0 ? 'none' : delegation.found.join(', ');
          const why = `${subject.domain} is not delegated to this service: publish NS records ${servers} for it at its parent zone (NS found: ${found})`;
          return await fail(job, subject, 'DNS_ERROR', why);
        }
      }
      await report(
        job,
        subject,
        `ordering a certificate for ${subject.names.join(', ')} from ${directoryHost} (DNS-01)`,
      );
      await issue(job, subject);
    } catch (error) {
      if (error instanceof JobLost) return;
      const why = `could not obtain a certificate from ${directoryHost}: ${(error as Error).message}`;
      await fail(job, subject, 'INTERNAL_ERROR', why);
    } finally {
      await db.query('DELETE FROM acme_challenges WHERE job_id = $1', [job.id]);
    }
  }

  /** Queues due renewals, then runs one due job; false when there was none. */
  async function runOnce(): Promise<boolean> {
    await queueRenewals(db, clock());
    const job = await claimJob(db, {
      kind: PROVISIONING_JOB,
      owner,
      now: clock(),
      leaseMs: config.certJobLeaseMs,
    });
    if (job === undefined) return false;
    await run(job);
    return true;
  }

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

/** The runner's interface. */
export type CertRunner = ReturnType<typeof createCertRunner>;
