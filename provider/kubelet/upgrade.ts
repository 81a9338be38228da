import type { Duplex } from 'node:stream';

/**
 * Raw-socket HTTP helpers for the `upgrade` path of the kubelet server, where express is not
 * involved and responses are written by hand.
 */

/** A metav1.Status as the apiserver's SPDY round tripper decodes it from a refused upgrade. */
export interface KubeStatus {
  kind?: 'Status';
  apiVersion?: 'v1';
  metadata: Record<string, never>;
  status: 'Success' | 'Failure';
  message?: string;
  reason?: string;
  details?: { causes?: Array<{ reason?: string; message?: string; field?: string }> };
  code?: number;
}

const REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  500: 'InternalError',
  502: 'InternalError',
  503: 'ServiceUnavailable',
};

const PHRASES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

/** Builds a Failure Status with the usual reason for an HTTP code. Pure. */
export function failureStatus(code: number, message: string): KubeStatus {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason: REASONS[code] ?? 'Unknown', code };
}

/**
 * Picks the first protocol the client offered that we support (client preference wins, as in
 * apimachinery's `httpstream.Handshake`). `offered` is the raw header value(s); Node joins
 * repeated headers with ", ". Returns undefined when nothing matches.
 */
export function negotiateProtocol(offered: string | string[] | undefined, supported: readonly string[]): string | undefined {
  const list = (Array.isArray(offered) ? offered : [offered ?? ''])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v.length > 0);
  return list.find((p) => supported.includes(p));
}

/** Writes the 101 that hands the socket to SPDY/3.1, announcing the chosen stream protocol. */
export function writeSpdyUpgradeResponse(socket: Duplex, protocol: string): void {
  socket.write(
    'HTTP/1.1 101 Switching Protocols\r\n' +
      'Connection: Upgrade\r\n' +
      'Upgrade: SPDY/3.1\r\n' +
      // Always set: without it client-go silently falls back to v1 semantics.
      `X-Stream-Protocol-Version: ${protocol}\r\n` +
      '\r\n',
  );
}

/**
 * Answers an upgrade request with a plain HTTP error and closes the socket. The body is a JSON
 * Status so client-go turns it into a proper API error instead of "unable to upgrade".
 */
export function writeUpgradeError(socket: Duplex, code: number, message: string, extraHeaders: Array<[string, string]> = []): void {
  if (socket.destroyed) return;
  const body = JSON.stringify(failureStatus(code, message));
  const lines = [
    `HTTP/1.1 ${code} ${PHRASES[code] ?? 'Error'}`,
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    ...extraHeaders.map(([k, v]) => `${k}: ${v}`),
  ];
  socket.end(lines.join('\r\n') + '\r\n\r\n' + body);
}
