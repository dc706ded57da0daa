import { parseDocument } from 'yaml';

// An endpoint's audit events carry its policy with the secrets' values replaced, as destinations'
// events show no secret: basic-auth passwords (the usernames stay), the login actions'
// client_secret, verify-webhook's secret. Answers show the owner the document as written.

const REDACTED = '[redacted]';

/** The config fields of each action type that hold secrets. */
const SECRET_FIELDS: Readonly<Record<string, readonly string[]>> = {
  'basic-auth': ['credentials'],
  oauth: ['client_secret'],
  'openid-connect': ['client_secret'],
  oidc: ['client_secret'],
  'verify-webhook': ['secret'],
};

/** `user:password` as `user:[redacted]`; anything else (a template) whole. */
function redactCredential(credential: unknown): string {
  const text = String(credential);
  const colon = text.indexOf(':');
  return colon < 0 ? REDACTED : `${text.slice(0, colon + 1)}${REDACTED}`;
}

type Path = (string | number)[];
type Rule = { actions?: { type?: string; config?: Record<string, unknown> }[] };

/** The paths of the secret values (each credential) in a document accepted when stored. */
function secretPaths(policy: unknown): { path: Path; value: unknown }[] {
  const found: { path: Path; value: unknown }[] = [];
  for (const [phase, rules] of Object.entries((policy ?? {}) as Record<string, Rule[]>)) {
    for (const [r, rule] of (rules ?? []).entries()) {
      for (const [a, action] of (rule.actions ?? []).entries()) {
        for (const field of SECRET_FIELDS[action.type ?? ''] ?? []) {
          const path = [phase, r, 'actions', a, 'config', field];
          const value = action.config?.[field];
          if (Array.isArray(value)) {
            for (const [i, item] of value.entries())
              found.push({ path: [...path, i], value: item });
          } else if (value !== undefined) found.push({ path, value });
        }
      }
    }
  }
  return found;
}

/** The policy text with its secrets' values redacted (its layout and comments kept). */
export function redactPolicySecrets(text: string): string {
  const doc = parseDocument(text);
  for (const { path, value } of secretPaths(doc.toJS())) {
    doc.setIn(path, path.at(-2) === 'credentials' ? redactCredential(value) : REDACTED);
  }
  return doc.toString({ flowCollectionPadding: false });
}
