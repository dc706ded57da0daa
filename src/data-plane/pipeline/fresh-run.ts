/**
 * A run that always starts after it was asked for: while one is in flight, callers share one
 * follow-up run instead of the one in flight, which may have read its input before their change.
 * (The pipeline's reload and the audit relay's drain.)
 */
export class FreshRun<T> {
  private readonly work: () => Promise<T>;
  private running: Promise<T> | undefined;
  private again: Promise<T> | undefined;

  constructor(work: () => Promise<T>) {
    this.work = work;
  }

  /** A follow-up is already waiting: whatever is asked now will be covered by it. */
  get queued(): boolean {
    return this.again !== undefined;
  }

  /** The run in flight, if any. */
  get inFlight(): Promise<T> | undefined {
    return this.running;
  }

  /** Resolves with a run that started after this call (a method that may be passed around). */
  readonly run = (): Promise<T> => {
    if (this.running === undefined) {
      this.running = this.work().finally(() => {
        this.running = undefined;
      });
      return this.running;
    }
    this.again ??= this.running
      .catch(() => {})
      .then(() => {
        this.again = undefined;
        return this.run();
      });
    return this.again;
  };
}
