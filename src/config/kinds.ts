import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { type PortRange, parsePortRange } from '../shared/net/port-choice.ts';

// The kinds of value a setting can hold: how its variable's text is read and checked, and how the
// configuration page and `--help` describe what it accepts. The table in settings.ts picks one per
// setting; nothing here knows a setting but by the name it is given.

/** A configuration value that prevents the service from starting. */
export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`invalid configuration: ${variable} ${problem}`);
    this.name = 'ConfigError';
  }
}

/** The settings read so far, by variable: what a later setting's default or bounds refer to. */
export type Earlier = Readonly<Record<string, unknown>>;

/** What a whole number counts, when it is a quantity people read in units. */
export type Unit = 'ms' | 'bytes';

/** How one variable is read, and how the page and `--help` describe it. */
export interface Kind<T> {
  /** What the variable accepts, for people. */
  accepts: string;
  /** The default as the variable would carry it; undefined: unset is off or empty. */
  default: string | undefined;
  /** The default for people, when its text alone does not say it ("4 MiB", "off"). */
  note?: string;
  /** Milliseconds or bytes: the variable's name ends in _MS or _BYTES (a test holds it). */
  unit?: Unit;
  /** The value from the variable's text (undefined when unset); throws ConfigError naming it. */
  read(raw: string | undefined, name: string, earlier: Earlier): T;
}

/** OpenSSH's MaxStartups `start:rate:full`: refused with `rate`% from `start`, all at `full`. */
export interface MaxStartups {
  start: number;
  rate: number;
  full: number;
}

const HOST_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** The value of a setting read earlier; a table that refers forwards is a bug, not a mistake. */
function earlierValue<T>(earlier: Earlier, name: string): T {
  if (!(name in earlier))
    throw new Error(`a setting refers to ${name}, which is not read before it`);
  return earlier[name] as T;
}

const UNITS: Record<Unit, [string, number][]> = {
  bytes: [
    ['PiB', 2 ** 50],
    ['TiB', 2 ** 40],
    ['GiB', 2 ** 30],
    ['MiB', 2 ** 20],
    ['KiB', 2 ** 10],
    ['B', 1],
  ],
  ms: [
    ['h', 3_600_000],
    ['min', 60_000],
    ['s', 1000],
    ['ms', 1],
  ],
};

/** A quantity in the largest unit that divides it: 4194304 bytes is "4 MiB", 72000 ms "72 s". */
export function inUnits(value: number, unit: Unit): string {
  const units = UNITS[unit];
  const [name, per] = units.find(([, per]) => value >= per && value % per === 0) ?? units.at(-1)!;
  return `${value / per} ${name}`;
}

function wholeNumber(raw: string, name: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) {
    throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  }
  return value;
}

interface IntegerOptions {
  default: number;
  min: number;
  /** The largest value, or the variable of an earlier setting whose value it is. */
  max: number | string;
  /** The variable of an earlier setting this one may not be below. */
  atLeast?: string;
  unit?: Unit;
}

/**
 * A whole number within bounds. A `max` naming an earlier setting bounds it by that setting's
 * value, and the default by it too (HEADERS_TIMEOUT_MS within REQUEST_TIMEOUT_MS).
 */
export function integer(options: IntegerOptions): Kind<number> {
  const { unit, min, max, atLeast } = options;
  const shown = (value: number | string) =>
    typeof value === 'number' && unit !== undefined ? inUnits(value, unit) : String(value);
  const what = unit === undefined ? 'a whole number' : `a number of ${unit}`;
  const floor = atLeast === undefined ? '' : `, at least ${atLeast}`;
  const notes = [
    unit && inUnits(options.default, unit),
    typeof max === 'string' && `at most ${max}`,
  ];
  return {
    accepts: `${what}, ${shown(min)}–${shown(max)}${floor}`,
    default: String(options.default),
    note: notes.filter(Boolean).join(', ') || undefined,
    unit,
    read(raw, name, earlier) {
      const most = typeof max === 'string' ? earlierValue<number>(earlier, max) : max;
      const value =
        raw === undefined || raw === ''
          ? Math.min(options.default, most)
          : wholeNumber(raw, name, min, most);
      // The default too: MAX_INGEST_BYTES above MAX_INFLIGHT_BYTES' default needs both set.
      const least = atLeast === undefined ? undefined : earlierValue<number>(earlier, atLeast);
      if (least !== undefined && value < least) {
        throw new ConfigError(name, `must be at least ${atLeast} (${least})`);
      }
      return value;
    },
  };
}

/** Milliseconds within bounds. */
export const ms = (fallback: number, min: number, max: number | string) =>
  integer({ default: fallback, min, max, unit: 'ms' });

/** Bytes within bounds. */
export const bytes = (fallback: number, min: number, max: number, atLeast?: string) =>
  integer({ default: fallback, min, max, unit: 'bytes', atLeast });

/** A count within bounds. */
export const count = (fallback: number, min: number, max: number) =>
  integer({ default: fallback, min, max });

/** A listener's port that may be turned off: `0` for a random port, `off` for no listener. */
export function switchablePort(fallback: number): Kind<number | undefined> {
  return {
    accepts: 'a port 0–65535 (0: a random one), or off',
    default: String(fallback),
    read(raw, name) {
      const text = raw || String(fallback);
      return text === 'off' ? undefined : wholeNumber(text, name, 0, 65535);
    },
  };
}

/** A listener that exists only when its port is set (`0` for a random one). */
export function optionalPort(): Kind<number | undefined> {
  return {
    accepts: 'a port 0–65535 (0: a random one)',
    default: undefined,
    note: 'no listener',
    read: (raw, name) => (raw ? wholeNumber(raw, name, 0, 65535) : undefined),
  };
}

/** Text taken as it is (empty is unset). */
export function text(fallback: string, accepts: string): Kind<string> {
  return { accepts, default: fallback, read: (raw) => raw || fallback };
}

/** A directory, made absolute against the working directory. */
export function directory(fallback: string): Kind<string> {
  return { accepts: 'a directory', default: fallback, read: (raw) => resolve(raw || fallback) };
}

interface OptionalOptions {
  accepts: string;
  /** What unset means, for people. */
  note?: string;
  /** The form a value must have, and what the error says when it has not. */
  pattern?: RegExp;
  problem?: (raw: string) => string;
}

/** Text that may be unset (empty is unset); checked against a pattern when one is given. */
export function optional(options: OptionalOptions): Kind<string | undefined> {
  const { accepts, note, pattern, problem } = options;
  return {
    accepts,
    default: undefined,
    note,
    read(raw, name) {
      const value = raw || undefined;
      if (value !== undefined && pattern !== undefined && !pattern.test(value)) {
        throw new ConfigError(name, problem?.(value) ?? `does not have the form ${pattern}`);
      }
      return value;
    },
  };
}

/** One word of a closed set. */
export function oneOf(values: readonly string[], fallback: string): Kind<string> {
  return {
    accepts: `one of ${values.join(', ')}`,
    default: fallback,
    read(raw, name) {
      const value = raw || fallback;
      if (!values.includes(value)) {
        throw new ConfigError(name, `must be one of ${values.join(', ')}, got "${value}"`);
      }
      return value;
    },
  };
}

interface ListOptions<T> {
  default: string;
  accepts: string;
  /** One item read and checked; throws ConfigError naming the variable. */
  item: (value: string, name: string) => T;
  /** The error when the list is empty; undefined: an empty list is allowed. */
  empty?: string;
}

/** A comma-separated list; items are trimmed, empty ones dropped. Set but empty: no items. */
export function list<T>(options: ListOptions<T>): Kind<T[]> {
  return {
    accepts: options.accepts,
    default: options.default === '' ? undefined : options.default,
    note: options.default === '' ? 'none' : undefined,
    read(raw, name) {
      const values = commaList(raw ?? options.default).map((value) => options.item(value, name));
      if (values.length === 0 && options.empty !== undefined) {
        throw new ConfigError(name, options.empty);
      }
      return values;
    },
  };
}

function commaList(text: string): string[] {
  return text
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

/** A list item that is a DNS name, lower-cased. */
export function dnsName(value: string, name: string): string {
  const lower = value.toLowerCase();
  if (!lower.split('.').every((label) => HOST_LABEL.test(label))) {
    throw new ConfigError(name, `has "${lower}", which is not a valid DNS name`);
  }
  return lower;
}

/** A list item that is one DNS label, lower-cased. */
export function dnsLabel(value: string, name: string): string {
  const lower = value.toLowerCase();
  if (!HOST_LABEL.test(lower)) {
    throw new ConfigError(name, `has "${lower}", which is not a valid DNS label`);
  }
  return lower;
}

/** A list item that is a token of at least 16 characters (INGEST_TOKENS). */
export function token16(value: string, name: string): string {
  if (value.length < 16) throw new ConfigError(name, 'has a token shorter than 16 characters');
  return value;
}

/** One DNS name, lower-cased. */
export function domain(fallback: string): Kind<string> {
  return {
    accepts: 'a DNS name',
    default: fallback,
    read: (raw, name) => dnsName((raw || fallback).trim(), name),
  };
}

/** An http(s) URL; trailing slashes dropped. The default may be built from earlier settings. */
export function url(fallback: string, compute?: (earlier: Earlier) => string): Kind<string> {
  return {
    accepts: 'an http(s) URL',
    default: fallback,
    read(raw, name, earlier) {
      const value = raw || (compute ? compute(earlier) : fallback);
      const parsed = URL.parse(value);
      if (parsed?.protocol !== 'http:' && parsed?.protocol !== 'https:') {
        throw new ConfigError(name, `must be an http(s) URL, got "${value}"`);
      }
      return value.replace(/\/+$/, '');
    },
  };
}

/** `http://host:port` of a listener, read as its origin; unset: '' (none). */
export function internalOrigin(): Kind<string> {
  return {
    accepts: 'http://host:port',
    default: undefined,
    note: 'none',
    read(raw, name) {
      if (!raw) return '';
      const parsed = URL.parse(raw);
      if (parsed?.protocol !== 'http:' || parsed.port === '' || parsed.pathname !== '/') {
        throw new ConfigError(name, `must be http://host:port, got "${raw}"`);
      }
      return parsed.origin;
    },
  };
}

/** Addresses per region, `region=ip|ip,…`; `*` names those of the regions not listed. */
export function regionAddresses(fallback: string): Kind<Record<string, string[]>> {
  return {
    accepts: 'region=ip|ip,… (* for the regions not listed)',
    default: fallback,
    read(raw, name) {
      const addresses: Record<string, string[]> = {};
      for (const entry of commaList(raw ?? fallback)) {
        const [region, ips = ''] = entry.split('=', 2).map((part) => part.trim().toLowerCase());
        const values = ips.split('|').map((ip) => ip.trim());
        if (region === '' || values.some((ip) => isIP(ip) === 0)) {
          throw new ConfigError(name, `has "${entry}"; write region=ip|ip,… (or *=ip)`);
        }
        addresses[region] = values;
      }
      return addresses;
    },
  };
}

/** OpenSSH's MaxStartups: `start:rate:full`, or one number (every connection beyond refused). */
export function maxStartups(fallback: string): Kind<MaxStartups> {
  return {
    accepts: 'start:rate:full (1 ≤ start ≤ full, rate 0–100), or one number',
    default: fallback,
    read(raw, name) {
      const value = raw || fallback;
      const numbers = /^\d+(:\d+:\d+)?$/.test(value) ? value.split(':').map(Number) : [];
      const [start, rate, full] = numbers.length === 1 ? [numbers[0], 100, numbers[0]] : numbers;
      if (numbers.length === 0 || start < 1 || rate > 100 || full < start) {
        throw new ConfigError(
          name,
          `must be start:rate:full (1 <= start <= full, rate 0-100) or one number, got "${value}"`,
        );
      }
      return { start, rate, full };
    },
  };
}

/** An inclusive range of ports, `first-last`. */
export function portRange(fallback: string): Kind<PortRange> {
  return {
    accepts: 'first-last, ports 1–65535',
    default: fallback,
    read(raw, name) {
      try {
        return parsePortRange(raw || fallback);
      } catch (error) {
        throw new ConfigError(name, (error as Error).message);
      }
    },
  };
}

/** A 32-byte key written as 64 hex digits or in base64; `name` says where it came from. */
export function parseSecretsKey(raw: string, name: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(raw)
    ? Buffer.from(raw, 'hex')
    : /^[A-Za-z0-9+/_-]{43}=?$/.test(raw)
      ? Buffer.from(raw, 'base64')
      : undefined;
  if (key?.length !== 32) {
    throw new ConfigError(name, 'must be 32 bytes in base64 or hex (openssl rand -base64 32)');
  }
  return key;
}

/** A 32-byte key, or unset. */
export function secretsKey(note: string): Kind<Buffer | undefined> {
  return {
    accepts: '32 bytes in base64 or hex',
    default: undefined,
    note,
    read: (raw, name) => (raw ? parseSecretsKey(raw, name) : undefined),
  };
}
