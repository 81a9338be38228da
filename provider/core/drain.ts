import type { IncomingMessage, ServerResponse } from 'node:http';
import type { EventEmitter } from 'node:events';

/** What {@link drainOnRequest} adds to a server. */
export interface Drain {
  /**
   * From now on every answer, including those of requests already in progress whose headers
   * are not sent yet, carries `Connection: close`: the client reads it whole, closes that
   * connection, and dials its next one through the Service, which no longer routes to a
   * replica that is not Ready. The server keeps answering until it is closed.
   */
  drain(): void;
  readonly draining: boolean;
}

/**
 * Graceful shutdown for an HTTP/1.1 server (or the HTTP/1.1 requests of an HTTP/2 server) that clients reach through a Service with keep-alive
 * connections (the apiserver's webhook calls, kube-scheduler's extender calls). Closing an idle
 * keep-alive connection races a client that writes its next request on it at that moment, and
 * the apiserver does not retry a webhook call that was written and got no answer: with
 * `failurePolicy: Fail` the pod is refused. An answer with `Connection: close` ends a
 * connection without that race, so a draining server closes each connection that way, on its
 * next answer; what stays idle through the drain is closed at the end.
 */
export function drainOnRequest(server: EventEmitter): Drain {
  let draining = false;
  const inFlight = new Set<ServerResponse>();
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    // HTTP/2 has no Connection header: its server drains with a GOAWAY (see createWebhookServer).
    if (req.httpVersionMajor === 2) return;
    if (draining) {
      res.setHeader('Connection', 'close');
      return;
    }
    inFlight.add(res);
    res.once('finish', () => inFlight.delete(res));
    res.once('close', () => inFlight.delete(res));
  });
  return {
    drain() {
      draining = true;
      for (const res of inFlight) if (!res.headersSent) res.setHeader('Connection', 'close');
      inFlight.clear();
    },
    get draining() {
      return draining;
    },
  };
}
