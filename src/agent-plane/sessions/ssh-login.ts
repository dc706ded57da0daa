import type { AuthContext } from 'ssh2';
import type { Db } from '../../store/db.ts';
import {
  type AgentCredential,
  credentialOfKey,
  credentialOfToken,
  signatureValid,
} from './authenticate.ts';
import type { Login } from './login-limits.ts';
import type { SshConnectionContext } from './ssh-connection-context.ts';

// An `ssh -R` agent's login: an authtoken as the user name or the password, or a registered
// public key. A failed attempt counts against MaxAuthTries (login-limits.ts); an agent refused by
// an `agent` IP restriction still logs in, so that it can be told why before it is disconnected.

/** Finds the credential an agent presents; rejects with the methods it may try next. */
async function credentialOf(ctx: AuthContext, db: Db): Promise<AgentCredential | undefined> {
  if (ctx.method === 'none') return credentialOfToken(db, ctx.username);
  if (ctx.method === 'password') return credentialOfToken(db, ctx.password);
  if (ctx.method !== 'publickey') return undefined;
  const credential = await credentialOfKey(db, ctx.key.data);
  if (credential === undefined || ctx.signature === undefined || ctx.blob === undefined) {
    return credential;
  }
  return signatureValid(ctx.key, ctx.blob, ctx.signature, ctx.hashAlgo) ? credential : undefined;
}

/** Answers one authentication attempt of the connection. */
export function onAuthentication(conn: SshConnectionContext, login: Login, auth: AuthContext) {
  const { deps, peer } = conn;
  credentialOf(auth, deps.db).then(
    async (found) => {
      // A public key query (no signature yet) is answered "go on" when the key is registered.
      if (found === undefined) {
        // The attempt one too many disconnects instead (Too many authentication failures).
        if (!login.failed(auth.method)) auth.reject(['publickey', 'password']);
        return;
      }
      conn.credential = found;
      // The single call site of `agent` IP restrictions for ssh -R.
      const allowed = (await deps.ipAllowed?.(found.accountId, 'agent', peer.ip)) ?? true;
      if (!allowed) conn.ipRefusal = `agents from ${peer.ip} are not allowed by an IP restriction`;
      auth.accept();
    },
    (error: unknown) => {
      deps.logger.error({ err: error }, 'agent authentication failed');
      auth.reject();
    },
  );
}
