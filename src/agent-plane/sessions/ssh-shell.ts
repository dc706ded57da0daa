import type { AcceptConnection, RejectConnection, Session } from 'ssh2';
import type { SshConnectionContext } from './ssh-connection-context.ts';

// `ssh -R` without -N asks for a shell: it gets one line saying what is served, then nothing.
// ssh may ask before the bind's checks are done: the line waits for them. Other channels an
// agent might open (direct-tcpip, streamlocal, x11) ssh2 refuses itself.

/** Session channels an agent may open on one connection (OpenSSH's MaxSessions); it needs one. */
export const MAX_SESSION_CHANNELS = 10;

/** The connection's session-channel handler. */
export function sessionChannels(ctx: SshConnectionContext) {
  let open = 0;
  return (acceptSession: AcceptConnection<Session>, rejectSession: RejectConnection) => {
    if (open >= MAX_SESSION_CHANNELS) {
      ctx.deps.metrics.sshChannelsRefused.inc();
      return rejectSession();
    }
    open += 1;
    const shell = acceptSession();
    shell.once('close', () => {
      open -= 1;
    });
    shell.on('pty', (accept) => accept?.());
    shell.on('shell', (accept) => {
      const channel = accept();
      void ctx.bindChecked.then(() => {
        if (!ctx.closed) {
          channel.write(`Agent Ingress: this connection serves ${ctx.served ?? 'nothing'}\r\n`);
        }
      });
    });
  };
}
