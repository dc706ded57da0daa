import { expect } from 'vitest';

/**
 * Runs a delete of ngrok's official TypeScript client: it parses the empty 204 answer as JSON
 * and so rejects, against api.ngrok.com too (README: "ngrok's API clients"); that is the only
 * failure allowed. Callers check with a GET that the object is gone.
 */
export async function clientDelete(run: () => Promise<unknown>): Promise<void> {
  await run().catch((error: Error) => {
    expect(error.message).toContain('"invalid js');
  });
}
