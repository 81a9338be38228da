import https from 'node:https';
import type { RequestListener } from 'node:http';
import type { CertKeyPair } from './cert-types.js';

export interface HotSwapHttpsServerOptions {
  /** The first certificate (chain, leaf first) and key to serve. */
  pair: CertKeyPair;
  /** Handler of requests, e.g. an express app. */
  handler?: RequestListener;
  /**
   * Other TLS options (`ca`, `requestCert`, `minVersion`...). Kept and re-applied on every swap,
   * because `setSecureContext` replaces the whole context, not just the certificate.
   */
  tlsOptions?: Omit<https.ServerOptions, 'cert' | 'key'>;
}

/** An HTTPS server whose certificate can be replaced without a restart. */
export interface HotSwapHttpsServer {
  server: https.Server;
  /**
   * Serves `pair` to every handshake from now on. Connections already open keep their session
   * (and their keep-alive), so a rotation never cuts a request. Throws if the PEMs are invalid,
   * in which case the previous certificate stays in use. `tlsOptions`, when given, are merged
   * into the kept ones first (e.g. a new `ca` list that client certificates are verified against).
   */
  swap(pair: CertKeyPair, tlsOptions?: Omit<https.ServerOptions, 'cert' | 'key'>): void;
}

/**
 * Wraps `https.createServer` so that `CertRotator.onRotate` can swap the certificate with
 * `server.setSecureContext`. The caller listens (on the address it chooses) and closes.
 */
export function createHotSwapHttpsServer(opts: HotSwapHttpsServerOptions): HotSwapHttpsServer {
  let base = opts.tlsOptions ?? {};
  const server = opts.handler
    ? https.createServer({ ...base, cert: opts.pair.certPem, key: opts.pair.keyPem }, opts.handler)
    : https.createServer({ ...base, cert: opts.pair.certPem, key: opts.pair.keyPem });
  return {
    server,
    swap(pair, tlsOptions) {
      const next = tlsOptions ? { ...base, ...tlsOptions } : base;
      server.setSecureContext({ ...next, cert: pair.certPem, key: pair.keyPem });
      // Kept only once the context was accepted, so a rejected swap changes nothing.
      base = next;
    },
  };
}
