import type { Sink } from '../sinks/types.ts';
import type { HealthTracker } from './destination-health.ts';
import type { Spool } from './spool.ts';

/**
 * Replays a destination's spool to its sink, oldest batch first, one loop at a time, waiting the
 * health's backoff after each failure; the destination is ok again once the spool is empty.
 */
export class SpoolReplay {
  private readonly spool: Spool;
  private readonly sink: Sink;
  private readonly health: HealthTracker;
  private running = false;
  private stopping = false;
  private done: Promise<void> = Promise.resolve();
  private wake: (() => void) | undefined;
  private sleepTimer: NodeJS.Timeout | undefined;

  constructor(spool: Spool, sink: Sink, health: HealthTracker) {
    this.spool = spool;
    this.sink = sink;
    this.health = health;
  }

  /** Starts the loop unless it runs (or replay has stopped). */
  ensure(): void {
    if (this.running || this.stopping) return;
    this.running = true;
    this.done = this.loop();
  }

  /** Ends the loop, cutting its wait short, and resolves once it has ended. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.sleepTimer) clearTimeout(this.sleepTimer);
    this.wake?.();
    await this.done;
  }

  // Replays the spool head until the spool is empty. The emptiness check and the flag reset happen
  // in the same synchronous step, so an append that lands afterwards always starts a new loop.
  private async loop(): Promise<void> {
    const { spool, health } = this;
    try {
      while (!this.stopping) {
        if (spool.count === 0) {
          health.set('ok');
          return;
        }
        try {
          const head = await spool.peek();
          if (!head) continue;
          await this.sink.write(head.batch);
          await spool.remove(head.seq);
          health.succeeded();
          if (health.status === 'parked') health.set('retrying');
        } catch (err) {
          health.failed(err);
          if (!this.stopping) await this.sleep(health.nextDelay());
        }
      }
    } finally {
      this.running = false;
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.sleepTimer = setTimeout(resolve, ms);
    });
  }
}
