import type { RequestListener } from 'node:http';
import { createHotSwapHttpsServer, type HotSwapHttpsServer } from '../certs/hot-swap-https-server.js';
import type { CertKeyPair } from '../certs/cert-types.js';
import { applyConnectionLimits, DEFAULT_CONNECTION_LIMITS, tlsLimitOptions, type ConnectionLimits } from '../provider/core/connection-limits.js';

/** Options for {@link createWebhookServer}. */
export interface WebhookServerOptions {
  pair: CertKeyPair;
  /** The webhook app (`createWebhookApp`). */
  handler: RequestListener;
  /** Defaults {@link DEFAULT_CONNECTION_LIMITS}. */
  limits?: Partial<ConnectionLimits>;
  /** Told when a connection is refused by the cap. */
  onDrop?: () => void;
}

/**
 * Time to receive a whole AdmissionReview. The apiserver gives a webhook at most 30 s
 * (`timeoutSeconds`), so a request still arriving after that is not the apiserver's.
 */
export const WEBHOOK_REQUEST_TIMEOUT_MS = 30_000;

/**
 * The webhook's HTTPS server, certificate hot-swappable, with the same connection cap and
 * handshake/first-request/keep-alive timeouts as the kubelet API: with `failurePolicy: Fail`,
 * a client that ties up the webhook stops elected pods from being admitted. The caller
 * listens and closes.
 */
export function createWebhookServer(opts: WebhookServerOptions): HotSwapHttpsServer {
  const limits = { ...DEFAULT_CONNECTION_LIMITS, ...opts.limits };
  const hot = createHotSwapHttpsServer({ pair: opts.pair, handler: opts.handler, tlsOptions: tlsLimitOptions(limits) });
  hot.server.requestTimeout = WEBHOOK_REQUEST_TIMEOUT_MS;
  applyConnectionLimits(hot.server, limits, { onDrop: opts.onDrop });
  return hot;
}
