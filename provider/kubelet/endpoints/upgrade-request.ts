import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { errorFields } from '../../core/logger.js';
import type { ResolvedPod } from '../kubelet-server.js';
import { parseExecQuery, type ExecRequest } from '../remotecommand.js';
import { writeUpgradeError } from '../upgrade.js';
import { admit, HttpError, requestUrl, type KubeletContext } from './context.js';
import { parseKubeletPath, type KubeletPath } from './paths.js';
import { serveSpdyUpgrade } from './spdy-streams.js';
import { serveWebSocketExec } from './websocket-exec.js';

/** An upgrade request that passed authentication, resolution and authorization. */
export interface AdmittedUpgrade {
  req: IncomingMessage;
  socket: Duplex;
  head: Buffer;
  /** The metrics' route label. */
  route: string;
  /** `process.hrtime.bigint()` when the request came in. */
  started: bigint;
  path: KubeletPath;
  resolved: ResolvedPod;
  /** What to run or attach to; undefined for port-forward. */
  execRequest: ExecRequest | undefined;
}

/**
 * The upgrade requests: exec and attach (SPDY/3.1 or WebSocket) and port-forward (SPDY/3.1).
 * Checks what is asked and admits the caller before any handshake; a refusal is written on the
 * socket as the HTTP answer a kubelet would give.
 */
export async function serveUpgrade(ctx: KubeletContext, req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
  const started = process.hrtime.bigint();
  let route = 'other';
  socket.on('error', () => undefined);
  try {
    const url = requestUrl(req);
    const path = parseKubeletPath(url.pathname);
    route = path?.route ?? 'other';
    if (!path || path.route === 'containerLogs') throw new HttpError(404, '404 page not found');
    const websocket = isWebSocketUpgrade(req, path);
    const { resolved } = await admit(ctx, req, path);
    const execRequest = path.route === 'portForward' ? undefined : execRequestOf(url, path, resolved);
    const upgrade: AdmittedUpgrade = { req, socket, head, route, started, path, resolved, execRequest };
    if (websocket) await serveWebSocketExec(ctx, upgrade);
    else await serveSpdyUpgrade(ctx, upgrade);
  } catch (err) {
    const code = err instanceof HttpError ? err.code : 500;
    if (code >= 500) ctx.logger.warn('kubelet upgrade request failed', { route, ...errorFields(err) });
    writeUpgradeError(socket, code, code >= 500 ? 'internal error' : (err as Error).message);
    ctx.observe(route, code, started);
  }
}

/** Whether the request asks for WebSocket rather than SPDY/3.1; throws a 400 for anything else, or for WebSocket port-forward. */
function isWebSocketUpgrade(req: IncomingMessage, path: KubeletPath): boolean {
  const upgrade = String(req.headers.upgrade ?? '')
    .toLowerCase()
    .split(',')
    .map((s) => s.trim());
  const websocket = upgrade.includes('websocket') && !upgrade.includes('spdy/3.1');
  if (!upgrade.includes('spdy/3.1') && !websocket) {
    throw new HttpError(400, `unsupported upgrade "${req.headers.upgrade ?? ''}"; SPDY/3.1 and websocket are served`);
  }
  if (websocket && path.route === 'portForward') {
    // The apiserver dials port-forward with SPDY; WebSocket port-forward is not served.
    throw new HttpError(400, 'port-forward is served over SPDY/3.1 only');
  }
  return websocket;
}

/** The exec or attach the query asks for, in the delegate's container; a bad query is a 400. */
function execRequestOf(url: URL, path: KubeletPath, resolved: ResolvedPod): ExecRequest {
  const parsed = parseExecQuery(url.searchParams, { namespace: resolved.target.namespace, pod: resolved.target.pod, container: path.container }, path.route as 'exec' | 'attach');
  if (typeof parsed === 'string') throw new HttpError(400, parsed);
  return parsed;
}
