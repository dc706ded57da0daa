import { newId } from '../../shared/ids.ts';
import type { TapCatch, TapSpec, TapTarget } from './tap-tee.ts';

// The main thread's half of a tap (docs/decisions.md#taps): what the workers caught
// (tap-tee.ts) goes into a small buffer per tap, drained at the tap's rate cap. Lossy by design:
// a full buffer drops (and counts), so a slow or paused reader never slows the pipeline.

/** A tap's bounds: messages per second at most, and how long it stays open. */
export interface TapBounds {
  ratePerSecond: number;
  maxSeconds: number;
}

/**
 * The bounds a caller may ask for. How many taps may be open (each costs the workers) is bounded
 * with the other long-lived answers, by the routes (src/control-plane/api/long-lived.ts).
 */
export const TAP_LIMITS = {
  rate: { default: 10, max: 100 },
  maxSeconds: { default: 60, max: 600 },
};

/** One message of a tap. */
export type TapMessage =
  | {
      kind: 'event';
      /** The record as the destination would get it (JSON text). */
      json: string;
      /** True when events matched since the previous message were not shown (`skipped`). */
      sampled: boolean;
      /** Matched since the previous message and never to be shown: rate cap or full buffer. */
      skipped: number;
      /** Matched since the tap opened, and shown (this one included). */
      matched: number;
      shown: number;
      /** Dropped so far because the tap's buffer was full (a share of what was skipped). */
      dropped: number;
    }
  | { kind: 'end'; reason: 'max_duration' | 'shutdown'; matched: number; shown: number };

/** What the pipeline keeps of the open taps. */
export interface Taps {
  /**
   * Opens a tap for `accountId`; `send` gets its messages until the returned function closes it
   * (or it ends).
   */
  open(
    accountId: string,
    spec: TapTarget,
    bounds: TapBounds,
    send: (message: TapMessage) => void,
  ): () => void;
  /** The specs the workers must apply now; undefined while no tap is open (the usual case). */
  specs(): readonly TapSpec[] | undefined;
  /** Takes what the workers caught in one request. */
  offer(catches: readonly TapCatch[]): void;
  /** Ends every tap (shutdown). */
  closeAll(): void;
}

const TICK_MS = 100;

interface OpenTap {
  accountId: string;
  spec: TapSpec;
  offer(tapCatch: TapCatch): void;
  /** Stops the tap; with a reason, tells its reader why (none: the reader has gone). */
  end(reason?: 'max_duration' | 'shutdown'): void;
}

function openTap(
  accountId: string,
  spec: TapSpec,
  { ratePerSecond, maxSeconds }: TapBounds,
  send: (message: TapMessage) => void,
  onEnd: () => void,
): OpenTap {
  const capacity = Math.max(10, ratePerSecond);
  const buffer: string[] = [];
  let matched = 0;
  let shown = 0;
  let dropped = 0;
  let skipped = 0;
  let tokens = ratePerSecond * (TICK_MS / 1000);
  const tick = setInterval(() => {
    tokens = Math.min(ratePerSecond, tokens + ratePerSecond * (TICK_MS / 1000));
    while (tokens >= 1 && buffer.length > 0) {
      tokens--;
      shown++;
      const json = buffer.shift()!;
      send({ kind: 'event', json, sampled: skipped > 0, skipped, matched, shown, dropped });
      skipped = 0;
    }
  }, TICK_MS);
  const deadline = setTimeout(() => tap.end('max_duration'), maxSeconds * 1000);
  let ended = false;
  const tap: OpenTap = {
    accountId,
    spec,
    offer({ records, matched: count }) {
      matched += count;
      const kept = Math.min(capacity - buffer.length, records.length);
      for (let i = 0; i < kept; i++) buffer.push(records[i]);
      dropped += records.length - kept;
      skipped += count - kept;
    },
    end(reason) {
      if (ended) return;
      ended = true;
      clearInterval(tick);
      clearTimeout(deadline);
      onEnd();
      if (reason !== undefined) send({ kind: 'end', reason, matched, shown });
    },
  };
  return tap;
}

/** The registry of open taps. */
export function createTaps(): Taps {
  const open = new Map<string, OpenTap>();
  let specs: readonly TapSpec[] | undefined;
  const refresh = () => {
    specs = open.size === 0 ? undefined : [...open.values()].map((tap) => tap.spec);
  };
  return {
    open(accountId, partial, bounds, send) {
      const spec: TapSpec = { ...partial, id: newId('tap') };
      const tap = openTap(accountId, spec, bounds, send, () => {
        open.delete(spec.id);
        refresh();
      });
      open.set(spec.id, tap);
      refresh();
      return () => tap.end();
    },
    specs: () => specs,
    offer(catches) {
      for (const tapCatch of catches) open.get(tapCatch.id)?.offer(tapCatch);
    },
    closeAll() {
      for (const tap of [...open.values()]) tap.end('shutdown');
    },
  };
}
