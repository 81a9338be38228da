import type https from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { Http2SecureServer, ServerHttp2Session } from 'node:http2';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';

/**
 * Bounds on what a client can hold open on one of our HTTPS servers (the kubelet API and the
 * webhook), before it has proven anything. Node's own `headersTimeout` is only checked on a
 * timer and never fires for a TLS connection that sends no byte after the handshake, so the
 * first-request deadline is enforced here, per connection.
 */
export interface ConnectionLimits {
  /** Open TCP connections; further ones are closed on accept. */
  maxConnections: number;
  /** Time to finish the TLS handshake (tls.Server `handshakeTimeout`; Node's default is 120 s). */
  handshakeTimeoutMs: number;
  /**
   * Time from the end of the handshake to the complete headers of the first request. A Go
   * client (the apiserver) may hold a connection it dialled and never used for as long as any
   * idle one, so this must outlast its idle timeout too, like `keepAliveTimeoutMs`.
   */
  firstRequestTimeoutMs: number;
  /** Idle time between requests on a kept-alive connection. */
  keepAliveTimeoutMs: number;
}

/**
 * Defaults for both servers. The apiserver keeps a few connections per kubelet and per webhook,
 * so 256 leaves room for many concurrent `kubectl logs -f`/exec sessions while bounding the
 * memory of idle TLS connections (tens of KiB each) well under the Deployment's 512 Mi.
 */
export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  maxConnections: 256,
  handshakeTimeoutMs: 10_000,
  // Not shorter than keep-alive: under a burst, Go's http.Transport dials a connection for each
  // waiting request, and a request that gets a freed connection first leaves its new one idle
  // in the pool, unused, for up to 90 s. Closing it earlier races the apiserver reusing it (the
  // "connection reset by peer" of three webhook calls within 2 ms in a 1000-pod run: connections
  // dialled together, closed together 15 s later by this deadline while the event loop lagged).
  firstRequestTimeoutMs: 120_000,
  // Longer than the apiserver's own idle timeout for these connections (Go's http.Transport
  // default, 90 s, which its webhook and kubelet clients keep): the client must be the one that
  // closes an idle connection. Closing it first races the client reusing it, and the request
  // then fails with "connection reset by peer" (a refused pod, with failurePolicy Fail).
  keepAliveTimeoutMs: 120_000,
};

/** TLS options that carry the limits which can only be set at creation (`handshakeTimeout`). Pure. */
export function tlsLimitOptions(limits: ConnectionLimits): { handshakeTimeout: number } {
  return { handshakeTimeout: limits.handshakeTimeoutMs };
}

/** Why a server closed a connection on its own: refused by the cap, or no first request in time. */
export type ClosedConnectionReason = 'connection_limit' | 'first_request_timeout';

/**
 * Applies `limits` to a created (not yet listening) HTTPS server, or HTTP/2 server with
 * `allowHTTP1`: connection cap, header and keep-alive timeouts, and a deadline for the first
 * request of every connection (the connection is destroyed if no complete request or upgrade
 * arrived in time). Call once. `handlesUpgrades`: the caller has its own `upgrade` listener
 * (the deadline then also ends at an upgrade request; without one, Node answers upgrades
 * itself and so must we not listen). `onClose` is told about every connection the server
 * refuses or closes on its own (not the keep-alive close, which only comes after the client's
 * own idle timeout).
 *
 * Node's `headersTimeout` (and `requestTimeout`) count from the connection's start until its
 * first request begins, and its periodic check closes an unused connection with a 408 once they
 * pass; `headersTimeout` is therefore set past the first-request deadline (which closes first,
 * and is reported), and callers must keep any `requestTimeout` of theirs at 0 or above it.
 *
 * An HTTP/2 connection (ALPN `h2`) has the same deadlines counted in streams: it is destroyed
 * if no stream opened within the first-request deadline, and closed gracefully (GOAWAY) once
 * it has had no open stream for the keep-alive timeout.
 */
export function applyConnectionLimits(
  server: https.Server | Http2SecureServer,
  limits: ConnectionLimits,
  opts: { handlesUpgrades?: boolean; onClose?: (reason: ClosedConnectionReason) => void } = {},
): void {
  const http1 = server as https.Server;
  server.maxConnections = limits.maxConnections;
  http1.headersTimeout = limits.handshakeTimeoutMs + limits.firstRequestTimeoutMs;
  http1.keepAliveTimeout = limits.keepAliveTimeoutMs;
  const onClose = opts.onClose;
  if (onClose) server.on('drop', () => onClose('connection_limit'));
  const deadlines = new WeakMap<Socket, NodeJS.Timeout>();
  server.on('secureConnection', (socket: TLSSocket) => {
    // HTTP/2: the session's streams say when it is used (below).
    if (socket.alpnProtocol === 'h2') return;
    const timer = setTimeout(() => {
      onClose?.('first_request_timeout');
      socket.destroy();
    }, limits.firstRequestTimeoutMs);
    timer.unref();
    deadlines.set(socket, timer);
    socket.once('close', () => clearTimeout(timer));
  });
  const arrived = (req: IncomingMessage) => {
    const timer = deadlines.get(req.socket);
    if (timer) {
      clearTimeout(timer);
      deadlines.delete(req.socket);
    }
  };
  server.prependListener('request', arrived);
  if (opts.handlesUpgrades) server.prependListener('upgrade', arrived);
  server.on('session', (session: ServerHttp2Session) => {
    let open = 0;
    let used = false;
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      timer = setTimeout(
        () => {
          if (used) return void session.close();
          onClose?.('first_request_timeout');
          session.destroy();
        },
        used ? limits.keepAliveTimeoutMs : limits.firstRequestTimeoutMs,
      );
      timer.unref();
    };
    arm();
    session.on('stream', (stream) => {
      used = true;
      open++;
      clearTimeout(timer);
      stream.once('close', () => {
        if (--open === 0 && !session.closed && !session.destroyed) arm();
      });
    });
    session.once('close', () => clearTimeout(timer));
  });
}
