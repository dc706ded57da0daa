import type { CompiledPolicy, CompiledRule } from './compile.ts';
import type { Phase } from './document.ts';
import type { Exchange } from './exchange.ts';
import { withValues } from './macros.ts';

// Runs one phase of a compiled policy on an exchange: rules in order, a rule's actions when all
// its expressions hold (an expression whose evaluation fails does not hold), until an action
// ends the phase (deny, custom-response, redirect, …).

/** 'stop' when an action ended the phase (the exchange says how: answer, close, forward). */
export async function runPhase(
  policy: CompiledPolicy,
  phase: Phase,
  x: Exchange,
): Promise<'continue' | 'stop'> {
  x.phase = phase;
  for (const rule of policy.phases[phase]) {
    if (rule.expressions.length > 0 && !withValues(x.values, holds, rule.expressions)) continue;
    for (const action of rule.actions) {
      // Most actions answer at once: a promise is awaited only when one comes back.
      const result = action.run(x);
      const outcome = result instanceof Promise ? await result : result;
      if (outcome === 'stop') return 'stop';
    }
  }
  return 'continue';
}

/** Whether every expression holds on `values` (a rule's, ANDed). */
function holds(values: unknown, expressions: CompiledRule['expressions']): boolean {
  for (const e of expressions) if (!e.matches(values)) return false;
  return true;
}

/** Whether the policy has rules in `phase` (an empty phase costs nothing to skip). */
export function hasPhase(policy: CompiledPolicy | undefined, phase: Phase): boolean {
  return policy !== undefined && policy.phases[phase].length > 0;
}
