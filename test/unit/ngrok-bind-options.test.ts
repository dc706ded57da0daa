import { describe, expect, it } from 'vitest';
import { unsupportedOptions } from '../../src/agent-plane/ngrok/bind.ts';
import { NgrokRefusal, ngrokError } from '../../src/agent-plane/ngrok/messages.ts';
import { proxyPreamble } from '../../src/agent-plane/ngrok/tunnel-session.ts';

// What a Bind's options may hold: what ngrok's SDKs send for a plain endpoint passes; every
// option the service does not apply is named, whatever its value's shape.

/** The HTTP options @ngrok/ngrok 1.7 sends for forward({ domain }). */
const PLAIN_HTTP = {
  Domain: 'app.example.com',
  Hostname: '',
  Auth: '',
  Subdomain: '',
  HostHeaderRewrite: false,
  LocalUrlScheme: null,
  ProxyProto: 0,
  Compression: null,
  CircuitBreaker: null,
  IPRestriction: null,
  BasicAuth: null,
  OAuth: null,
  OIDC: null,
  WebhookVerification: null,
  MutualTLSCA: null,
  RequestHeaders: null,
  ResponseHeaders: null,
  WebsocketTCPConverter: null,
  UserAgentFilter: null,
  TrafficPolicy: null,
};

describe('ngrok Bind options', () => {
  it('passes a plain endpoint, and names each option the service does not apply', () => {
    expect(unsupportedOptions(PLAIN_HTTP)).toEqual([]);
    expect(
      unsupportedOptions({ Addr: 'us.tcp.example:20001', ProxyProto: 0, IPRestriction: null }),
    ).toEqual([]);
    const used = {
      ...PLAIN_HTTP,
      BasicAuth: { Credentials: [{ Username: 'u', CleartextPassword: 'p' }] },
      Compression: {},
      TrafficPolicy: 'on_http_request: []',
      ProxyProto: 2,
      HostHeaderRewrite: true,
      Subdomain: 'x',
      SomethingNewer: 'set',
    };
    expect(unsupportedOptions(used).sort()).toEqual(
      [
        'BasicAuth',
        'Compression',
        'TrafficPolicy',
        'ProxyProto',
        'HostHeaderRewrite',
        'Subdomain',
        'SomethingNewer',
      ].sort(),
    );
  });

  it('writes refusals as ngrok does, and the proxy header as the SDK reads it', () => {
    expect(ngrokError('no', 'ERR_NGROK_107')).toEqual({ Error: 'no\nERR_NGROK_107' });
    expect(new NgrokRefusal('plain').answer()).toEqual({ Error: 'plain' });
    const preamble = proxyPreamble({
      Id: 'tn_1',
      ClientAddr: '1.2.3.4:5',
      Proto: 'https',
      EdgeType: '3',
      PassthroughTLS: false,
    });
    const length = Number(preamble.readBigInt64LE(0));
    expect(length).toBe(preamble.length - 8);
    expect(JSON.parse(preamble.subarray(8).toString())).toMatchObject({
      Id: 'tn_1',
      EdgeType: '3',
    });
  });
});
