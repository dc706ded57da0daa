import type { MuxStream } from './stream.ts';

// muxado's heartbeat: the peer opens one stream of type 0xFFFFFFFF and writes 4 random bytes
// every interval; the other side echoes them. The echo is all a server owes; what it learns is
// that a peer silent for longer than its interval and tolerance is gone (a cut network shows
// nothing else for minutes), so the session ends then.

/** Bounds on the peer's timing: no heartbeat check shorter than 2 s or longer than 5 minutes. */
const MIN_TIMEOUT_MS = 2_000;
const MAX_TIMEOUT_MS = 5 * 60_000;

/** The check of one session's heartbeats. */
export interface HeartbeatWatch {
  /** A beat arrived: the timeout starts again. */
  beat(): void;
  /** The peer said its timing (Auth's HeartbeatInterval and HeartbeatTolerance, in ms). */
  setTiming(intervalMs: number, toleranceMs: number): void;
  stop(): void;
}

/** The timeout for a peer's timing, within this server's bounds. */
export function heartbeatTimeout(intervalMs: number, toleranceMs: number): number {
  const wanted = intervalMs + toleranceMs;
  if (!Number.isFinite(wanted) || wanted <= 0) return MAX_TIMEOUT_MS;
  return Math.min(MAX_TIMEOUT_MS, Math.max(MIN_TIMEOUT_MS, wanted));
}

/** Calls `onTimeout` once when no beat came within the timeout (muxado's default: 10 s + 15 s). */
export function watchHeartbeats(onTimeout: () => void, timeoutMs = 25_000): HeartbeatWatch {
  let timeout = timeoutMs;
  let timer = setTimeout(onTimeout, timeout).unref();
  return {
    beat: () => timer.refresh(),
    setTiming(intervalMs, toleranceMs) {
      timeout = heartbeatTimeout(intervalMs, toleranceMs);
      clearTimeout(timer);
      timer = setTimeout(onTimeout, timeout).unref();
    },
    stop: () => clearTimeout(timer),
  };
}

/** Echoes what the peer writes on its heartbeat stream; each chunk counts as a beat. */
export function echoHeartbeats(stream: MuxStream, onBeat: () => void): void {
  stream.on('data', (chunk: Buffer) => {
    onBeat();
    stream.write(chunk);
  });
  stream.on('error', () => {});
}
