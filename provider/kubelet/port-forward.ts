import { Duplex, finished } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import WebSocket from 'ws';
import { sanitizeRemoteText } from '../core/redact.js';
import { RstStatus } from './spdy/frames.js';
import { headerValue } from './spdy/header-codec.js';
import type { SpdySession, SpdyStream } from './spdy/spdy-session.js';
import { MAX_TARGET_MESSAGE_BYTES } from './target-exec-backend.js';

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
// eslint-disable-next-line max-lines-per-function -- the handlers it registers share the pairing state of the streams
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

/** What client-node's PortForward offers; an apiserver chooses `v4.channel.k8s.io`. */
const CHANNEL_PROTOCOLS = ['v5.channel.k8s.io', 'v4.channel.k8s.io', 'v3.channel.k8s.io', 'v2.channel.k8s.io', 'channel.k8s.io'];
/** Channels of one forwarded port, and the v5 signal that ends ours. */
const DATA_CHANNEL = 0;
const ERROR_CHANNEL = 1;
const CLOSE_SIGNAL = 255;

/**
 * PortForwardBackend over the target's `pods/portforward`: one WebSocket per connection, one
 * port each, as client-node's PortForward opens it. Written on `ws` directly because that one
 * reads the target as fast as it sends and queues what the caller sends however slowly the
 * target reads: a target's server that talks without listening, or a caller that does not
 * read, filled the provider's memory. Here each side is read only as fast as the other takes
 * it, and a message from the target is at most {@link MAX_TARGET_MESSAGE_BYTES}. The target's
 * error text for a connection becomes the Duplex's error: its first 16 KiB, as one printable
 * line of at most 1024 characters.
 */
export function createTargetPortForwardBackend(): PortForwardBackend {
  return {
    async portForward(target, port, signal) {
      const cluster = target.kubeConfig.getCurrentCluster();
      if (!cluster) throw new Error('the target kubeconfig has no current cluster');
      const url = new URL(`${cluster.server.replace(/\/+$/, '')}/api/v1/namespaces/${encodeURIComponent(target.namespace)}/pods/${encodeURIComponent(target.pod)}/portforward`);
      url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
      url.searchParams.set('ports', String(port));
      const options: WebSocket.ClientOptions = { maxPayload: MAX_TARGET_MESSAGE_BYTES };
      await target.kubeConfig.applyToHTTPSOptions(options);
      const ws = new WebSocket(url, CHANNEL_PROTOCOLS, options);
      // The first message of each channel starts with the port (2 bytes).
      const prefixed = new Set([DATA_CHANNEL, ERROR_CHANNEL]);
      const errorChunks: Buffer[] = [];
      let errorBytes = 0;
      const duplex = new Duplex({
        read: () => ws.resume(),
        // Done once the socket took it: the caller's next write waits for the target.
        write: (chunk: Buffer, _encoding, done) => ws.send(Buffer.concat([Buffer.from([DATA_CHANNEL]), chunk]), done),
        final: (done) => {
          // v5 can say "no more data"; before it, only a close can.
          if (ws.protocol === 'v5.channel.k8s.io') ws.send(Buffer.from([CLOSE_SIGNAL, DATA_CHANNEL]), done);
          else {
            ws.close();
            done();
          }
        },
        destroy: (err, done) => {
          ws.terminate();
          done(err);
        },
      });
      ws.on('message', (data: Buffer, isBinary: boolean) => {
        if (!isBinary || data.length === 0) return;
        const channel = data.readUInt8(0);
        let payload = data.subarray(1);
        if (prefixed.delete(channel)) payload = payload.subarray(2);
        if (channel === DATA_CHANNEL && payload.length > 0 && !duplex.push(payload)) ws.pause();
        else if (channel === ERROR_CHANNEL && errorBytes < MAX_ERROR_TEXT_BYTES) {
          // The target's server is whoever the Target names: its error text may never end.
          errorChunks.push(payload.subarray(0, MAX_ERROR_TEXT_BYTES - errorBytes));
          errorBytes += payload.length;
        }
      });
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('unexpected-response', (_req, res) => {
          res.destroy();
          reject(new Error(`the target refused port-forward: HTTP ${res.statusCode}`));
        });
        ws.once('error', reject);
        ws.once('close', () => reject(new Error('the connection to the target closed before port-forward started')));
      });
      ws.on('error', () => undefined); // a later error surfaces as the close
      ws.on('close', () => {
        const errorText = sanitizeRemoteText(Buffer.concat(errorChunks).toString('utf8'), MAX_ERROR_MESSAGE_CHARS);
        if (errorText) duplex.destroy(new Error(errorText));
        else duplex.push(null);
      });
      signal.addEventListener('abort', () => ws.close(), { once: true });
      duplex.on('close', () => ws.close());
      return duplex;
    },
  };
}
