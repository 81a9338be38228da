import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { KubeConfig } from '@kubernetes/client-node';
import { applyConnectionLimits, DEFAULT_CONNECTION_LIMITS, tlsLimitOptions, type ConnectionLimits } from '../core/connection-limits.js';
import type { Logger } from '../core/logger.js';
import { errorFields } from '../core/logger.js';
import type { KubeletAuthorizer } from './auth.js';
import type { LogBackend } from './logs.js';
import type { PortForwardBackend } from './port-forward.js';
import type { ExecBackend } from './remotecommand.js';
import { drainOnRequest } from '../core/drain.js';
import type { NodeUsageSource } from './resource-usage.js';
import type { OperatorViews } from './operator-views.js';
import { abandon, createKubeletContext, type KubeletContext } from './endpoints/context.js';
import { kubeletRoutes } from './endpoints/routes.js';
import { serveUpgrade } from './endpoints/upgrade-request.js';

export { DEFAULT_STREAMING_IDLE_TIMEOUT_MS, MAX_PORT_FORWARD_STREAMS, MAX_REMOTECOMMAND_STREAMS, MAX_WEBSOCKET_MESSAGE_BYTES } from './endpoints/context.js';
export { parseKubeletPath, parseNodeScopedPath, type KubeletPath, type NodeScopedPath } from './endpoints/paths.js';

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
 * Each endpoint is a function of the server's {@link KubeletContext} and its request, in
 * `endpoints/`; this wires them to the HTTPS listener.
 */
export function createKubeletServer(opts: KubeletServerOptions): KubeletServer {
  const ctx = createKubeletContext(opts);
  const limits = { ...DEFAULT_CONNECTION_LIMITS, ...opts.limits };
  const sockets = new Set<Duplex>();
  const server = https.createServer(
    {
      cert: opts.tls.certPem,
      key: opts.tls.keyPem,
      // Ask for a client certificate but let token-only callers in: authn decides per request.
      ...(opts.clientCaPem ? { ca: opts.clientCaPem, requestCert: true, rejectUnauthorized: false } : {}),
      minVersion: 'TLSv1.2',
      ...tlsLimitOptions(limits),
    },
    kubeletRoutes(ctx),
  );
  // Logs follow and exec sessions are long-lived: no whole-request timeout; the handshake,
  // the first request's headers, keep-alive idle and streaming idle are time-boxed.
  server.requestTimeout = 0;
  applyConnectionLimits(server, limits, {
    handlesUpgrades: true,
    onClose: (reason, address) =>
      ctx.logger.log(reason === 'first_request_timeout' ? 'info' : 'warn', 'kubelet API connection closed by the server', {
        reason,
        ...(address === undefined ? { maxConnections: limits.maxConnections } : { address, maxConnectionsPerAddress: limits.maxConnectionsPerAddress }),
      }),
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    serveUpgrade(ctx, req, socket, head).catch((err: unknown) => abandon(ctx, 'upgrade', socket, err));
  });
  server.on('connection', (socket: Duplex) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('tlsClientError', (err: Error) => ctx.logger.debug('kubelet TLS handshake failed', errorFields(err)));
  return serverHandle(ctx, server, opts, sockets);
}

/** What main.ts holds of a running server: listen, drain, close (ending every session), certificate rotation. */
function serverHandle(ctx: KubeletContext, server: https.Server, opts: KubeletServerOptions, sockets: Set<Duplex>): KubeletServer {
  const host = opts.host ?? '127.0.0.1';
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
        for (const s of ctx.sessions) s.destroy();
        for (const w of ctx.websockets) w.terminate();
        for (const s of sockets) s.destroy();
        if (!server.listening) return resolve();
        server.close(() => resolve());
      }),
    setCertificate(certPem, keyPem) {
      server.setSecureContext({ cert: certPem, key: keyPem, ...(opts.clientCaPem ? { ca: opts.clientCaPem } : {}) });
    },
  };
}
