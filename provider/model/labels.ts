import { KEY_PREFIX } from '../core/keys.js';
import { ValidationError } from '../core/errors.js';

/**
 * Re-prefixes labels for a delegate pod (or a rerouted Service selector), as Admiralty does:
 * `a/b=v` and `b=v` become `multicluster.admiralty.io/b=v`. Keys already under the prefix stay
 * as they are, and so do keys whose `key=value` matches `noPrefixRegexp` (unanchored search, as
 * Go's `MatchString`). Prefixing keeps target controllers (ReplicaSets, Services) from adopting
 * or selecting delegates by the source's labels.
 *
 * Collisions (`x.io/app` and `y.io/app` both become `multicluster.admiralty.io/app`), left
 * arbitrary by Admiralty, are resolved deterministically: a key already under the prefix wins,
 * else the first source key in sorted order wins.
 *
 * Pure; returns a new object.
 */
export function prefixLabels(
  labels: Record<string, string> | undefined | null,
  noPrefixRegexp?: RegExp | null,
): Record<string, string> {
  const out: Record<string, string> = {};
  if (!labels) return out;
  const re = noPrefixRegexp ? statelessRegExp(noPrefixRegexp) : undefined;
  const keys = Object.keys(labels).sort();
  // First pass: keys that keep their name, so they win over re-prefixed ones.
  const rest: string[] = [];
  for (const key of keys) {
    const value = labels[key];
    if (key.startsWith(KEY_PREFIX) || (re && re.test(`${key}=${value}`))) {
      out[key] = value;
    } else {
      rest.push(key);
    }
  }
  for (const key of rest) {
    const slash = key.indexOf('/');
    const name = slash >= 0 ? key.slice(slash + 1) : key;
    const prefixed = KEY_PREFIX + name;
    if (!(prefixed in out)) out[prefixed] = labels[key];
  }
  return out;
}

/** A copy without the `g`/`y` flags, whose `test` would otherwise carry state between calls. */
function statelessRegExp(re: RegExp): RegExp {
  return re.global || re.sticky ? new RegExp(re.source, re.flags.replace(/[gy]/g, '')) : re;
}

/** Go inline flags we can translate to JavaScript flags. */
const GO_FLAG_TO_JS: Record<string, string> = { i: 'i', m: 'm', s: 's' };

/**
 * Compiles a Go regexp written by a user (the `no-prefix-label-regexp` annotation, a Target's
 * `excludedLabelsRegexp`) as a JavaScript RegExp. The syntaxes agree on everything such
 * expressions use in practice; a leading Go flag group such as `(?i)` is translated to JavaScript
 * flags, because JavaScript before Node 23 has no inline flags. Nothing is anchored: matching is a
 * search, as with Go's `MatchString`. An empty string is a valid regexp that matches everything,
 * as in Go.
 *
 * @returns undefined when `source` is undefined or null (no regexp configured).
 * @throws ValidationError when the expression does not compile (the message is for the user).
 */
export function parseGoRegexp(source: string | undefined | null): RegExp | undefined {
  if (source === undefined || source === null) return undefined;
  let body = source;
  let flags = '';
  const m = /^\(\?([a-zA-Z]+)\)/.exec(body);
  if (m) {
    for (const f of m[1]) {
      const js = GO_FLAG_TO_JS[f];
      if (!js) throw new ValidationError(`invalid regexp ${JSON.stringify(source)}: unsupported flag ${JSON.stringify(f)}`);
      if (!flags.includes(js)) flags += js;
    }
    body = body.slice(m[0].length);
  }
  try {
    return new RegExp(body, flags);
  } catch (err) {
    throw new ValidationError(`invalid regexp ${JSON.stringify(source)}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Compiles the `no-prefix-label-regexp` annotation of a pod or Service ({@link parseGoRegexp}).
 *
 * @throws ValidationError when it does not compile (Admiralty then refuses to build the delegate).
 */
export function parseNoPrefixRegexp(source: string | undefined | null): RegExp | undefined {
  return parseGoRegexp(source);
}
