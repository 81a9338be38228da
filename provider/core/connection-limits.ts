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
  /**
   * Open TCP connections from one client address (see {@link clientAddress}) that have not
   * presented a client certificate the server verified; further ones are closed on accept. Below
   * `maxConnections`, so that one address cannot take every slot: the apiserver, whose own
   * address may be any, keeps the rest. A connection whose client certificate verifies (the
   * apiserver's kubelet client certificate on the kubelet API, the proxy scheduler's on the
   * webhook) stops counting once its handshake ends: it counts only for its handshake.
   */
  maxConnectionsPerAddress: number;
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
  // A quarter: one address holding idle connections leaves three quarters to the others. The
  // apiserver's own logs/exec sessions carry its kubelet client certificate, so they are not
  // bound by this, only their handshakes are.
  maxConnectionsPerAddress: 64,
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

/**
 * Why a server closed a connection on its own: refused by the cap, refused by the cap of its
 * client's address, or no first request in time.
 */
export type ClosedConnectionReason = 'connection_limit' | 'connection_limit_per_address' | 'first_request_timeout';

/**
 * The address a connection's peer is counted under: `remoteAddress` with an IPv4-mapped IPv6
 * address (`::ffff:127.0.0.2`, as a dual-stack listener reports IPv4 clients) turned into its
 * IPv4 form, so one client is one key whichever way it came. Pure; `unknown` when Node has no
 * address (a socket already closed).
 */
export function clientAddress(remoteAddress: string | undefined): string {
  if (!remoteAddress) return 'unknown';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(remoteAddress);
  return mapped?.[1] ?? remoteAddress.toLowerCase();
}

/**
 * Applies `limits` to a created (not yet listening) HTTPS server, or HTTP/2 server with
 * `allowHTTP1`: connection cap, per-address cap, header and keep-alive timeouts, and a deadline for the first
 * request of every connection (the connection is destroyed if no complete request or upgrade
 * arrived in time). Call once. `handlesUpgrades`: the caller has its own `upgrade` listener
 * (the deadline then also ends at an upgrade request; without one, Node answers upgrades
 * itself and so must we not listen). `onClose` is told about every connection the server
 * refuses or closes on its own (not the keep-alive close, which only comes after the client's
 * own idle timeout), with the client's address for a refusal by the per-address cap (for logs
 * only: a metric label must stay bounded).
 *
 * The per-address cap counts a connection from its accept (before its handshake, so an idle
 * TCP connection counts) until it closes or its client certificate verified.
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
// eslint-disable-next-line max-lines-per-function -- the HTTP/1 and HTTP/2 deadlines share the timers and counters this closes over
export function applyConnectionLimits(
  server: https.Server | Http2SecureServer,
  limits: ConnectionLimits,
  opts: { handlesUpgrades?: boolean; onClose?: (reason: ClosedConnectionReason, address?: string) => void } = {},
): void {
  const http1 = server as https.Server;
  server.maxConnections = limits.maxConnections;
  http1.headersTimeout = limits.handshakeTimeoutMs + limits.firstRequestTimeoutMs;
  http1.keepAliveTimeout = limits.keepAliveTimeoutMs;
  const onClose = opts.onClose;
  if (onClose) server.on('drop', () => onClose('connection_limit'));
  const perAddress = new Map<string, number>();
  // By the connection's 4-tuple: the TLS socket of 'secureConnection' is not the raw one of
  // 'connection', but it reports the same ends.
  const releases = new Map<string, () => void>();
  const tuple = (s: Socket) => `${s.localAddress}:${s.localPort}>${s.remoteAddress}:${s.remotePort}`;
  // Runs after the TLS server's own listener; destroying here ends the TLS socket it made too.
  server.on('connection', (socket: Socket) => {
    const address = clientAddress(socket.remoteAddress);
    const held = perAddress.get(address) ?? 0;
    if (held >= limits.maxConnectionsPerAddress) {
      onClose?.('connection_limit_per_address', address);
      socket.destroy();
      return;
    }
    perAddress.set(address, held + 1);
    const key = tuple(socket);
    let counted = true;
    const release = () => {
      if (!counted) return;
      counted = false;
      releases.delete(key);
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left > 0) perAddress.set(address, left);
      else perAddress.delete(address);
    };
    releases.set(key, release);
    socket.once('close', release);
  });
  server.on('secureConnection', (socket: TLSSocket) => {
    if (socket.authorized) releases.get(tuple(socket))?.();
  });
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
