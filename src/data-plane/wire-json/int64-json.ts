// int64 values in the event JSON. A double holds every integer of magnitude up to 2^53
// exactly, so such a value is a plain number (what JSON.stringify writes fastest). A larger one
// would be rounded (9007199254740993 would become …992), so it is JSON.rawJSON of its digits
// (ES2025): a frozen object that JSON.stringify writes as those digits verbatim. Code that reads
// the object rather than its text sees `{ rawJSON: '…' }` for such a value.

/** A value JSON.stringify writes as its `rawJSON` text (what JSON.rawJSON makes). */
export interface RawJson {
  readonly rawJSON: string;
}

/** An int64 as the event JSON holds it: a number when exact, else its digits as raw JSON. */
export type Int64Json = number | RawJson;

// ES2025; the TypeScript lib in use does not declare them yet.
const json = JSON as unknown as {
  rawJSON(text: string): RawJson;
  isRawJSON(value: unknown): value is RawJson;
};

/** Whether `value` is a raw JSON value (made by JSON.rawJSON). */
export const isRawJson = json.isRawJSON;

const EXACT = 2n ** 53n;

/** An int64 as the event JSON holds it (see above). */
export function int64Json(value: bigint): Int64Json {
  return value >= -EXACT && value <= EXACT ? Number(value) : json.rawJSON(value.toString());
}

/** The signed 64-bit value hi·2³² + lo (hi a signed 32-bit int, lo its unsigned low word). */
export function int64FromHalves(hi: number, lo: number): Int64Json {
  // |hi| < 2^21: the value is below 2^53 in magnitude, and one addition of exact doubles.
  if (hi >= -0x200000 && hi < 0x200000) return hi * 4294967296 + (lo >>> 0);
  return int64Json((BigInt(hi) << 32n) + BigInt(lo >>> 0));
}

const INTEGER = /^-?(0|[1-9]\d*)$/;
// Every integer of magnitude above 2^53 has at least 16 digits.
const LONG_DIGITS = /\d{16}/;

/**
 * The JSON number `source` (`value` once parsed) kept exact: an integer whose double would be
 * written with other digits becomes the raw JSON of its own digits; anything else stays `value`.
 */
export function exactNumber(source: string, value: number): number | RawJson {
  if (Number.isSafeInteger(value) || !INTEGER.test(source) || String(value) === source) {
    return value;
  }
  return json.rawJSON(source);
}

// A JSON.parse reviver (ES2025 gives it the value's source text) keeping integers exact.
function keepExactIntegers(_key: string, value: unknown, context?: { source?: string }): unknown {
  const source = context?.source;
  return typeof value === 'number' && source !== undefined ? exactNumber(source, value) : value;
}

/** JSON.parse, but an integer beyond 2^53 becomes raw JSON of its exact digits, not a double. */
export function parseExact(text: string): unknown {
  if (!LONG_DIGITS.test(text)) return JSON.parse(text);
  try {
    return JSON.parse(text, keepExactIntegers);
  } catch (error) {
    // A reviver makes JSON.parse recurse: text nested deeper than the stack is parsed without.
    if (error instanceof RangeError) return JSON.parse(text);
    throw error;
  }
}
