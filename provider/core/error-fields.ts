import { firstLine } from './text.js';

/** Error details fit for a log line (message and cause chain, no stack, no response bodies). */
export function errorFields(err: unknown): { error: string } {
  const parts: string[] = [];
  let e: unknown = err;
  for (let i = 0; e && i < 5; i++) {
    parts.push(describe(e));
    e = e instanceof Error ? (e as Error & { cause?: unknown }).cause : undefined;
  }
  return { error: parts.join(': ') };
}

/** One line for an error: an ApiException's embedded body and headers are cut to the Status message. */
function describe(e: unknown): string {
  const api = e as { code?: unknown; body?: unknown };
  if (typeof api.code === 'number' && api.body !== undefined) {
    try {
      const status = typeof api.body === 'string' ? JSON.parse(api.body) : api.body;
      if (status && typeof status.message === 'string') return `HTTP ${api.code}: ${status.message}`;
    } catch {
      /* not a Status */
    }
    return `HTTP ${api.code}`;
  }
  return e instanceof Error ? firstLine(e.message) : String(e);
}
