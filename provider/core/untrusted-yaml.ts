import { isScalar, parseDocument, visit } from 'yaml';
import { firstLine } from './text.js';

/**
 * YAML written by someone else (an annotation, a kubeconfig in a Secret), parsed in bounded
 * time and memory. The `yaml` library, left to its defaults, is not fit for that:
 *
 * * its duplicate-key check compares every key of a mapping with every other (quadratic: a
 *   79 KB flow mapping took 1.5 s, a 256 KB annotation about 16 s of the event loop);
 * * it recurses once per nesting level, so a few KB of `[[[[` exhaust the stack (slowly: 1.3 s
 *   for 200 KB), and once in our tests the process then died in V8's RegExp compiler;
 * * aliases can expand a small text into a huge value.
 *
 * So: a size cap, a nesting cap checked by a linear scan before the parser runs, the library's
 * own duplicate check off and ours on (a Set per mapping), and an alias cap.
 */
export interface UntrustedYamlLimits {
  /** Largest text accepted, in bytes of UTF-8. */
  maxBytes: number;
  /**
   * Deepest nesting of flow collections (`[`/`{`), and of block collections: the column where a
   * line's content starts (after its indentation and block indicators), over 2.
   */
  maxDepth?: number;
  /** Most alias expansions (`*a`); kubeconfigs and annotations have no use for them. */
  maxAliasCount?: number;
}

const DEFAULT_MAX_DEPTH = 32;
const DEFAULT_MAX_ALIAS_COUNT = 10;

/** The text is not YAML within the limits; the message is for the user (no excerpt of the text). */
export class UntrustedYamlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UntrustedYamlError';
  }
}

/**
 * Parses `text` as one YAML document into plain JavaScript values. Duplicate keys in a mapping
 * are refused (a strict Go unmarshal refuses them too). Throws UntrustedYamlError.
 */
export function parseUntrustedYaml(text: string, limits: UntrustedYamlLimits): unknown {
  const bytes = Buffer.byteLength(text);
  if (bytes > limits.maxBytes) throw new UntrustedYamlError(`larger than ${formatBytes(limits.maxBytes)} (${formatBytes(bytes)})`);
  const maxDepth = limits.maxDepth ?? DEFAULT_MAX_DEPTH;
  checkNesting(text, maxDepth);
  const doc = parseDocument(text, { strict: true, uniqueKeys: false, prettyErrors: false });
  const [firstError] = doc.errors;
  if (firstError) throw new UntrustedYamlError(`not valid YAML: ${firstLine(firstError.message).slice(0, 200)}`);
  visit(doc, {
    Map(_key, map) {
      const seen = new Set<string>();
      for (const pair of map.items) {
        if (!isScalar(pair.key)) throw new UntrustedYamlError('not valid YAML here: mapping keys must be plain scalars');
        const key = String(pair.key.value);
        if (seen.has(key)) throw new UntrustedYamlError(`not valid YAML: duplicate key ${JSON.stringify(key.slice(0, 100))}`);
        seen.add(key);
      }
    },
  });
  try {
    return doc.toJS({ maxAliasCount: limits.maxAliasCount ?? DEFAULT_MAX_ALIAS_COUNT });
  } catch (err) {
    throw new UntrustedYamlError(`not valid YAML: ${firstLine((err as Error).message).slice(0, 200)}`);
  }
}

/**
 * Refuses text nested deeper than `maxDepth`, in one pass: flow brackets are counted wherever
 * they are (brackets inside quoted strings count too, which only matters past `maxDepth`
 * unclosed ones), and block nesting is judged by the column where a line's content starts (two
 * columns a level). Block indicators at the start of a line (`- `, `? `, `: `) count as columns
 * too: `- - - x` nests three sequences on one line with no indentation at all, and a few KB of
 * it exhaust the parser's stack as surely as brackets do.
 */
function checkNesting(text: string, maxDepth: number): void {
  const maxColumn = maxDepth * 2;
  let depth = 0;
  let lineStart = true;
  let column = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 10) {
      lineStart = true;
      column = 0;
      continue;
    }
    if (lineStart) {
      // A space, a tab (refused as indentation, but only after the parser has recursed into
      // what follows it), or an indicator followed by a blank: the content has not started yet.
      if (c === 32 || c === 9 || (isBlockIndicator(c) && isBlankOrEnd(text, i + 1))) {
        if (++column > maxColumn) throw new UntrustedYamlError(`indented deeper than ${maxColumn} columns (block indicators such as "- " count)`);
        continue;
      }
      lineStart = false;
    }
    if (c === 91 || c === 123) {
      if (++depth > maxDepth) throw new UntrustedYamlError(`nested deeper than ${maxDepth} levels`);
    } else if ((c === 93 || c === 125) && depth > 0) depth--;
  }
}

/** `-`, `?` or `:`. */
function isBlockIndicator(c: number): boolean {
  return c === 45 || c === 63 || c === 58;
}

/** Whether `text[i]` is a space, a tab, a line break, or past the end. */
function isBlankOrEnd(text: string, i: number): boolean {
  if (i >= text.length) return true;
  const c = text.charCodeAt(i);
  return c === 32 || c === 9 || c === 10 || c === 13;
}

function formatBytes(n: number): string {
  return n >= 1024 ? `${Math.round(n / 1024)} KiB` : `${n} bytes`;
}
