import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { Counter, Histogram, type Registry } from 'prom-client';
import type { KubeConfig } from '@kubernetes/client-node';
import { applyConnectionLimits, DEFAULT_CONNECTION_LIMITS, tlsLimitOptions, type ConnectionLimits } from '../core/connection-limits.js';
import type { Logger } from '../core/logger.js';
import { errorFields } from '../core/logger.js';
import { forbiddenMessage, impersonatedUser, kubeletRequestAttributes, nodeRequestAttributes, type KubeletAuthorizer, type KubeletUser } from './auth.js';
import { createTargetLogBackend, LogUpstreamError, parseLogQuery, type LogBackend } from './logs.js';
import { createTargetPortForwardBackend, PORT_FORWARD_PROTOCOL, servePortForward, type PortForwardBackend } from './port-forward.js';
import { parseExecQuery, REMOTECOMMAND_PROTOCOLS, serveRemoteCommand, type ExecBackend } from './remotecommand.js';
import { SpdySession } from './spdy/spdy-session.js';
import { createTargetExecBackend } from './target-exec-backend.js';
import { negotiateProtocol, writeSpdyUpgradeResponse, writeUpgradeError } from './upgrade.js';
import { WebSocketServer, type WebSocket } from 'ws';
import { pickWebSocketProtocol, serveWebSocketRemoteCommand, WEBSOCKET_PROTOCOLS } from './ws-remotecommand.js';
import { drainOnRequest } from '../core/drain.js';
import { buildStatsSummary, renderResourceMetrics } from '../model/resource-metrics.js';
import type { NodeUsageSource } from './resource-usage.js';
import { parseOperatorPath, type OperatorPath, type OperatorViews } from './operator-views.js';

/** Where a proxy pod's delegate runs, as the provider's registry knows it. */
export interface ResolvedPod {
  /** The virtual node the proxy pod is bound to (SubjectAccessReview `name`). */
  nodeName: string;
  target: { kubeConfig: KubeConfig; namespace: string; /** delegate name */ pod: string };
}

/** Maps a proxy pod (source namespace/name) to its delegate; null when unknown (404). */
export interface PodResolver {
  resolve(namespace: string, pod: string): Promise<ResolvedPod | null>;
}

/** Backends; defaults talk to the target clusters through client-node. Tests inject fakes. */
export interface KubeletBackends {
  exec?: (target: ResolvedPod['target']) => ExecBackend;
  logs?: LogBackend;
  portForward?: PortForwardBackend;
}

export interface KubeletServerOptions {
  /** Listen address; 127.0.0.1 unless the control plane must reach us from elsewhere. */
  host?: string;
  /** 0 picks a free port (see `listen()`'s result). */
  port: number;
  tls: { certPem: string; keyPem: string };
  /** CA that signs the kube-apiserver's kubelet client certificate; enables x509 authn. */
  clientCaPem?: string;
  resolver: PodResolver;
  /** The usage behind `/metrics/resource` and `/stats/summary`. */
  nodeUsage: NodeUsageSource;
  auth: KubeletAuthorizer;
  logger: Logger;
  registry?: Registry;
  backends?: KubeletBackends;
  /** Time the client has to open its SPDY streams (kubelet default 30 s). */
  streamCreationTimeoutMs?: number;
  /** Connection caps (overall, per client address) and handshake/first-request/keep-alive timeouts; defaults {@link DEFAULT_CONNECTION_LIMITS}. */
  limits?: Partial<ConnectionLimits>;
  /**
   * An exec/attach/port-forward connection with no traffic either way for this long is closed
   * (the kubelet's `--streaming-connection-idle-timeout`, default 4 h). Sessions may be long;
   * only silence ends them.
   */
  streamingIdleTimeoutMs?: number;
  /** `kubectl admiralty status|explain` (see `parseOperatorPath`), served when given. */
  operatorViews?: OperatorViews;
}

/** The kubelet's default `--streaming-connection-idle-timeout`. */
export const DEFAULT_STREAMING_IDLE_TIMEOUT_MS = 4 * 60 * 60 * 1000;
/** Streams an exec/attach session may hold: error, stdin, stdout, stderr, resize, with slack. */
export const MAX_REMOTECOMMAND_STREAMS = 8;
/** Streams a port-forward session may hold: 2 per forwarded connection. */
export const MAX_PORT_FORWARD_STREAMS = 64;
/** Largest WebSocket message we accept (stdin chunks are 32 KiB in client-go). */
export const MAX_WEBSOCKET_MESSAGE_BYTES = 1024 * 1024;

/** The running server, owned by main.ts. */
export interface KubeletServer {
  /** Starts listening; resolves with the bound port (publish it as daemonEndpoints port). */
  listen(): Promise<number>;
  /** Asks every client to close its connection after its next answer; streams go on (graceful shutdown). */
  drain(): void;
  /** Stops accepting and drops open connections and sessions. */
  close(): Promise<void>;
  /** Hot-swaps the serving certificate (rotation); existing connections keep the old one. */
  setCertificate(certPem: string, keyPem: string): void;
}

type Route = 'containerLogs' | 'exec' | 'attach' | 'portForward';

/** A parsed pod-scoped kubelet path. */
export interface KubeletPath {
  route: Route;
  namespace: string;
  pod: string;
  container: string;
}

/**
 * Parses `/containerLogs|exec|attach/{ns}/{pod}/{container}` and `/portForward/{ns}/{pod}`.
 * Pure. Returns null for anything else (404).
 */
export function parseKubeletPath(pathname: string): KubeletPath | null {
  const parts = pathname.split('/').slice(1);
  const route = parts[0] as Route;
  let decoded: string[];
  try {
    decoded = parts.slice(1).map(decodeURIComponent);
  } catch {
    return null;
  }
  if (decoded.some((p) => p === '')) return null;
  if (route === 'portForward') {
    // The apiserver may append the pod UID; accept and ignore it, as the kubelet does.
    if (decoded.length !== 2 && decoded.length !== 3) return null;
    return { route, namespace: decoded[0], pod: decoded[1], container: '' };
  }
  if (route === 'containerLogs' || route === 'exec' || route === 'attach') {
    if (decoded.length !== 3 && decoded.length !== 4) return null;
    // With a 4th segment the layout is {ns}/{pod}/{uid}/{container}.
    const container = decoded.length === 4 ? decoded[3] : decoded[2];
    return { route, namespace: decoded[0], pod: decoded[1], container };
  }
  return null;
}

/** A node-scoped read: which one, and of which virtual node (null when the request does not say). */
export interface NodeScopedPath {
  route: 'metricsResource' | 'statsSummary';
  nodeName: string | null;
}

const NODE_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/**
 * Parses the node-scoped paths we serve and tells which virtual node they ask about. All virtual
 * nodes share one listener, and a kubelet's paths do not name the node, so the node comes from:
 * * the path itself, `/metrics/resource/<node>`: what each virtual node's
 *   `metrics.k8s.io/resource-metrics-path` annotation points metrics-server at;
 * * else the `X-Forwarded-Uri` the apiserver's node proxy sets
 *   (`/api/v1/nodes/<node>[:port]/proxy/<path>`), for `kubectl get --raw
 *   /api/v1/nodes/<node>/proxy/stats/summary` and the like. A caller who writes the header
 *   himself only names another node, and is authorized against that one.
 * Pure. Returns null for any other path.
 */
export function parseNodeScopedPath(pathname: string, forwardedUri: string | undefined): NodeScopedPath | null {
  const fromForwarded = (path: string): string | null => {
    const m = /^\/api\/v1\/nodes\/([^/]+)\/proxy(\/.*)$/.exec(forwardedUri ?? '');
    if (!m || m[2] !== path) return null;
    let id: string;
    try {
      id = decodeURIComponent(m[1]);
    } catch {
      return null;
    }
    // The node proxy's id is name, name:port or scheme:name:port.
    const parts = id.split(':');
    const name = parts.length === 3 ? parts[1] : parts[0];
    return NODE_NAME.test(name) ? name : null;
  };
  if (pathname === '/metrics/resource') return { route: 'metricsResource', nodeName: fromForwarded(pathname) };
  if (pathname === '/stats/summary') return { route: 'statsSummary', nodeName: fromForwarded(pathname) };
  const m = /^\/metrics\/resource\/([^/]+)$/.exec(pathname);
  if (m && NODE_NAME.test(m[1])) return { route: 'metricsResource', nodeName: m[1] };
  return null;
}

class HttpError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** The request's URL; a target the WHATWG parser refuses (`//`, `//x:y`) is a 400. */
function requestUrl(req: IncomingMessage): URL {
  try {
    return new URL(req.url ?? '/', 'https://kubelet');
  } catch {
    throw new HttpError(400, 'malformed request target');
  }
}

/**
 * The kubelet API for all virtual nodes on one listener: `/containerLogs`, `/exec`, `/attach`
 * (SPDY/3.1 remotecommand v4..v1, or WebSocket v5..v1 channel protocols), `/portForward` (SPDY
 * portforward.k8s.io), `/healthz`, and the node-scoped reads `/metrics/resource` and
 * `/stats/summary` (see {@link parseNodeScopedPath}; authorized on `nodes/metrics` and
 * `nodes/stats` of the node).
 * Every pod-scoped request is authenticated (x509 client cert or TokenReview), the pod is
 * resolved to its delegate, then authorized (SubjectAccessReview on `nodes/proxy` of the
 * virtual node). Metrics: `admiralty_kubelet_requests_total` and
 * `admiralty_kubelet_request_duration_seconds` by route and code (for upgrades the code is
 * the handshake's, 101 on success, and the duration covers the whole session).
 */
// eslint-disable-next-line max-lines-per-function -- split pending
export function createKubeletServer(opts: KubeletServerOptions): KubeletServer {
  const logger = opts.logger;
  const host = opts.host ?? '127.0.0.1';
  const backends = {
    exec: opts.backends?.exec ?? ((t: ResolvedPod['target']) => createTargetExecBackend(t.kubeConfig)),
    logs: opts.backends?.logs ?? createTargetLogBackend(),
    portForward: opts.backends?.portForward ?? createTargetPortForwardBackend(),
  };
  const registers = opts.registry ? [opts.registry] : [];
  const requests = new Counter({
    name: 'admiralty_kubelet_requests_total',
    help: 'Kubelet API requests served, by route and HTTP status code.',
    labelNames: ['route', 'code'],
    registers,
  });
  const duration = new Histogram({
    name: 'admiralty_kubelet_request_duration_seconds',
    help: 'Kubelet API request duration (whole session for upgrades), by route and HTTP status code.',
    labelNames: ['route', 'code'],
    buckets: [0.005, 0.025, 0.1, 0.5, 1, 5, 30, 120, 600],
    registers,
  });
  const observe = (route: string, code: number, startedNs: bigint) => {
    const labels = { route, code: String(code) };
    requests.inc(labels);
    duration.observe(labels, Number(process.hrtime.bigint() - startedNs) / 1e9);
  };

  /** Authn -> resolve -> authz, shared by plain and upgrade requests. Throws HttpError. */
  const admit = async (req: IncomingMessage, path: KubeletPath): Promise<{ user: KubeletUser; resolved: ResolvedPod }> => {
    const user = await opts.auth.authenticate(req);
    if (!user) throw new HttpError(401, 'Unauthorized');
    const interactive = path.route !== 'containerLogs';
    const resolved = await opts.resolver.resolve(path.namespace, path.pod);
    if (!resolved) {
      // Say "not found" only to callers allowed on nodes/proxy at all: otherwise a 404 would
      // tell an unauthorized caller which pods exist.
      const anyNode = kubeletRequestAttributes(req.method ?? 'GET', '', interactive);
      if (!(await opts.auth.authorize(user, anyNode))) throw new HttpError(403, forbiddenMessage(user, anyNode));
      throw new HttpError(404, `pod ${path.namespace}/${path.pod} not found`);
    }
    const attrs = kubeletRequestAttributes(req.method ?? 'GET', resolved.nodeName, interactive);
    if (!(await opts.auth.authorize(user, attrs))) throw new HttpError(403, forbiddenMessage(user, attrs));
    return { user, resolved };
  };

  const app = express();
  app.disable('x-powered-by');
  // No caller revalidates an answer: an ETag would only cost a SHA-1 of every body.
  app.disable('etag');
  // Health probes must work without credentials; a real kubelet serves /healthz on its
  // separate healthz port without auth, so this does not expose more than a kubelet does.
  app.get('/healthz', (_req, res) => {
    res.type('text/plain').send('ok');
  });
  app.get(/^\/containerLogs\//, (req, res) => {
    handleLogs(req, res).catch((err: unknown) => abandon('containerLogs', res, err));
  });
  app.get(/^\/(metrics|stats)\//, (req, res, next) => {
    const path = parseNodeScopedPath(new URL(req.url ?? '/', 'https://kubelet').pathname, req.get('x-forwarded-uri'));
    if (!path) return next();
    handleNodeScoped(req, res, path).catch((err: unknown) => abandon(path.route, res, err));
  });
  app.get(/^\/admiralty\//, (req, res, next) => {
    const path = parseOperatorPath(new URL(req.url ?? '/', 'https://kubelet').pathname);
    if (!path || !opts.operatorViews) return next();
    handleOperatorView(req, res, path, opts.operatorViews).catch((err: unknown) => abandon(path.view, res, err));
  });
  app.use((req, res) => {
    const started = process.hrtime.bigint();
    res.status(404).type('text/plain').send('404 page not found');
    observe('other', 404, started);
  });

  /**
   * Last resort for a handler that failed in its own error handling (each answers its failures
   * itself): drop the connection and log, rather than leave a rejection that ends the process.
   */
  const abandon = (route: string, conn: { destroy(): unknown }, err: unknown) => {
    conn.destroy();
    logger.error('kubelet request handler failed', { route, ...errorFields(err) });
  };

  const handleLogs = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const started = process.hrtime.bigint();
    const ac = new AbortController();
    // The client (apiserver) went away: end the upstream request too.
    res.on('close', () => ac.abort());
    try {
      const url = requestUrl(req);
      const path = parseKubeletPath(url.pathname);
      if (!path) throw new HttpError(404, '404 page not found');
      const { resolved } = await admit(req, path);
      const options = parseLogQuery(url.searchParams);
      if (typeof options === 'string') throw new HttpError(400, options);
      const body = await backends.logs.streamLogs(resolved.target, path.container, options, ac.signal);
      res.writeHead(200, { 'Content-Type': 'text/plain', 'Cache-Control': 'no-cache' });
      res.flushHeaders();
      body.on('error', () => res.destroy());
      body.pipe(res);
      await new Promise<void>((resolve) => res.on('close', () => resolve()));
      if (!body.destroyed) body.destroy();
      observe('containerLogs', 200, started);
    } catch (err) {
      const code = err instanceof HttpError || err instanceof LogUpstreamError ? (err instanceof HttpError ? err.code : err.statusCode) : 500;
      if (code >= 500) logger.warn('kubelet logs request failed', { route: 'containerLogs', ...errorFields(err) });
      if (!res.headersSent && !res.destroyed) {
        res.writeHead(code, { 'Content-Type': 'text/plain' });
        // The details of an internal failure (a TokenReview's answer, a target's) are for the log.
        res.end(code >= 500 ? 'internal error' : (err as Error).message);
      } else {
        res.destroy();
      }
      observe('containerLogs', code, started);
    }
  };

  const handleNodeScoped = async (req: IncomingMessage, res: ServerResponse, path: NodeScopedPath): Promise<void> => {
    const started = process.hrtime.bigint();
    const subresource = path.route === 'metricsResource' ? 'metrics' : 'stats';
    let code = 200;
    try {
      const user = await opts.auth.authenticate(req);
      if (!user) throw new HttpError(401, 'Unauthorized');
      // Without a node name, say "not found" only to callers allowed on that subresource at all.
      const attrs = nodeRequestAttributes(req.method ?? 'GET', path.nodeName ?? '', subresource);
      if (!(await opts.auth.authorize(user, attrs))) throw new HttpError(403, forbiddenMessage(user, attrs));
      if (!path.nodeName) throw new HttpError(404, `no node named: ask /metrics/resource/<node>, or through the apiserver (nodes/<node>/proxy)`);
      const usage = await opts.nodeUsage.nodeUsage(path.nodeName);
      if (!usage) throw new HttpError(404, `node ${path.nodeName} is not a virtual node of this provider`);
      if (path.route === 'metricsResource') res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8' }).end(renderResourceMetrics(usage));
      else res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(buildStatsSummary(usage)));
    } catch (err) {
      code = err instanceof HttpError ? err.code : 500;
      if (code >= 500) logger.warn('kubelet node-scoped request failed', { route: path.route, node: path.nodeName ?? '', ...errorFields(err) });
      if (!res.headersSent) res.writeHead(code, { 'Content-Type': 'text/plain' }).end(code >= 500 ? 'internal error' : (err as Error).message);
    }
    observe(path.route, code, started);
  };

  /**
   * The operator views (`kubectl admiralty`), asked by the user's CLI directly: authenticated as
   * every call here, acting as the impersonated user when asked (see `impersonatedUser`), and
   * authorized on what is shown: `get` on the pod explained, on the Target whose summary is read.
   * Who may read a pod may know why it is placed where it is; nodes/proxy is not needed.
   */
  const handleOperatorView = async (req: IncomingMessage, res: ServerResponse, path: OperatorPath, views: OperatorViews): Promise<void> => {
    const started = process.hrtime.bigint();
    let code: number;
    try {
      const caller = await opts.auth.authenticate(req);
      if (!caller) throw new HttpError(401, 'Unauthorized');
      const user = await impersonatedUser(req, caller, opts.auth);
      if (typeof user === 'string') throw new HttpError(user.startsWith('unsupported') ? 400 : 403, user);
      const attrs = path.view === 'explain' ? { verb: 'get', resource: 'pods', namespace: path.namespace, name: path.pod } : views.summaryAttributes(path.node);
      if (!attrs) throw new HttpError(404, `node ${path.view === 'summary' ? path.node : ''} is not a virtual node of this provider`);
      if (!(await opts.auth.authorize(user, attrs))) throw new HttpError(403, forbiddenMessage(user, attrs));
      const answer = path.view === 'summary' ? await views.summary(path.node) : await views.explain(path.namespace, path.pod);
      code = answer.code;
      if ('body' in answer) res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(answer.body));
      else res.writeHead(code, { 'Content-Type': 'text/plain' }).end(answer.message);
    } catch (err) {
      code = err instanceof HttpError ? err.code : 500;
      if (code >= 500) logger.warn('kubelet operator view failed', { route: path.view, ...errorFields(err) });
      if (!res.headersSent) res.writeHead(code, { 'Content-Type': 'text/plain' }).end(code >= 500 ? 'internal error' : (err as Error).message);
    }
    observe(path.view, code, started);
  };

  const sessions = new Set<SpdySession>();
  const websockets = new Set<WebSocket>();
  // Subprotocols are chosen before the handshake (after authorization), so ws only echoes it.
  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (offered) => pickWebSocketProtocol(offered) ?? false,
    perMessageDeflate: false,
    // ws's default is 100 MiB per message, held in memory until complete.
    maxPayload: MAX_WEBSOCKET_MESSAGE_BYTES,
  });
  const limits = { ...DEFAULT_CONNECTION_LIMITS, ...opts.limits };
  const streamingIdleTimeoutMs = opts.streamingIdleTimeoutMs ?? DEFAULT_STREAMING_IDLE_TIMEOUT_MS;
  /** Closes an upgraded connection after silence in both directions. */
  const idleClose = (socket: Duplex) => {
    const s = socket as Duplex & { setTimeout?: (ms: number, cb?: () => void) => void };
    s.setTimeout?.(streamingIdleTimeoutMs, () => socket.destroy());
  };
  const sockets = new Set<Duplex>();

  // eslint-disable-next-line max-lines-per-function -- split pending
  const handleUpgrade = async (req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> => {
    const started = process.hrtime.bigint();
    let route = 'other';
    socket.on('error', () => undefined);
    try {
      const url = requestUrl(req);
      const path = parseKubeletPath(url.pathname);
      route = path?.route ?? 'other';
      if (!path || path.route === 'containerLogs') throw new HttpError(404, '404 page not found');
      const upgrade = String(req.headers.upgrade ?? '').toLowerCase().split(',').map((s) => s.trim());
      const websocket = upgrade.includes('websocket') && !upgrade.includes('spdy/3.1');
      if (!upgrade.includes('spdy/3.1') && !websocket) {
        throw new HttpError(400, `unsupported upgrade "${req.headers.upgrade ?? ''}"; SPDY/3.1 and websocket are served`);
      }
      if (websocket && path.route === 'portForward') {
        // The apiserver dials port-forward with SPDY; WebSocket port-forward is not served.
        throw new HttpError(400, 'port-forward is served over SPDY/3.1 only');
      }
      const { resolved } = await admit(req, path);
      const supported = path.route === 'portForward' ? [PORT_FORWARD_PROTOCOL] : [...REMOTECOMMAND_PROTOCOLS];
      let execRequest;
      if (path.route !== 'portForward') {
        const parsed = parseExecQuery(
          url.searchParams,
          { namespace: resolved.target.namespace, pod: resolved.target.pod, container: path.container },
          path.route,
        );
        if (typeof parsed === 'string') throw new HttpError(400, parsed);
        execRequest = parsed;
      }
      if (websocket) {
        const header = req.headers['sec-websocket-protocol'];
        // As wsstream's "" entry: a client offering no subprotocol gets channel.k8s.io
        // semantics, and none is echoed. A mismatch is a 403, as x/net/websocket answers a
        // refused handshake (and as our SPDY path does).
        const protocol = header === undefined ? '' : pickWebSocketProtocol(header.split(','));
        if (protocol === undefined) {
          throw new HttpError(403, `unable to upgrade: unable to negotiate a WebSocket subprotocol: client offers "${header}", server serves ${WEBSOCKET_PROTOCOLS.join(', ')}`);
        }
        if (socket.destroyed) return;
        // ws answers a malformed handshake (bad key or version) itself and closes the socket.
        const ws = await new Promise<WebSocket | undefined>((resolve) => {
          socket.once('close', () => resolve(undefined));
          wss.handleUpgrade(req, socket, head, resolve);
        });
        if (!ws) {
          observe(route, 400, started);
          return;
        }
        websockets.add(ws);
        ws.once('close', () => websockets.delete(ws));
        idleClose(socket);
        const result = await serveWebSocketRemoteCommand({ ws, protocol, request: execRequest!, mode: path.route as 'exec' | 'attach', backend: backends.exec(resolved.target) });
        if ('error' in result) logger.warn('kubelet remote command failed', { route, error: result.error });
        observe(route, 101, started);
        return;
      }
      const protocol = negotiateProtocol(req.headers['x-stream-protocol-version'], supported);
      if (!protocol) {
        writeUpgradeError(
          socket,
          403,
          `unable to upgrade: unable to negotiate protocol: client supports ${String(req.headers['x-stream-protocol-version'] ?? '')}, server supports ${supported.join(', ')}`,
          supported.map((p) => ['X-Accepted-Stream-Protocol-Versions', p]),
        );
        observe(route, 403, started);
        return;
      }
      if (socket.destroyed) return;
      writeSpdyUpgradeResponse(socket, protocol);
      (socket as Duplex & { setNoDelay?: (v: boolean) => void }).setNoDelay?.(true);
      idleClose(socket);
      const session = new SpdySession(socket, {
        role: 'server',
        maxConcurrentStreams: path.route === 'portForward' ? MAX_PORT_FORWARD_STREAMS : MAX_REMOTECOMMAND_STREAMS,
      });
      sessions.add(session);
      session.on('error', (err: Error) => logger.debug('kubelet SPDY session error', { route, ...errorFields(err) }));
      session.once('close', () => sessions.delete(session));
      session.start(head);
      if (path.route === 'portForward') {
        await servePortForward({
          session,
          target: resolved.target,
          backend: backends.portForward,
          streamCreationTimeoutMs: opts.streamCreationTimeoutMs,
          // Two streams per connection: pairs waiting for their second stream count too.
          maxConnections: MAX_PORT_FORWARD_STREAMS / 2,
          onError: (err) => logger.debug('port-forward connection failed', { route, ...errorFields(err) }),
        });
      } else {
        const result = await serveRemoteCommand({
          session,
          protocol,
          request: execRequest!,
          mode: path.route,
          backend: backends.exec(resolved.target),
          streamCreationTimeoutMs: opts.streamCreationTimeoutMs,
        });
        if ('error' in result) logger.warn('kubelet remote command failed', { route, error: result.error });
      }
      observe(route, 101, started);
    } catch (err) {
      const code = err instanceof HttpError ? err.code : 500;
      if (code >= 500) logger.warn('kubelet upgrade request failed', { route, ...errorFields(err) });
      writeUpgradeError(socket, code, code >= 500 ? 'internal error' : (err as Error).message);
      observe(route, code, started);
    }
  };

  const server = https.createServer(
    {
      cert: opts.tls.certPem,
      key: opts.tls.keyPem,
      // Ask for a client certificate but let token-only callers in: authn decides per request.
      ...(opts.clientCaPem ? { ca: opts.clientCaPem, requestCert: true, rejectUnauthorized: false } : {}),
      minVersion: 'TLSv1.2',
      ...tlsLimitOptions(limits),
    },
    app,
  );
  // Logs follow and exec sessions are long-lived: no whole-request timeout; the handshake,
  // the first request's headers, keep-alive idle and streaming idle are time-boxed.
  server.requestTimeout = 0;
  applyConnectionLimits(server, limits, {
    handlesUpgrades: true,
    onClose: (reason, address) =>
      logger.log(reason === 'first_request_timeout' ? 'info' : 'warn', 'kubelet API connection closed by the server', {
        reason,
        ...(address === undefined ? { maxConnections: limits.maxConnections } : { address, maxConnectionsPerAddress: limits.maxConnectionsPerAddress }),
      }),
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    handleUpgrade(req, socket, head).catch((err: unknown) => abandon('upgrade', socket, err));
  });
  server.on('connection', (socket: Duplex) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('tlsClientError', (err: Error) => logger.debug('kubelet TLS handshake failed', errorFields(err)));
  const draining = drainOnRequest(server);

  return {
    drain: () => draining.drain(),
    listen: () =>
      new Promise<number>((resolve, reject) => {
        server.once('error', reject);
        server.listen(opts.port, host, () => {
          server.off('error', reject);
          resolve((server.address() as AddressInfo).port);
        });
      }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sessions) s.destroy();
        for (const w of websockets) w.terminate();
        for (const s of sockets) s.destroy();
        if (!server.listening) return resolve();
        server.close(() => resolve());
      }),
    setCertificate(certPem, keyPem) {
      server.setSecureContext({ cert: certPem, key: keyPem, ...(opts.clientCaPem ? { ca: opts.clientCaPem } : {}) });
    },
  };
}
