import type { RequestListener } from 'node:http';
import { createHotSwapHttpsServer, type HotSwapHttpsServer } from '../certs/hot-swap-https-server.js';
import type { CertKeyPair } from '../certs/cert-types.js';
import { drainOnRequest } from '../provider/core/drain.js';
import { applyConnectionLimits, DEFAULT_CONNECTION_LIMITS, tlsLimitOptions, type ClosedConnectionReason, type ConnectionLimits } from '../provider/core/connection-limits.js';

/** Options for {@link createWebhookServer}. */
export interface WebhookServerOptions {
  pair: CertKeyPair;
  /** The webhook app (`createWebhookApp`). */
  handler: RequestListener;
  /** Defaults {@link WEBHOOK_CONNECTION_LIMITS}. */
  limits?: Partial<ConnectionLimits>;
  /** Time to receive a whole request once its headers are in; default {@link WEBHOOK_REQUEST_TIMEOUT_MS}. */
  requestTimeoutMs?: number;
  /** How often Node looks for connections past `headersTimeout` (its default is 30 s); tests shorten it. */
  connectionsCheckingIntervalMs?: number;
  /** Told about every connection the server refuses or closes on its own, and why. */
  onClose?: (reason: ClosedConnectionReason | 'request_timeout') => void;
  /**
   * CAs (PEM) that client certificates are verified against. When given, every handshake asks
   * for a client certificate without requiring one (the apiserver's webhook calls present none);
   * routes decide from `socket.authorized` (see `createExtenderClientGuard`). Replace them with
   * {@link WebhookServer.swap}.
   */
  clientCaPems?: readonly string[];
}

/** The webhook's server: like {@link HotSwapHttpsServer}, with a swap that also replaces the client CAs. */
export interface WebhookServer {
  server: HotSwapHttpsServer['server'];
  /** Serves `pair` to new handshakes and, when given, verifies client certificates against `clientCaPems`. */
  swap(pair: CertKeyPair, clientCaPems?: readonly string[]): void;
  /** Asks every client to close its connection after its next answer (graceful shutdown; see `drainOnRequest`). */
  drain(): void;
}

/**
 * The webhook's limits: {@link DEFAULT_CONNECTION_LIMITS} with a higher cap. The apiserver makes
 * one connection per webhook call in flight (up to its in-flight limits, 400 + 200 by default,
 * per apiserver), and under a burst Go's http.Transport dials more connections than it has
 * calls waiting. A connection past the cap is closed at accept, and the apiserver's call fails
 * (`EOF` or `connection reset by peer`): a refused pod. Measured: 800 elected pods created at
 * concurrency 200 in the sandbox had 19 refused that way with a cap of 256; on loopback, Go's
 * transport sending 400 concurrent calls lost 74 to a cap of 256. An idle TLS connection costs
 * tens of KiB, so 1024 of them stay well under the Deployment's memory limit.
 */
export const WEBHOOK_CONNECTION_LIMITS: ConnectionLimits = { ...DEFAULT_CONNECTION_LIMITS, maxConnections: 1024 };

/**
 * Time to receive a whole AdmissionReview once its headers are in. The apiserver gives a
 * webhook at most 30 s (`timeoutSeconds`), so a request still arriving after that is not the
 * apiserver's.
 */
export const WEBHOOK_REQUEST_TIMEOUT_MS = 30_000;

/**
 * The webhook's HTTPS server, certificate hot-swappable, with the same connection cap and
 * handshake/first-request/keep-alive timeouts as the kubelet API: with `failurePolicy: Fail`,
 * a client that ties up the webhook stops elected pods from being admitted. The caller
 * listens and closes.
 */
export function createWebhookServer(opts: WebhookServerOptions): WebhookServer {
  const limits = { ...WEBHOOK_CONNECTION_LIMITS, ...opts.limits };
  const clientAuth = opts.clientCaPems ? { requestCert: true, rejectUnauthorized: false, ca: [...opts.clientCaPems] } : {};
  const checking = opts.connectionsCheckingIntervalMs !== undefined ? { connectionsCheckingInterval: opts.connectionsCheckingIntervalMs } : {};
  const hot = createHotSwapHttpsServer({ pair: opts.pair, handler: opts.handler, tlsOptions: { ...tlsLimitOptions(limits), ...clientAuth, ...checking } });
  // Not Node's requestTimeout: it counts from the connection's start until the first request
  // begins, so it would close a connection the apiserver dialled and keeps unused (see
  // DEFAULT_CONNECTION_LIMITS.firstRequestTimeoutMs). Our own deadline counts per request.
  hot.server.requestTimeout = 0;
  hot.server.prependListener('request', (req) => {
    const timer = setTimeout(() => {
      opts.onClose?.('request_timeout');
      req.socket.destroy();
    }, opts.requestTimeoutMs ?? WEBHOOK_REQUEST_TIMEOUT_MS);
    timer.unref();
    const done = () => clearTimeout(timer);
    req.once('end', done);
    req.once('close', done);
  });
  applyConnectionLimits(hot.server, limits, { onClose: opts.onClose });
  const draining = drainOnRequest(hot.server);
  return {
    server: hot.server,
    drain: () => draining.drain(),
    swap: (pair, clientCaPems) => hot.swap(pair, clientCaPems ? { ca: [...clientCaPems] } : undefined),
  };
}
