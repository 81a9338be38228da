import type { WebSocket } from 'ws';
import { pickWebSocketProtocol, serveWebSocketRemoteCommand, WEBSOCKET_PROTOCOLS } from '../ws-remotecommand.js';
import { HttpError, idleClose, type KubeletContext } from './context.js';
import type { AdmittedUpgrade } from './upgrade-request.js';

/**
 * Exec or attach over WebSocket (channel protocols v5..v1): negotiates the subprotocol, completes
 * the handshake and runs the session to its end. A refused subprotocol is a 403, thrown before
 * the handshake.
 */
export async function serveWebSocketExec(ctx: KubeletContext, up: AdmittedUpgrade): Promise<void> {
  const { req, socket, head, route } = up;
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
    ctx.wss.handleUpgrade(req, socket, head, resolve);
  });
  if (!ws) {
    ctx.observe(route, 400, up.started);
    return;
  }
  ctx.websockets.add(ws);
  ws.once('close', () => ctx.websockets.delete(ws));
  idleClose(ctx, socket);
  const result = await serveWebSocketRemoteCommand({
    ws,
    protocol,
    request: up.execRequest!,
    mode: up.path.route as 'exec' | 'attach',
    backend: ctx.backends.exec(up.resolved.target),
  });
  if ('error' in result) ctx.logger.warn('kubelet remote command failed', { route, error: result.error });
  ctx.observe(route, 101, up.started);
}
