import { ValidationError } from '../core/errors.js';

/**
 * Kubernetes resource quantities (`resource.Quantity`) as exact integers of nano-units, so sums
 * never drift. Supports what the apiserver accepts: optional sign, decimal digits with an optional
 * fraction, then a binary suffix (Ki Mi Gi Ti Pi Ei), a decimal suffix (n u m k M G T P E), or a
 * decimal exponent (`e3`, `E-2`; `E` alone is exa, as in Go).
 */

const NANO = 1_000_000_000n;

const BINARY_EXPONENT: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const DECIMAL_EXPONENT: Record<string, number> = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

const QUANTITY = /^([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)$/;

/**
 * The largest magnitude of a quantity, 2^63 - 1 units, in nano-units: the apiserver caps a larger
 * one there. Past it nothing is computed, so an exponent of millions (which a target's server or
 * a tenant's Target may write) costs nothing, where its bigint cost seconds of the event loop.
 */
const MAX_NANO = ((1n << 63n) - 1n) * NANO;
const MAX_NANO_DIGITS = MAX_NANO.toString().length;

/**
 * The longest quantity text taken: the apiserver writes quantities canonically, in at most about
 * 25 characters. Turning a string of digits into a bigint takes time quadratic in its length.
 */
const MAX_QUANTITY_LENGTH = 64;

/**
 * Parses a quantity into nano-units (value x 10^9). Precision finer than a nano-unit is rounded
 * up, and a magnitude over 2^63 - 1 units is taken as that, as the apiserver does.
 *
 * @throws ValidationError for anything that is not a quantity, or is longer than
 *   {@link MAX_QUANTITY_LENGTH} characters.
 */
export function parseQuantity(input: string | number): bigint {
  const text = typeof input === 'number' ? String(input) : input.trim();
  if (text.length > MAX_QUANTITY_LENGTH) throw new ValidationError(`invalid quantity: longer than ${MAX_QUANTITY_LENGTH} characters`);
  const m = QUANTITY.exec(text);
  if (!m || (m[2] === '' && (m[3] === undefined || m[3] === ''))) {
    throw new ValidationError(`invalid quantity ${JSON.stringify(input)}`);
  }
  // The suffix group is `(.*)`: it always matches, possibly empty.
  const [, sign, whole, fraction = '', suffix = ''] = m;
  let exp10 = 0;
  let exp2 = 0;
  // Own keys only: `constructor` or `toString` are no suffix, though a plain object inherits them.
  const binary = Object.hasOwn(BINARY_EXPONENT, suffix) ? BINARY_EXPONENT[suffix] : undefined;
  const decimal = Object.hasOwn(DECIMAL_EXPONENT, suffix) ? DECIMAL_EXPONENT[suffix] : undefined;
  if (binary !== undefined) {
    exp2 = binary;
  } else if (decimal !== undefined) {
    exp10 = decimal;
  } else if (/^[eE][+-]?[0-9]+$/.test(suffix)) {
    exp10 = Number(suffix.slice(1));
  } else {
    throw new ValidationError(`invalid quantity ${JSON.stringify(input)}: unknown suffix ${JSON.stringify(suffix)}`);
  }
  // digits x 10^(exp10 - fraction.length) x 2^exp2, scaled to nano-units.
  const digits = BigInt((whole || '0') + fraction);
  const scale = exp10 - fraction.length + 9;
  const numerator = digits * (1n << BigInt(exp2));
  let nano: bigint;
  if (numerator === 0n) {
    nano = 0n;
  } else if (scale >= MAX_NANO_DIGITS) {
    nano = MAX_NANO; // 10^scale alone has more digits than the cap
  } else if (scale >= 0) {
    nano = numerator * 10n ** BigInt(scale);
  } else if (-scale > numerator.toString().length) {
    nano = 1n; // less than one nano-unit, rounded up
  } else {
    const divisor = 10n ** BigInt(-scale);
    nano = (numerator + divisor - 1n) / divisor;
  }
  if (nano > MAX_NANO) nano = MAX_NANO;
  return sign === '-' ? -nano : nano;
}

/** Resources counted in bytes, written with binary suffixes when exact (as kubelets report them). */
function isByteResource(resourceName: string): boolean {
  return resourceName === 'memory' || resourceName === 'ephemeral-storage' || resourceName === 'storage' || resourceName.startsWith('hugepages-');
}

const BINARY_SUFFIXES: [string, bigint][] = [
  ['Ei', 1n << 60n],
  ['Pi', 1n << 50n],
  ['Ti', 1n << 40n],
  ['Gi', 1n << 30n],
  ['Mi', 1n << 20n],
  ['Ki', 1n << 10n],
];

/**
 * Writes nano-units back as a canonical quantity string:
 * * byte resources (`memory`, `ephemeral-storage`, `hugepages-*`, ...): whole bytes, rounded up,
 *   with the largest binary suffix that is exact (`16Gi`, `8039396Ki`, else plain bytes);
 * * anything else (`cpu`, `pods`, extended resources): a whole number when exact (`4`, `220`),
 *   else millis (`1500m`), else nanos (`5n`).
 * The apiserver stores these forms unchanged, so values read back compare equal as strings too.
 */
export function formatQuantity(nano: bigint, resourceName: string): string {
  const negative = nano < 0n;
  const abs = negative ? -nano : nano;
  const sign = negative ? '-' : '';
  if (isByteResource(resourceName)) {
    const bytes = (abs + NANO - 1n) / NANO;
    if (bytes === 0n) return '0';
    for (const [suffix, size] of BINARY_SUFFIXES) {
      if (bytes % size === 0n) return `${sign}${bytes / size}${suffix}`;
    }
    return `${sign}${bytes}`;
  }
  if (abs % NANO === 0n) return abs === 0n ? '0' : `${sign}${abs / NANO}`;
  if (abs % 1_000_000n === 0n) return `${sign}${abs / 1_000_000n}m`;
  return `${sign}${abs}n`;
}

/** Whether two quantities are equal in value (`1Gi` equals `1073741824`); unparsable ones compare as strings. */
export function quantityEquals(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  try {
    return parseQuantity(a) === parseQuantity(b);
  } catch {
    return a === b;
  }
}

/** Whether two resource lists have the same names and equal quantities. */
export function resourceListEquals(a: Record<string, string> | undefined | null, b: Record<string, string> | undefined | null): boolean {
  const x = a ?? {};
  const y = b ?? {};
  const keys = new Set([...Object.keys(x), ...Object.keys(y)]);
  for (const k of keys) {
    if (!quantityEquals(x[k], y[k])) return false;
  }
  return true;
}
