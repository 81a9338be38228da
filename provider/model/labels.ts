import { RE2JS } from 're2js';
import { KEY_PREFIX, UNPREFIXED_KUEUE_LABELS } from '../core/keys.js';
import { ValidationError } from '../core/errors.js';
import { sortedEntries } from './maps.js';

/**
 * Re-prefixes labels for a delegate pod (or a rerouted Service selector), as Admiralty does:
 * `a/b=v` and `b=v` become `multicluster.admiralty.io/b=v`. Keys already under the prefix stay
 * as they are, and so do keys whose `key=value` matches `noPrefixRegexp` (unanchored search, as
 * Go's `MatchString`) and Kueue's queue labels (`UNPREFIXED_KUEUE_LABELS`: queue name, priority
 * class, pod group; a target that runs Kueue for plain pods queues the delegate by them; not
 * Admiralty's behaviour, which prefixed them). Prefixing keeps target controllers (ReplicaSets,
 * Services) from adopting or selecting delegates by the source's labels.
 *
 * Collisions (`x.io/app` and `y.io/app` both become `multicluster.admiralty.io/app`), left
 * arbitrary by Admiralty, are resolved deterministically: a key already under the prefix wins,
 * else the first source key in sorted order wins.
 *
 * Pure; returns a new object.
 */
export function prefixLabels(labels: Record<string, string> | undefined | null, noPrefixRegexp?: GoRegexp | null): Record<string, string> {
  const out: Record<string, string> = {};
  if (!labels) return out;
  const re = noPrefixRegexp ?? undefined;
  // First pass: keys that keep their name, so they win over re-prefixed ones.
  const rest: [string, string][] = [];
  for (const [key, value] of sortedEntries(labels)) {
    if (key.startsWith(KEY_PREFIX) || UNPREFIXED_KUEUE_LABELS.has(key) || (re && re.test(`${key}=${value}`))) {
      out[key] = value;
    } else {
      rest.push([key, value]);
    }
  }
  for (const [key, value] of rest) {
    const slash = key.indexOf('/');
    const name = slash >= 0 ? key.slice(slash + 1) : key;
    const prefixed = KEY_PREFIX + name;
    if (!(prefixed in out)) out[prefixed] = value;
  }
  return out;
}

/** A compiled Go regexp: `test` is an unanchored search, as Go's `MatchString`. */
export interface GoRegexp {
  test(input: string): boolean;
}

/** Longest expression we compile; real ones are a few dozen characters. */
const MAX_REGEXP_CHARS = 4096;

/**
 * Compiles a Go regexp written by a user (the `no-prefix-label-regexp` annotation, a Target's
 * `excludedLabelsRegexp`) with an RE2 engine: the same syntax as Go (inline flags such as
 * `(?i)` included), and matching in time linear in the input. JavaScript's own RegExp
 * backtracks, so an expression like `(a+)+$` against a 63-character label value would hold the
 * provider's event loop for hours: every controller, the webhook and the kubelet API with it.
 * Nothing is anchored; an empty string is a valid regexp that matches everything, as in Go.
 *
 * @returns undefined when `source` is undefined or null (no regexp configured).
 * @throws ValidationError when the expression does not compile (the message is for the user).
 */
export function parseGoRegexp(source: string | undefined | null): GoRegexp | undefined {
  if (source === undefined || source === null) return undefined;
  if (source.length > MAX_REGEXP_CHARS) throw new ValidationError(`invalid regexp: longer than ${MAX_REGEXP_CHARS} characters`);
  try {
    return RE2JS.compile(source);
  } catch (err) {
    throw new ValidationError(`invalid regexp ${JSON.stringify(source)}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Compiles the `no-prefix-label-regexp` annotation of a pod or Service ({@link parseGoRegexp}).
 *
 * @throws ValidationError when it does not compile (Admiralty then refuses to build the delegate).
 */
export function parseNoPrefixRegexp(source: string | undefined | null): GoRegexp | undefined {
  return parseGoRegexp(source);
}
