import { describe, expect, it } from 'vitest';
import { aclAllows, parseAcl } from '../../src/agent-plane/sessions/acl.ts';
import { AppError } from '../../src/shared/errors.ts';

// Credential acls: the rules the API takes, and what each lets an agent bind.

describe('credential acl', () => {
  it('takes bind:<host>:<port> for a reserved TCP address, as the API shows the address', () => {
    expect(
      parseAcl(['bind:EU.tcp.agent-ingress.example:23817', ' bind:*.example.com ', '*']),
    ).toEqual(['bind:eu.tcp.agent-ingress.example:23817', 'bind:*.example.com', '*']);
  });

  it.each([
    'bind:eu.tcp.example:0',
    'bind:eu.tcp.example:65536',
    'bind:eu.tcp.example:023817',
    'bind:*.tcp.example:23817',
    'bind:eu.tcp.example:',
    'bind::23817',
    'bind:eu..example:23817',
    'eu.tcp.example:23817',
  ])('refuses %s with a 400 naming the rule and the forms it may take', (rule) => {
    const error = (() => {
      try {
        parseAcl(['bind:ok.example', rule]);
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).message).toBe(
      `"acl[1]": "${rule}" is not a rule; write bind:<domain>, bind:*.<domain>, bind:<host>:<port> (a reserved TCP address) or *`,
    );
  });

  it('lets an address rule bind that address only, and a domain rule every port of its host', () => {
    const address = ['bind:eu.tcp.example:23817'];
    expect(aclAllows(address, 'eu.tcp.example', 23817)).toBe(true);
    expect(aclAllows(address, 'eu.tcp.example', 23818)).toBe(false);
    expect(aclAllows(address, 'us.tcp.example', 23817)).toBe(false);
    // An HTTP bind has no port: an address rule never allows a hostname.
    expect(aclAllows(address, 'eu.tcp.example')).toBe(false);
    expect(aclAllows(['bind:eu.tcp.example'], 'eu.tcp.example', 23817)).toBe(true);
    expect(aclAllows(['bind:*.tcp.example'], 'eu.tcp.example', 23817)).toBe(true);
    expect(aclAllows(['bind:*.agents.example.com'], 'eu.tcp.example', 23817)).toBe(false);
    expect(aclAllows(['bind:*.agents.example.com'], 'app.us.agents.example.com')).toBe(true);
    expect(aclAllows(['*'], 'eu.tcp.example', 23817)).toBe(true);
    expect(aclAllows([], 'eu.tcp.example', 23817)).toBe(true);
  });
});
