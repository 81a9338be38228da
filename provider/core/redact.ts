/**
 * Text that leaves the process (log lines, statuses, events) passes through here when it may
 * carry what another party wrote or what we must never show.
 */

/** Largest remote-supplied text copied into a status field or an event message. */
export const MAX_REMOTE_TEXT_CHARS = 256;

// An Authorization value: the scheme, then the credential up to the next separator. Node and
// node-fetch put the whole header value in the message of an "invalid header" error.
const CREDENTIAL = /\b(Bearer|Basic)\s+[^\s"',;]+/gi;
// Control characters, and the Unicode ones that reorder or break lines when displayed.
// eslint-disable-next-line no-control-regex -- matching control characters is what it is for.
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]+/g;

/** Replaces HTTP credentials (`Bearer x`, `Basic x`) with a placeholder. Idempotent. */
export function redactCredentials(text: string): string {
  return text.replace(CREDENTIAL, '$1 <redacted>');
}

/**
 * Text another server sent us (a Status message, an error), made fit to show in one of our
 * objects: credentials redacted, one printable line, at most `max` characters.
 */
export function sanitizeRemoteText(text: string, max = MAX_REMOTE_TEXT_CHARS): string {
  const flat = redactCredentials(text)
    .replace(UNPRINTABLE, ' ')
    .replace(/\s{2,}/g, ' ')
    .trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
