/**
 * Limits of {@link parseUntrustedJson} and {@link checkUntrustedJson}. A body limit counts
 * bytes, but what `JSON.parse` builds depends on the structure: 8 MiB of `[` then `]` are 4 M
 * nested arrays, and parsing them took the provider from 88 to about 550 MiB of RSS (over the
 * Deployment's 512Mi limit) and held the event loop for about 2 s; 8 MiB of `[],` are nearly
 * 3 M arrays.
 */
export interface UntrustedJsonLimits {
  /** Deepest nesting of arrays and objects; default {@link DEFAULT_MAX_JSON_DEPTH}. */
  maxDepth?: number;
  /**
   * Most structural tokens outside strings: `[`, `{` (one per array or object) and `,` (one per
   * item or member after the first). What `JSON.parse` allocates grows with them, not with the
   * bytes: strings and numbers cost about their own length.
   */
  maxTokens: number;
}

/**
 * Default of {@link UntrustedJsonLimits.maxDepth}. The deepest field of a Pod (the values of a
 * pod anti-affinity term's label selector) is 13 levels down an AdmissionReview, and about 18
 * in the `managedFields` that mirror it; an ExtenderArgs of Nodes is shallower.
 */
export const DEFAULT_MAX_JSON_DEPTH = 100;

/** The text is not JSON within the limits. The message follows its subject (`request body ${message}`) and quotes none of the text. */
export class UntrustedJsonError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UntrustedJsonError';
  }
}

/**
 * Parses JSON written by someone else (a request body) after one linear scan that refuses it,
 * before `JSON.parse` builds anything, when it nests deeper than `maxDepth` or has more than
 * `maxTokens` structural tokens (see {@link UntrustedJsonLimits}). Pure.
 *
 * @throws UntrustedJsonError past a limit or when the text is not JSON.
 */
export function parseUntrustedJson(text: string, limits: UntrustedJsonLimits): unknown {
  checkUntrustedJson(text, limits);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UntrustedJsonError(`is not JSON: ${(err as Error).message}`);
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/**
 * The scan of {@link parseUntrustedJson} alone, for text that someone else parses (client-node
 * parses the answers of API calls): refuses it when it nests deeper than `maxDepth` or has more
 * than `maxTokens` structural tokens, and says nothing of whether it is JSON. Pure; linear in the
 * text's length.
 *
 * Counts depth and tokens the way `JSON.parse` reads the text: a string runs from `"` to the
 * next `"` not escaped by `\`, and is skipped with `indexOf` (a scan a character at a time
 * cost about 5 ms per MiB, as much as parsing a body of long strings). On text that is not JSON
 * the count may go wrong past the first error, but `JSON.parse` stops at that error and builds
 * nothing after it.
 *
 * @throws UntrustedJsonError past a limit.
 */
export function checkUntrustedJson(text: string, limits: UntrustedJsonLimits): void {
  const maxDepth = limits.maxDepth ?? DEFAULT_MAX_JSON_DEPTH;
  const maxTokens = limits.maxTokens;
  let depth = 0;
  let tokens = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) i = stringEnd(text, i);
    else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth > maxDepth) throw new UntrustedJsonError(`is nested deeper than ${maxDepth} levels`);
      if (++tokens > maxTokens) throw tooMany(maxTokens);
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) depth--;
    else if (c === COMMA && ++tokens > maxTokens) throw tooMany(maxTokens);
  }
}

/** Index of the `"` that closes the string opened at `start`, or the text's length if none does. */
function stringEnd(text: string, start: number): number {
  for (let q = text.indexOf('"', start + 1); q !== -1; q = text.indexOf('"', q + 1)) {
    let backslashes = 0;
    while (text.charCodeAt(q - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return q;
  }
  return text.length;
}

function tooMany(maxTokens: number): UntrustedJsonError {
  return new UntrustedJsonError(`has more than ${maxTokens} arrays, objects and items (JSON tokens [, { and ,)`);
}
