// Traffic Policy (ngrok's format): documents compiled once per version, run by the edge per
// connection and request. docs/traffic-policy.md says what is supported.

export { ACTIONS } from './actions/index.ts';
export { type CompiledPolicy, compilePolicy, type EndpointProtocol } from './compile.ts';
export { PHASES, type Phase, POLICY_LIMITS } from './document.ts';
export {
  createEndpointPolicies,
  type EndpointPolicies,
  type EndpointPolicy,
} from './endpoint-policies.ts';
export {
  type Answer,
  appendValue,
  createExchange,
  type Decisions,
  type Exchange,
  type HeaderMap,
  noDecisions,
  type PolicyServices,
  type PolicyValues,
} from './exchange.ts';
export { PolicyError, type PolicyLocation } from './policy-error.ts';
export { hasPhase, runPhase } from './run.ts';
export {
  type ConnectionFacts,
  connectionValues,
  endpointValues,
  headerMap,
  type RequestFacts,
  withRequest,
  withResponse,
} from './values.ts';
