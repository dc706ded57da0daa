import type { FastifyRequest } from 'fastify';
import type { Caller } from '../shared/caller.ts';
import { AppError } from '../shared/errors.ts';
import { bearerToken, hashToken, sameHash } from '../shared/tokens.ts';
import { findApiKeyByHash } from '../store/api-keys.ts';
import type { Db } from '../store/db.ts';

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller;
  }
}

/** Resolves the request's bearer token to its API key, or throws ERR_UNAUTHORIZED. */
export function createApiKeyAuth(db: Db) {
  return async function authenticate(request: FastifyRequest): Promise<void> {
    const header = request.headers.authorization;
    if (header === undefined) {
      throw new AppError(
        'ERR_UNAUTHORIZED',
        'missing Authorization header; send "Bearer <API_KEY>"',
      );
    }
    const token = bearerToken(header);
    if (token === undefined) {
      throw new AppError(
        'ERR_UNAUTHORIZED',
        'malformed Authorization header; send "Bearer <API_KEY>"',
      );
    }
    const hash = hashToken(token);
    const key = await findApiKeyByHash(db, hash);
    if (key === undefined || !sameHash(Buffer.from(key.token_hash), hash)) {
      throw new AppError('ERR_UNAUTHORIZED', 'the API key is not valid');
    }
    request.caller = { accountId: key.account_id, keyId: key.id };
  };
}
