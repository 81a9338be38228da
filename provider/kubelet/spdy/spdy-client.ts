import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import { SpdySession } from './spdy-session.js';

/** Options for {@link connectSpdy}. */
export interface SpdyConnectOptions {
  /** Full URL, `https://127.0.0.1:port/exec/ns/pod/ctr?...`. */
  url: string;
  method?: string;
  /** Protocols offered in `X-Stream-Protocol-Version`, in preference order. */
  protocols: string[];
  headers?: Record<string, string>;
  /** TLS options (ca, cert, key, rejectUnauthorized) for https URLs. */
  tls?: https.RequestOptions;
  timeoutMs?: number;
}

/** What the upgrade produced: a running client session, or the refusal response. */
export type SpdyConnectResult =
  { upgraded: true; session: SpdySession; protocol: string | undefined; socket: Duplex } | { upgraded: false; statusCode: number; headers: http.IncomingHttpHeaders; body: string };

/**
 * The client side of a SPDY/3.1 upgrade, as client-go's `spdy.RoundTripper` performs it: POST
 * with `Connection: Upgrade`, `Upgrade: SPDY/3.1` and one `X-Stream-Protocol-Version` per
 * offered protocol. Used by unit tests and benchmarks to drive the kubelet server in-process;
 * the production code only ever plays the server role.
 */
export function connectSpdy(opts: SpdyConnectOptions): Promise<SpdyConnectResult> {
  const url = new URL(opts.url);
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request(url, {
      ...(opts.tls ?? {}),
      method: opts.method ?? 'POST',
      headers: {
        ...(opts.headers ?? {}),
        Connection: 'Upgrade',
        Upgrade: 'SPDY/3.1',
        'X-Stream-Protocol-Version': opts.protocols,
      },
      timeout: opts.timeoutMs ?? 10_000,
    });
    req.on('upgrade', (res, socket, head) => {
      const session = new SpdySession(socket, { role: 'client' }).start(head);
      const chosen = res.headers['x-stream-protocol-version'];
      resolve({ upgraded: true, session, protocol: Array.isArray(chosen) ? chosen[0] : chosen, socket });
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ upgraded: false, statusCode: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('timeout', () => req.destroy(new Error('SPDY upgrade timed out')));
    req.on('error', reject);
    req.end();
  });
}
