// Which TCP port a new reserved address gets: a uniformly random free port of the configured
// range. Random rather than lowest-free, so a deleted address's port is not handed straight to
// the next account (whose clients might still reach the old owner's cached address).

/** An inclusive range of TCP ports. */
export interface PortRange {
  first: number;
  last: number;
}

/** Parses `first-last` (e.g. `20000-29999`); throws an Error saying what is wrong. */
export function parsePortRange(text: string): PortRange {
  const match = /^(\d{1,5})-(\d{1,5})$/.exec(text.trim());
  if (!match) throw new Error(`must be "first-last", e.g. 20000-29999, got "${text}"`);
  const first = Number(match[1]);
  const last = Number(match[2]);
  if (first < 1 || last > 65535 || first > last) {
    throw new Error(`must be two ports 1-65535, the first not above the last, got "${text}"`);
  }
  return { first, last };
}

/**
 * The free port of rank ⌊random × free⌋ among the ports of `range` not in `taken`, or undefined
 * when every port is taken. `random` is in [0, 1) (Math.random()); `taken` may hold ports outside
 * the range (the range was narrowed since) and need not be sorted.
 */
export function choosePort(
  range: PortRange,
  taken: Iterable<number>,
  random: number,
): number | undefined {
  const inRange = [...new Set(taken)]
    .filter((port) => port >= range.first && port <= range.last)
    .sort((a, b) => a - b);
  const free = range.last - range.first + 1 - inRange.length;
  if (free <= 0) return undefined;
  // The rank-th free port: start at first + rank and step over every taken port at or below it.
  let port = range.first + Math.min(free - 1, Math.floor(random * free));
  for (const used of inRange) {
    if (used > port) break;
    port++;
  }
  return port;
}
