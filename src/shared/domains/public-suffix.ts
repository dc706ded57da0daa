import { getPublicSuffix } from 'tldts';

// The Public Suffix List, as tldts ships it (docs/decisions.md#public-suffixes): both its ICANN
// section (`com`, `co.uk`) and its private one (`github.io`, `ngrok.app`), whose names under a
// suffix belong to different owners as much as under `com` do. A TLD the list does not name
// (`test`, `example`) is a suffix of one label, as the list's implicit `*` rule says.

/** True when `name` is a public suffix: no single owner can claim it. */
export function isPublicSuffix(name: string): boolean {
  return getPublicSuffix(name, { allowPrivateDomains: true }) === name;
}
