import { AppError } from '../../shared/errors.ts';

// Answers that may hold their connection for long: event streams (taps, previews,
// /pipeline/stats) and destination tests, which wait on the account's own target for up to its
// request timeout. They share the listener's MAX_CONNECTIONS with everything else on the port
// (REST, ingest, /healthz), so one account, and all of them together, may hold only a few
// (docs/decisions.md#long-lived-answers).

/** Long-lived answers one account may have open at once. */
export const LONG_LIVED_PER_ACCOUNT = 5;
/** Long-lived answers open at once in all: at most this, and a quarter of MAX_CONNECTIONS. */
export const LONG_LIVED_TOTAL = 64;

/** The places long-lived answers take while they last. */
export interface LongLivedAnswers {
  /**
   * Takes a place for an answer to `accountId`; the returned function gives it back (once, however
   * often it is called). Throws ERR_RATE_LIMITED when the account or the service has none left.
   */
  take(accountId: string): () => void;
}

/** The places for a listener that holds `maxConnections` (MAX_CONNECTIONS). */
export function createLongLivedAnswers(maxConnections: number): LongLivedAnswers {
  const total = Math.max(1, Math.min(LONG_LIVED_TOTAL, Math.floor(maxConnections / 4)));
  const ofAccount = new Map<string, number>();
  let open = 0;
  return {
    take(accountId) {
      const held = ofAccount.get(accountId) ?? 0;
      if (held >= LONG_LIVED_PER_ACCOUNT || open >= total) {
        const [limit, scope] =
          held >= LONG_LIVED_PER_ACCOUNT
            ? [LONG_LIVED_PER_ACCOUNT, 'per account']
            : [total, 'in all'];
        throw new AppError(
          'ERR_RATE_LIMITED',
          `too many event streams and destination tests open (at most ${limit} ${scope}); close one, or retry once one has ended`,
          { limit },
        );
      }
      ofAccount.set(accountId, held + 1);
      open++;
      let given = false;
      return () => {
        if (given) return;
        given = true;
        open--;
        const left = ofAccount.get(accountId)! - 1;
        if (left === 0) ofAccount.delete(accountId);
        else ofAccount.set(accountId, left);
      };
    },
  };
}
