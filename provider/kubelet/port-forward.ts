import { PassThrough, Duplex, finished } from 'node:stream';
import { PortForward, type KubeConfig } from '@kubernetes/client-node';
import { sanitizeRemoteText } from '../core/redact.js';
import { RstStatus } from './spdy/frames.js';
import { headerValue } from './spdy/header-codec.js';
import type { SpdySession, SpdyStream } from './spdy/spdy-session.js';

/** The only port-forward protocol (client-go errors on anything else). */
export const PORT_FORWARD_PROTOCOL = 'portforward.k8s.io';

/** Where the delegate lives. */
export interface PortForwardTarget {
  kubeConfig: KubeConfig;
  namespace: string;
  pod: string;
}

/**
 * Opens one TCP-like connection to `port` of the delegate pod. The returned Duplex carries
 * the bytes; ending it half-closes, destroying it aborts. Rejects if the port cannot be reached.
 */
export interface PortForwardBackend {
  portForward(target: PortForwardTarget, port: number, signal: AbortSignal): Promise<Duplex>;
}

/** Options for {@link servePortForward}. */
export interface PortForwardOptions {
  session: SpdySession;
  target: PortForwardTarget;
  backend: PortForwardBackend;
  /** How long the second stream of a pair may lag the first (kubelet: stream creation timeout). */
  streamCreationTimeoutMs?: number;
  /**
   * Forwarded connections at once, each counted from its first stream until its pair timed
   * out or its data stream is done; a stream that would start one more is refused.
   */
  maxConnections: number;
  onError?: (err: Error) => void;
}

interface Pair {
  data?: SpdyStream;
  error?: SpdyStream;
  timer: NodeJS.Timeout;
}

/**
 * Serves `portforward.k8s.io` on an accepted SPDY session (101 already written). The client
 * opens, per forwarded connection, an `error` stream and a `data` stream carrying the same
 * `port` and `requestid` headers; each complete pair is bridged to the backend. Failures are
 * written as text on the pair's error stream. A second stream of a type a request already has
 * is reset (PROTOCOL_ERROR), and so is a stream past `maxConnections` (REFUSED_STREAM): the
 * session's own stream limit does not see streams the client opened already closed
 * (FIN|UNIDIRECTIONAL), which would otherwise wait here for their pair. Resolves when the
 * session closes.
 */
export function servePortForward(opts: PortForwardOptions): Promise<void> {
  const { session } = opts;
  const pairs = new Map<string, Pair>();
  const ac = new AbortController();
  const timeoutMs = opts.streamCreationTimeoutMs ?? 30_000;
  let connections = 0;

  const fail = (pair: Pair, message: string) => {
    if (pair.error && !pair.error.writableEnded) pair.error.end(message);
    pair.data?.reset();
  };

  session.on('stream', (stream: SpdyStream) => {
    const type = headerValue(stream.headers, 'streamType');
    const requestId = headerValue(stream.headers, 'requestID') ?? '';
    const portText = headerValue(stream.headers, 'port') ?? '';
    if (type !== 'data' && type !== 'error') {
      stream.reset();
      return;
    }
    let pair = pairs.get(requestId);
    if (!pair) {
      if (connections >= opts.maxConnections) {
        stream.reset(RstStatus.REFUSED_STREAM);
        return;
      }
      connections++;
      pair = {
        timer: setTimeout(() => {
          pairs.delete(requestId);
          connections--;
          fail(pair!, `timed out waiting for the data and error streams of request ${requestId}`);
        }, timeoutMs),
      };
      pairs.set(requestId, pair);
    }
    if (pair[type]) {
      stream.reset(RstStatus.PROTOCOL_ERROR);
      return;
    }
    if (type === 'data') pair.data = stream;
    else {
      pair.error = stream;
      // The client half-closes the error stream immediately; drain it.
      stream.resume();
    }
    if (!pair.data || !pair.error) return;
    clearTimeout(pair.timer);
    pairs.delete(requestId);
    const complete = pair;
    // The connection counts until its data stream is done, whichever way it ends.
    finished(complete.data!, () => connections--);
    const port = Number(portText);
    if (!/^\d+$/.test(portText) || port < 1 || port > 65535) {
      fail(complete, `invalid port "${portText}"`);
      return;
    }
    void bridge(complete.data!, complete.error!, port).catch((err: Error) => {
      opts.onError?.(err);
      fail(complete, `error forwarding port ${port} to pod ${opts.target.pod}: ${err.message}`);
    });
  });

  const bridge = async (data: SpdyStream, errorStream: SpdyStream, port: number) => {
    const upstream = await opts.backend.portForward(opts.target, port, ac.signal);
    data.pipe(upstream);
    upstream.pipe(data);
    upstream.on('error', (err: Error) => {
      if (!errorStream.writableEnded) errorStream.end(err.message);
      data.unpipe(upstream);
      // The client may send more before it reads the error: drop it, or its unread DATA fills
      // the stream's buffer and pauses the whole session (every other forward, PINGs).
      data.resume();
      data.end();
    });
    data.on('reset', () => upstream.destroy());
    upstream.on('end', () => {
      if (!errorStream.writableEnded) errorStream.end();
    });
  };

  return new Promise((resolve) =>
    session.once('close', () => {
      ac.abort();
      for (const pair of pairs.values()) clearTimeout(pair.timer);
      resolve();
    }),
  );
}

/** Bytes of a target's error text we keep for a forwarded connection; the rest is dropped. */
const MAX_ERROR_TEXT_BYTES = 16 * 1024;
/**
 * Characters of that text passed on to the client. More than the 256 of a status field: the
 * kubelet's own message names the pod sandbox twice and gives its reason after 300 characters.
 */
const MAX_ERROR_MESSAGE_CHARS = 1024;

/**
 * PortForwardBackend over the target's `pods/portforward` (client-node PortForward, one
 * WebSocket per connection, one port each). The target's error text for a connection becomes
 * the Duplex's error: its first 16 KiB, as one printable line of at most 1024 characters.
 */
export function createTargetPortForwardBackend(): PortForwardBackend {
  return {
    async portForward(target, port, signal) {
      const toRemote = new PassThrough();
      const fromRemote = new PassThrough();
      const errors = new PassThrough();
      const pf = new PortForward(target.kubeConfig, true);
      const ws = await pf.portForward(target.namespace, target.pod, [port], fromRemote, errors, toRemote);
      const socket = typeof ws === 'function' ? ws() : ws;
      const duplex = Duplex.from({ readable: fromRemote, writable: toRemote });
      // The target's server is whoever the Target names: its error text may never end.
      const errorChunks: Buffer[] = [];
      let errorBytes = 0;
      errors.on('data', (c: Buffer) => {
        if (errorBytes < MAX_ERROR_TEXT_BYTES) errorChunks.push(c.subarray(0, MAX_ERROR_TEXT_BYTES - errorBytes));
        errorBytes += c.length;
      });
      socket?.on('close', () => {
        const errorText = sanitizeRemoteText(Buffer.concat(errorChunks).toString('utf8'), MAX_ERROR_MESSAGE_CHARS);
        if (errorText) duplex.destroy(new Error(errorText));
        else fromRemote.end();
      });
      signal.addEventListener('abort', () => socket?.close(), { once: true });
      duplex.on('close', () => socket?.close());
      return duplex;
    },
  };
}
