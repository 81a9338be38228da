import type { Duplex } from 'node:stream';
import { errorFields } from '../../core/logger.js';
import { PORT_FORWARD_PROTOCOL, servePortForward } from '../port-forward.js';
import { REMOTECOMMAND_PROTOCOLS, serveRemoteCommand } from '../remotecommand.js';
import { SpdySession } from '../spdy/spdy-session.js';
import { negotiateProtocol, writeSpdyUpgradeResponse, writeUpgradeError } from '../upgrade.js';
import { idleClose, MAX_PORT_FORWARD_STREAMS, MAX_REMOTECOMMAND_STREAMS, type KubeletContext } from './context.js';
import type { AdmittedUpgrade } from './upgrade-request.js';

/**
 * Exec, attach or port-forward over SPDY/3.1: negotiates the stream protocol
 * (`X-Stream-Protocol-Version`), answers 101 and runs the session to its end.
 */
export async function serveSpdyUpgrade(ctx: KubeletContext, up: AdmittedUpgrade): Promise<void> {
  const { req, socket, route } = up;
  const supported = up.path.route === 'portForward' ? [PORT_FORWARD_PROTOCOL] : [...REMOTECOMMAND_PROTOCOLS];
  const protocol = negotiateProtocol(req.headers['x-stream-protocol-version'], supported);
  if (!protocol) {
    writeUpgradeError(
      socket,
      403,
      `unable to upgrade: unable to negotiate protocol: client supports ${String(req.headers['x-stream-protocol-version'] ?? '')}, server supports ${supported.join(', ')}`,
      supported.map((p) => ['X-Accepted-Stream-Protocol-Versions', p]),
    );
    ctx.observe(route, 403, up.started);
    return;
  }
  if (socket.destroyed) return;
  const session = openSession(ctx, up, protocol);
  if (up.path.route === 'portForward') await servePortForwardSession(ctx, up, session);
  else await serveExecSession(ctx, up, session, protocol);
  ctx.observe(route, 101, up.started);
}

/** Answers the upgrade and starts a server SPDY session on the socket, ended by `close()` if still open. */
function openSession(ctx: KubeletContext, up: AdmittedUpgrade, protocol: string): SpdySession {
  const { socket, route } = up;
  writeSpdyUpgradeResponse(socket, protocol);
  (socket as Duplex & { setNoDelay?: (v: boolean) => void }).setNoDelay?.(true);
  idleClose(ctx, socket);
  const session = new SpdySession(socket, {
    role: 'server',
    maxConcurrentStreams: up.path.route === 'portForward' ? MAX_PORT_FORWARD_STREAMS : MAX_REMOTECOMMAND_STREAMS,
  });
  ctx.sessions.add(session);
  session.on('error', (err: Error) => ctx.logger.debug('kubelet SPDY session error', { route, ...errorFields(err) }));
  session.once('close', () => ctx.sessions.delete(session));
  session.start(up.head);
  return session;
}

/** `/portForward`: each pair of streams the client opens is one connection to a port of the delegate. */
async function servePortForwardSession(ctx: KubeletContext, up: AdmittedUpgrade, session: SpdySession): Promise<void> {
  await servePortForward({
    session,
    target: up.resolved.target,
    backend: ctx.backends.portForward,
    streamCreationTimeoutMs: ctx.streamCreationTimeoutMs,
    // Two streams per connection: pairs waiting for their second stream count too.
    maxConnections: MAX_PORT_FORWARD_STREAMS / 2,
    onError: (err) => ctx.logger.debug('port-forward connection failed', { route: up.route, ...errorFields(err) }),
  });
}

/** `/exec` and `/attach` over remotecommand v4..v1. */
async function serveExecSession(ctx: KubeletContext, up: AdmittedUpgrade, session: SpdySession, protocol: string): Promise<void> {
  const result = await serveRemoteCommand({
    session,
    protocol,
    request: up.execRequest!,
    mode: up.path.route as 'exec' | 'attach',
    backend: ctx.backends.exec(up.resolved.target),
    streamCreationTimeoutMs: ctx.streamCreationTimeoutMs,
  });
  if ('error' in result) ctx.logger.warn('kubelet remote command failed', { route: up.route, error: result.error });
}
