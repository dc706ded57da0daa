import type { Logger } from '../../shared/logger.ts';
import { STREAM_TYPES } from './messages.ts';
import type { MuxSession } from './muxado/session.ts';
import { openTyped } from './muxado/typed.ts';

// StopTunnel (type 9), the server's word that one tunnel ended: the agent closes that listener
// and shows the message. Nothing is awaited: the agent answers nothing of use.

export function sendStopTunnel(mux: MuxSession, id: string, reason: string, logger: Logger): void {
  try {
    const stream = openTyped(mux, STREAM_TYPES.stopTunnel);
    stream.on('error', () => {});
    stream.resume();
    stream.end(
      JSON.stringify({ Id: id, Message: `the tunnel was stopped: ${reason}`, ErrorCode: null }),
    );
  } catch (error) {
    logger.debug({ err: error }, 'StopTunnel could not be sent');
  }
}
