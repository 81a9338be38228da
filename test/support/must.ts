/**
 * `value`, when it is there: for a test's read of an element, group or entry it has every reason
 * to expect. Throws an error that names `what` otherwise, so a failing test says what was missing.
 */
export function must<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`expected ${what}, found nothing`);
  return value;
}
