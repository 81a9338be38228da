import { PassThrough, Writable } from 'node:stream';
import type { WebSocket } from 'ws';
import { endAndWait, outcomeStatus, parseResizeStream, type ExecBackend, type ExecIO, type ExecRequest, type ExecResult } from './remotecommand.js';

/**
 * remotecommand over WebSocket, server side: what a kubelet serves to clients that reach it
 * with `Upgrade: websocket` (the apiserver itself always dials the kubelet with SPDY).
 *
 * Every binary message starts with a channel byte: 0 stdin, 1 stdout, 2 stderr, 3 error (the
 * outcome), 4 resize (one JSON `{"Width":..,"Height":..}` per message); v5 adds 255, "close",
 * whose one-byte payload names a stream its sender is done with (the client's stdin).
 */

/** The binary channel protocols we serve, in our order of preference. */
export const WEBSOCKET_PROTOCOLS = ['v5.channel.k8s.io', 'v4.channel.k8s.io', 'v3.channel.k8s.io', 'v2.channel.k8s.io', 'channel.k8s.io'] as const;

/** Channel numbers of the WebSocket channel protocols (both directions). */
export const CHANNEL = { STDIN: 0, STDOUT: 1, STDERR: 2, ERROR: 3, RESIZE: 4, CLOSE: 255 } as const;
const { STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE } = CHANNEL;

/**
 * Picks the first protocol of the client's `Sec-WebSocket-Protocol` list that we serve (the
 * client's preference wins, as in the kubelet). Undefined when none matches. Pure.
 */
export function pickWebSocketProtocol(offered: Iterable<string>): string | undefined {
  for (const p of offered) if ((WEBSOCKET_PROTOCOLS as readonly string[]).includes(p.trim())) return p.trim();
  return undefined;
}

/** Options for {@link serveWebSocketRemoteCommand}. */
export interface WebSocketRemoteCommandOptions {
  ws: WebSocket;
  /** The negotiated subprotocol (one of WEBSOCKET_PROTOCOLS), or '' when the client offered none (v1 semantics). */
  protocol: string;
  request: ExecRequest;
  mode: 'exec' | 'attach';
  backend: ExecBackend;
}

/**
 * Runs one exec/attach over an accepted WebSocket: announces the connection with an empty
 * message on the first output channel (as the kubelet does), feeds stdin and resizes to the
 * backend, sends its output, then the outcome on the error channel (v4 and v5: a Status JSON;
 * older protocols: text, on failure only), and closes normally. Never rejects.
 */
export async function serveWebSocketRemoteCommand(opts: WebSocketRemoteCommandOptions): Promise<ExecResult | { error: string }> {
  const { ws, request, protocol } = opts;
  const ac = new AbortController();
  const open = () => ws.readyState === ws.OPEN;

  /** Sends one framed message; resolves once the socket took it (or is gone). */
  const send = (channel: number, data: Buffer) =>
    new Promise<void>((resolve) => {
      if (!open()) return resolve();
      ws.send(Buffer.concat([Buffer.from([channel]), data]), { binary: true }, () => resolve());
    });
  const output = (channel: number) =>
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        // The callback waits for the socket: a slow client slows the backend down.
        if (chunk.length === 0) return cb();
        void send(channel, chunk).then(() => cb());
      },
    });

  const stdin = request.stdin ? new PassThrough() : undefined;
  const resizeLines = request.tty ? new PassThrough() : undefined;
  const stdout = request.stdout ? output(STDOUT) : undefined;
  const stderr = request.stderr ? output(STDERR) : undefined;

  ws.on('message', (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => {
    if (!isBinary) return; // only the binary protocols are served
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    if (buf.length === 0) return;
    const payload = buf.subarray(1);
    switch (buf[0]) {
      case STDIN:
        if (stdin && !stdin.writableEnded && payload.length > 0 && !stdin.write(payload)) {
          // Back-pressure: stop reading the socket until the backend took the input.
          ws.pause();
          stdin.once('drain', () => ws.resume());
        }
        break;
      case RESIZE:
        if (resizeLines && !resizeLines.writableEnded && !resizeLines.write(Buffer.concat([payload, Buffer.from('\n')]))) {
          // Same back-pressure as stdin: a backend slow to apply resizes slows the client.
          ws.pause();
          resizeLines.once('drain', () => ws.resume());
        }
        break;
      case CLOSE:
        if (protocol === 'v5.channel.k8s.io' && payload[0] === STDIN) stdin?.end();
        break;
      default:
      // Messages on channels the client may not write are ignored, as the kubelet does.
    }
  });
  ws.once('close', () => {
    ac.abort();
    stdin?.end();
    resizeLines?.end();
  });
  ws.on('error', () => undefined); // a broken socket shows as a close

  // "Connection established": an empty message on the lowest channel we will write to.
  await send(stdout ? STDOUT : stderr ? STDERR : ERROR, Buffer.alloc(0));

  const io: ExecIO = { stdin, stdout, stderr, resize: resizeLines ? parseResizeStream(resizeLines) : undefined, signal: ac.signal };
  let outcome: ExecResult | { error: string };
  try {
    outcome = await (opts.mode === 'exec' ? opts.backend.exec(request, io) : opts.backend.attach(request, io));
  } catch (err) {
    outcome = { error: err instanceof Error ? err.message : String(err) };
  }
  resizeLines?.end();
  if (!open()) return outcome;
  // All output first: the client stops reading at the close that follows the outcome.
  await Promise.all([stdout, stderr].map((s) => (s ? endAndWait(s) : Promise.resolve())));
  const status = outcomeStatus(outcome);
  if (protocol === 'v5.channel.k8s.io' || protocol === 'v4.channel.k8s.io') {
    await send(ERROR, Buffer.from(JSON.stringify(status)));
  } else if (status.status !== 'Success') {
    await send(ERROR, Buffer.from(status.message ?? 'error'));
  }
  if (open()) ws.close(1000);
  return outcome;
}
