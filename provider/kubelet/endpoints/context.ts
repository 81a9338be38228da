import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { Counter, Histogram } from 'prom-client';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Logger } from '../../core/logger.js';
import { errorFields } from '../../core/logger.js';
import { forbiddenMessage, kubeletRequestAttributes, type KubeletAuthorizer, type KubeletUser } from '../auth.js';
import { createTargetLogBackend, type LogBackend } from '../logs.js';
import type { OperatorViews } from '../operator-views.js';
import { createTargetPortForwardBackend, type PortForwardBackend } from '../port-forward.js';
import type { ExecBackend } from '../remotecommand.js';
import type { NodeUsageSource } from '../resource-usage.js';
import type { SpdySession } from '../spdy/spdy-session.js';
import { createTargetExecBackend } from '../target-exec-backend.js';
import { pickWebSocketProtocol } from '../ws-remotecommand.js';
import type { KubeletServerOptions, PodResolver, ResolvedPod } from '../kubelet-server.js';
import type { KubeletPath } from './paths.js';

/** The kubelet's default `--streaming-connection-idle-timeout`. */
export const DEFAULT_STREAMING_IDLE_TIMEOUT_MS = 4 * 60 * 60 * 1000;
/** Streams an exec/attach session may hold: error, stdin, stdout, stderr, resize, with slack. */
export const MAX_REMOTECOMMAND_STREAMS = 8;
/** Streams a port-forward session may hold: 2 per forwarded connection. */
export const MAX_PORT_FORWARD_STREAMS = 64;
/** Largest WebSocket message we accept (stdin chunks are 32 KiB in client-go). */
export const MAX_WEBSOCKET_MESSAGE_BYTES = 1024 * 1024;

/**
 * What every endpoint of the kubelet API works with: the server's options, its backends (with
 * defaults filled in), the request metrics, and the open sessions that `close()` ends. One per
 * server; the endpoints are functions of it and of their request.
 */
export interface KubeletContext {
  readonly logger: Logger;
  readonly auth: KubeletAuthorizer;
  readonly resolver: PodResolver;
  readonly nodeUsage: NodeUsageSource;
  readonly operatorViews: OperatorViews | undefined;
  readonly backends: {
    readonly exec: (target: ResolvedPod['target']) => ExecBackend;
    readonly logs: LogBackend;
    readonly portForward: PortForwardBackend;
  };
  /** Time the client has to open its SPDY streams; undefined leaves each server's default. */
  readonly streamCreationTimeoutMs: number | undefined;
  readonly streamingIdleTimeoutMs: number;
  /** Counts one request by route and code, with its duration since `startedNs` (`process.hrtime.bigint()`). */
  readonly observe: (route: string, code: number, startedNs: bigint) => void;
  /** Open SPDY sessions and WebSockets, which `close()` ends. */
  readonly sessions: Set<SpdySession>;
  readonly websockets: Set<WebSocket>;
  /** Completes WebSocket handshakes; the subprotocol is chosen before (after authorization). */
  readonly wss: WebSocketServer;
}

/** Builds the context of one server: backends, metrics (on `opts.registry` when given), session sets. */
export function createKubeletContext(opts: KubeletServerOptions): KubeletContext {
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
  return {
    logger: opts.logger,
    auth: opts.auth,
    resolver: opts.resolver,
    nodeUsage: opts.nodeUsage,
    operatorViews: opts.operatorViews,
    backends: {
      exec: opts.backends?.exec ?? ((t: ResolvedPod['target']) => createTargetExecBackend(t.kubeConfig)),
      logs: opts.backends?.logs ?? createTargetLogBackend(),
      portForward: opts.backends?.portForward ?? createTargetPortForwardBackend(),
    },
    streamCreationTimeoutMs: opts.streamCreationTimeoutMs,
    streamingIdleTimeoutMs: opts.streamingIdleTimeoutMs ?? DEFAULT_STREAMING_IDLE_TIMEOUT_MS,
    observe: (route, code, startedNs) => {
      const labels = { route, code: String(code) };
      requests.inc(labels);
      duration.observe(labels, Number(process.hrtime.bigint() - startedNs) / 1e9);
    },
    sessions: new Set(),
    websockets: new Set(),
    wss: new WebSocketServer({
      noServer: true,
      handleProtocols: (offered) => pickWebSocketProtocol(offered) ?? false,
      perMessageDeflate: false,
      // ws's default is 100 MiB per message, held in memory until complete.
      maxPayload: MAX_WEBSOCKET_MESSAGE_BYTES,
    }),
  };
}

/** A refusal the endpoint answers with `code` and, below 500, `message`. */
export class HttpError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** The request's URL; a target the WHATWG parser refuses (`//`, `//x:y`) is a 400. */
export function requestUrl(req: IncomingMessage): URL {
  try {
    return new URL(req.url ?? '/', 'https://kubelet');
  } catch {
    throw new HttpError(400, 'malformed request target');
  }
}

/** Authn -> resolve -> authz, shared by plain and upgrade requests. Throws HttpError. */
export async function admit(ctx: KubeletContext, req: IncomingMessage, path: KubeletPath): Promise<{ user: KubeletUser; resolved: ResolvedPod }> {
  const user = await ctx.auth.authenticate(req);
  if (!user) throw new HttpError(401, 'Unauthorized');
  const interactive = path.route !== 'containerLogs';
  const resolved = await ctx.resolver.resolve(path.namespace, path.pod);
  if (!resolved) {
    // Say "not found" only to callers allowed on nodes/proxy at all: otherwise a 404 would
    // tell an unauthorized caller which pods exist.
    const anyNode = kubeletRequestAttributes(req.method ?? 'GET', '', interactive);
    if (!(await ctx.auth.authorize(user, anyNode))) throw new HttpError(403, forbiddenMessage(user, anyNode));
    throw new HttpError(404, `pod ${path.namespace}/${path.pod} not found`);
  }
  const attrs = kubeletRequestAttributes(req.method ?? 'GET', resolved.nodeName, interactive);
  if (!(await ctx.auth.authorize(user, attrs))) throw new HttpError(403, forbiddenMessage(user, attrs));
  return { user, resolved };
}

/**
 * Last resort for a handler that failed in its own error handling (each answers its failures
 * itself): drop the connection and log, rather than leave a rejection that ends the process.
 */
export function abandon(ctx: KubeletContext, route: string, conn: { destroy(): unknown }, err: unknown): void {
  conn.destroy();
  ctx.logger.error('kubelet request handler failed', { route, ...errorFields(err) });
}

/** Closes an upgraded connection after silence in both directions. */
export function idleClose(ctx: KubeletContext, socket: Duplex): void {
  const s = socket as Duplex & { setTimeout?: (ms: number, cb?: () => void) => void };
  s.setTimeout?.(ctx.streamingIdleTimeoutMs, () => socket.destroy());
}
