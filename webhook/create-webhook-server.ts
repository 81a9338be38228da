import http2, { type Http2SecureServer, type SecureServerOptions, type ServerHttp2Session } from 'node:http2';
import type { CertKeyPair } from '../certs/cert-types.js';
import { drainOnRequest } from '../provider/core/drain.js';
import { isHttp2, type AnyRequest, type AnyResponse, type Router } from '../provider/core/http-router.js';
import { applyConnectionLimits, DEFAULT_CONNECTION_LIMITS, tlsLimitOptions, type ClosedConnectionReason, type ConnectionLimits } from '../provider/core/connection-limits.js';

/** Options for {@link createWebhookServer}. */
export interface WebhookServerOptions {
  pair: CertKeyPair;
  /** The routes' listener (`createRouter`): it serves HTTP/2 and HTTP/1.1 requests alike. */
  handler: Router;
  /** Defaults {@link WEBHOOK_CONNECTION_LIMITS}. */
  limits?: Partial<ConnectionLimits>;
  /** Time to receive a whole request and send its whole answer, once its headers are in; default {@link WEBHOOK_REQUEST_TIMEOUT_MS}. */
  requestTimeoutMs?: number;
  /** How often Node looks for HTTP/1.1 connections past `headersTimeout` (its default is 30 s); tests shorten it. */
  connectionsCheckingIntervalMs?: number;
  /** Streams one HTTP/2 connection may have open at once; default {@link WEBHOOK_MAX_CONCURRENT_STREAMS}. */
  maxConcurrentStreams?: number;
  /** Told about every connection the server refuses or closes on its own, and why. */
  onClose?: (reason: ClosedConnectionReason | 'request_timeout', address?: string) => void;
  /** Told about every connection whose TLS handshake completed, with the protocol it chose (`h2`, `http/1.1`). */
  onConnection?: (protocol: string) => void;
  /**
   * CAs (PEM) that client certificates are verified against. When given, every handshake asks
   * for a client certificate without requiring one (the apiserver's webhook calls present none);
   * routes decide from `socket.authorized` (see `createExtenderClientGuard`). Replace them with
   * {@link WebhookServer.swap}.
   */
  clientCaPems?: readonly string[];
}

/** The webhook's server (HTTP/2, and HTTP/1.1 for clients that do not offer `h2`), its certificate hot-swappable. */
export interface WebhookServer {
  server: Http2SecureServer;
  /**
   * Serves `pair` to every handshake from now on and, when given, verifies client certificates
   * against `clientCaPems`. Connections already open keep their session, so a rotation never
   * cuts a call. Throws if the PEMs are invalid, in which case the previous ones stay in use.
   */
  swap(pair: CertKeyPair, clientCaPems?: readonly string[]): void;
  /**
   * Graceful shutdown: every HTTP/1.1 client is asked to close its connection after its next
   * answer (see `drainOnRequest`), every HTTP/2 client gets a GOAWAY (its calls in progress are
   * answered; its next ones go on a new connection, through the Service, to a replica that stays).
   */
  drain(): void;
  /** Stops listening and ends every connection, after the calls in progress are answered. */
  close(): Promise<void>;
}

/**
 * The webhook's limits: {@link DEFAULT_CONNECTION_LIMITS} with a higher cap. A client that does
 * not speak HTTP/2 makes one connection per call in flight (up to the apiserver's in-flight
 * limits, 400 + 200 by default, per apiserver), and under a burst Go's http.Transport dials
 * more connections than it has calls waiting. A connection past the cap is closed at accept,
 * and the call fails (`EOF` or `connection reset by peer`): a refused pod. Measured over
 * HTTP/1.1: 800 elected pods created at concurrency 200 in the sandbox had 19 refused that way
 * with a cap of 256; on loopback, Go's transport sending 400 concurrent calls lost 74 to a cap
 * of 256. An idle TLS connection costs tens of KiB, so 1024 of them stay well under the
 * Deployment's memory limit.
 *
 * Per address, 640: still more than one apiserver's in-flight limits, so an apiserver on
 * HTTP/1.1 is not cut by it, while one address holding idle connections leaves 384 to the
 * others, where an apiserver on HTTP/2 needs a few.
 */
export const WEBHOOK_CONNECTION_LIMITS: ConnectionLimits = { ...DEFAULT_CONNECTION_LIMITS, maxConnections: 1024, maxConnectionsPerAddress: 640 };

/**
 * Time to receive a whole call and send its whole answer, once its headers are in. The
 * apiserver gives a webhook at most 30 s (`timeoutSeconds`) and our proxy scheduler gives the
 * extender 30 s (`httpTimeout`), so a call still arriving, or an answer still unread, after that
 * is no longer awaited by either. An answer's end counts too: an HTTP/2 client that advertises
 * a zero window never lets an answer out, and its stream, with the answer it holds, would stay
 * open for as long as the client likes.
 */
export const WEBHOOK_REQUEST_TIMEOUT_MS = 30_000;

/**
 * Calls one HTTP/2 connection may have in flight. Go's client opens another connection when a
 * connection is full. A bind waits until the target has placed the delegate, so under a burst
 * kube-scheduler has many binds in flight; 250 is what Go's own HTTP/2 server allows.
 */
export const WEBHOOK_MAX_CONCURRENT_STREAMS = 250;

/**
 * How long a drained HTTP/2 connection stays open after its GOAWAY. The GOAWAY answers the calls
 * in progress and refuses the streams the client opens after it (REFUSED_STREAM, which Go's
 * client retries on another connection); the connection is closed only after this grace, once
 * its calls are answered. Closing at once (Node's `session.close()`) ends the socket as soon as
 * no stream is open, under a client that may be writing its next call: Go's client then fails
 * that call (`write: broken pipe`) and every other on the connection (`client connection force
 * closed via ClientConn.Close`), and the apiserver does not retry a webhook call, so with
 * `failurePolicy: Fail` the pods are refused (3 in one CI run of the rolling-restart
 * scenario). Go's own server keeps a connection open 1 s after its GOAWAY for the same reason.
 */
export const WEBHOOK_GOAWAY_GRACE_MS = 1_000;

/**
 * The webhook's server, on the port the apiserver (admission) and kube-scheduler (extender)
 * call. It speaks HTTP/2 to clients that offer it, as both do (client-go's transports enable
 * it): their calls then share one connection. Over HTTP/1.1 Go keeps only 2 idle connections
 * per host unless told otherwise, and kube-scheduler's extender client is not, so concurrent
 * binds each paid for a new TLS connection (an RSA handshake on both sides).
 *
 * Limits: the kubelet API's connection cap, per-address cap and handshake, first-request and keep-alive
 * timeouts (for an HTTP/2 connection: closed when it has had no open stream for as long), a
 * per-request deadline (from its headers until its answer is sent), and at most
 * `maxConcurrentStreams` streams per connection. With
 * `failurePolicy: Fail`, a client that ties up the webhook stops elected pods from being
 * admitted. The caller listens; `close` ends.
 */
export function createWebhookServer(opts: WebhookServerOptions): WebhookServer {
  const limits = { ...WEBHOOK_CONNECTION_LIMITS, ...opts.limits };
  const clientAuth = opts.clientCaPems ? { requestCert: true, rejectUnauthorized: false, ca: [...opts.clientCaPems] } : {};
  let tlsOptions: SecureServerOptions = { ...tlsLimitOptions(limits), ...clientAuth };
  const server = http2.createSecureServer({
    ...tlsOptions,
    cert: opts.pair.certPem,
    key: opts.pair.keyPem,
    allowHTTP1: true,
    settings: { maxConcurrentStreams: opts.maxConcurrentStreams ?? WEBHOOK_MAX_CONCURRENT_STREAMS },
  });
  if (opts.connectionsCheckingIntervalMs !== undefined) {
    // Read by Node's HTTP/1.1 connection tracking, which it starts on 'listening'.
    (server as unknown as { connectionsCheckingInterval: number }).connectionsCheckingInterval = opts.connectionsCheckingIntervalMs;
  }
  // Not Node's requestTimeout: it counts from the connection's start until the first request
  // begins, so it would close a connection the apiserver dialled and keeps unused (see
  // DEFAULT_CONNECTION_LIMITS.firstRequestTimeoutMs). Our own deadline counts per request.
  (server as unknown as { requestTimeout: number }).requestTimeout = 0;
  // With allowHTTP1, HTTP/1.1 requests come here too, as node:http's own objects.
  server.on('request', (req: AnyRequest, res: AnyResponse) => {
    const timer = setTimeout(() => {
      opts.onClose?.('request_timeout');
      if (isHttp2(req)) req.stream.close(http2.constants.NGHTTP2_CANCEL);
      else req.socket.destroy();
    }, opts.requestTimeoutMs ?? WEBHOOK_REQUEST_TIMEOUT_MS);
    timer.unref();
    const done = () => clearTimeout(timer);
    // Not the request's 'end' or 'close': both come once the body is read, before the answer.
    res.once('finish', done);
    res.once('close', done);
    opts.handler(req, res);
  });
  if (opts.onConnection) {
    const tell = opts.onConnection;
    server.on('secureConnection', (socket) => tell(socket.alpnProtocol || 'http/1.1'));
  }
  applyConnectionLimits(server, limits, { onClose: opts.onClose });
  const draining = drainOnRequest(server);
  const sessions = new Set<ServerHttp2Session>();
  const goingAway = new WeakSet<ServerHttp2Session>();
  /** Drains one connection: a GOAWAY now, the close after {@link WEBHOOK_GOAWAY_GRACE_MS}. */
  const goAway = (session: ServerHttp2Session) => {
    if (session.closed || session.destroyed || goingAway.has(session)) return;
    goingAway.add(session);
    session.goaway(http2.constants.NGHTTP2_NO_ERROR);
    setTimeout(() => session.closed || session.destroyed || session.close(), WEBHOOK_GOAWAY_GRACE_MS).unref();
  };
  server.on('session', (session: ServerHttp2Session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
    // After a drain, a client that still reaches this replica gets one call per connection, as
    // an HTTP/1.1 client gets `Connection: close`.
    session.on('stream', (stream) => stream.once('close', () => draining.draining && goAway(session)));
  });
  return {
    server,
    swap(pair, clientCaPems) {
      const next = clientCaPems ? { ...tlsOptions, ca: [...clientCaPems] } : tlsOptions;
      // setSecureContext replaces the whole context, not just the certificate: the other
      // options go again. The ALPN list stays the server's.
      server.setSecureContext({ ...next, cert: pair.certPem, key: pair.keyPem });
      // Kept only once the context was accepted, so a rejected swap changes nothing.
      tlsOptions = next;
    },
    drain() {
      draining.drain();
      for (const session of sessions) goAway(session);
    },
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Node closes idle HTTP/1.1 connections itself on close; HTTP/2 sessions end after
        // their streams.
        for (const session of sessions) if (!session.closed) session.close();
      });
    },
  };
}
