import type { KubeConfig, V1Status } from '@kubernetes/client-node';
import WebSocket from 'ws';
import { realClock, type Clock, type ClockTimer } from '../core/clock.js';
import { sanitizeRemoteText } from '../core/redact.js';
import type { ExecBackend, ExecIO, ExecRequest, ExecResult } from './remotecommand.js';
import { CHANNEL } from './ws-remotecommand.js';

const { STDIN, STDOUT, STDERR, ERROR: STATUS, RESIZE, CLOSE } = CHANNEL;

/** How long to keep reading output after the Status before closing the connection ourselves. */
const STATUS_TO_CLOSE_GRACE_MS = 5_000;

/** Bytes of a refused upgrade's body we read: a Status is a few hundred; the rest is dropped unread. */
const MAX_REFUSAL_BODY_BYTES = 16 * 1024;
/** How long the body of a refused upgrade may take to arrive before we answer with what came. */
const REFUSAL_BODY_TIMEOUT_MS = 10_000;

/**
 * The largest message taken from the target (ws's default is 100 MiB, held whole before it is
 * handed on, per session): the apiserver sends output as it reads it, 32 KiB at a time. A
 * bigger one closes the connection (1009), and the session ends without a Status.
 */
export const MAX_TARGET_MESSAGE_BYTES = 1024 * 1024;

/** Unsent stdin towards the target above which we stop reading the caller's stdin. */
export const STDIN_HIGH_WATER_BYTES = 1024 * 1024;
/** ...and below which we read it again. */
const STDIN_LOW_WATER_BYTES = 256 * 1024;

/**
 * The target's exec/attach URL for the delegate, with the query the apiserver expects. Pure.
 */
export function targetExecUrl(server: string, mode: 'exec' | 'attach', req: ExecRequest): string {
  const base = new URL(server);
  base.protocol = base.protocol === 'https:' ? 'wss:' : 'ws:';
  const prefix = base.pathname.replace(/\/$/, '');
  base.pathname = `${prefix}/api/v1/namespaces/${encodeURIComponent(req.namespace)}/pods/${encodeURIComponent(req.pod)}/${mode}`;
  const q = new URLSearchParams();
  for (const c of mode === 'exec' ? req.command : []) q.append('command', c);
  q.set('container', req.container);
  q.set('stdin', String(req.stdin));
  q.set('stdout', String(req.stdout));
  q.set('stderr', String(req.stderr));
  q.set('tty', String(req.tty));
  base.search = q.toString();
  return base.toString();
}

/**
 * ExecBackend that runs exec/attach on the delegate in a target cluster over the target
 * apiserver's WebSocket remotecommand protocol (v5, else v4). `req.namespace`/`req.pod` are
 * the delegate's. The Status from the error channel is passed through verbatim. A refused
 * upgrade rejects with the HTTP code and the message of the refusal's Status, read from at most
 * the first 16 KiB of its body within `refusalBodyTimeoutMs` (10 s) and cut to one printable line.
 * Both deadlines, and the `closeGraceMs` (5 s) of reading on after the Status, run on `clock`.
 *
 * Written on `ws` directly rather than client-node's Exec, which ends the output streams and
 * closes the connection as soon as the Status arrives (the target's apiserver copies each
 * stream on its own, so output may still follow it), and which answers a v5 close signal by
 * ending the provider's own process.stdout.
 */
// eslint-disable-next-line max-lines-per-function -- the backend is the one exec session it makes, below
export function createTargetExecBackend(kubeConfig: KubeConfig, opts: { closeGraceMs?: number; refusalBodyTimeoutMs?: number; clock?: Clock } = {}): ExecBackend {
  const closeGraceMs = opts.closeGraceMs ?? STATUS_TO_CLOSE_GRACE_MS;
  const refusalBodyTimeoutMs = opts.refusalBodyTimeoutMs ?? REFUSAL_BODY_TIMEOUT_MS;
  const clock = opts.clock ?? realClock;

  // eslint-disable-next-line max-lines-per-function -- one exec session: its streams, the Status and the close grace share state
  const run = async (mode: 'exec' | 'attach', req: ExecRequest, io: ExecIO): Promise<ExecResult> => {
    const cluster = kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('the target kubeconfig has no current cluster');
    const wsOptions: WebSocket.ClientOptions = { maxPayload: MAX_TARGET_MESSAGE_BYTES };
    await kubeConfig.applyToHTTPSOptions(wsOptions);
    if (io.signal.aborted) throw new Error('the caller went away');
    const ws = new WebSocket(targetExecUrl(cluster.server, mode, req), ['v5.channel.k8s.io', 'v4.channel.k8s.io'], wsOptions);

    let status: V1Status | undefined;
    let statusSeen: () => void = () => undefined;
    const gotStatus = new Promise<void>((r) => (statusSeen = r));
    const closed = new Promise<void>((r) => ws.once('close', () => r()));
    const onAbort = () => ws.terminate();
    io.signal.addEventListener('abort', onAbort, { once: true });

    const onMessage = (data: WebSocket.RawData, isBinary: boolean) => {
      const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
      if (buf.length === 0 || !isBinary) return;
      const channel = buf[0];
      const payload = buf.subarray(1);
      if (channel === STDOUT || channel === STDERR) {
        const out = channel === STDOUT ? io.stdout : io.stderr;
        // An ended output fails the write and destroys itself with an error: drop what comes
        // after the caller closed it.
        if (!out || out.writableEnded || out.destroyed) return;
        // Back-pressure: stop reading from the target while the caller's side is full.
        if (payload.length > 0 && !out.write(payload)) {
          ws.pause();
          out.once('drain', () => ws.resume());
        }
      } else if (channel === STATUS && payload.length > 0) {
        try {
          status = JSON.parse(payload.toString('utf8')) as V1Status;
        } catch {
          status = { status: 'Failure', message: payload.toString('utf8'), reason: 'InternalError' };
        }
        statusSeen();
      }
      // CLOSE from the server (its end of a stream) needs nothing: we end ours when done.
    };
    // Listen before the handshake completes: frames can arrive with the 101 itself.
    ws.on('message', onMessage);

    const opened = new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('unexpected-response', (_req, res) => {
        // The target's server is whoever the Target names: its body may never end, or never
        // come. Read a prefix, within a deadline, and refuse with what came.
        const chunks: Buffer[] = [];
        let size = 0;
        const refuse = () => {
          clock.clearTimeout(deadline);
          res.destroy();
          const body = Buffer.concat(chunks).toString('utf8');
          reject(new Error(`the target refused ${mode}: HTTP ${res.statusCode}${body ? `: ${refusalMessage(body)}` : ''}`));
        };
        const deadline = clock.setTimeout(refuse, refusalBodyTimeoutMs);
        res.on('data', (c: Buffer) => {
          chunks.push(c.subarray(0, MAX_REFUSAL_BODY_BYTES - size));
          size += c.length;
          if (size >= MAX_REFUSAL_BODY_BYTES) refuse();
        });
        res.on('end', refuse);
        res.on('error', refuse);
      });
      ws.once('error', reject);
      void closed.then(() => reject(new Error(`the connection to the target closed before ${mode} started`)));
    });
    try {
      await opened;
    } catch (err) {
      io.signal.removeEventListener('abort', onAbort);
      ws.terminate();
      throw err;
    }
    ws.on('error', () => undefined); // a later error surfaces as a close without Status

    // Bytes handed to ws whose write the socket has not completed (ws's bufferedAmount, which
    // the ws client exposes without a drain event; send callbacks tell us when they leave).
    let inFlight = 0;
    let stdinPaused = false;
    const send = (channel: number, payload: Buffer) => {
      if (ws.readyState !== WebSocket.OPEN) return;
      const n = payload.length + 1;
      inFlight += n;
      ws.send(Buffer.concat([Buffer.from([channel]), payload]), () => {
        inFlight -= n;
        if (stdinPaused && inFlight <= STDIN_LOW_WATER_BYTES) {
          stdinPaused = false;
          io.stdin?.resume();
        }
      });
    };
    if (io.stdin) {
      const stdin = io.stdin;
      stdin.on('data', (chunk: Buffer | string) => {
        send(STDIN, Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
        // A command that does not read its stdin must slow the caller down, not fill our
        // memory (600 MB in 3 s before): stop reading the caller's stdin while too much is
        // unsent; the caller's stream then fills and TCP pushes back on the apiserver.
        if (inFlight > STDIN_HIGH_WATER_BYTES && !stdinPaused) {
          stdinPaused = true;
          stdin.pause();
        }
      });
      stdin.once('end', () => {
        // v5 can say "no more input"; v4 cannot, and the command keeps its stdin open.
        if (ws.protocol === 'v5.channel.k8s.io') send(CLOSE, Buffer.from([STDIN]));
      });
    }
    if (req.tty && io.resize) {
      void (async () => {
        for await (const size of io.resize!) {
          if (ws.readyState !== WebSocket.OPEN) break;
          send(RESIZE, Buffer.from(JSON.stringify({ Width: size.width, Height: size.height })));
        }
      })().catch(() => undefined);
    }

    await Promise.race([gotStatus, closed]);
    // Output can follow the Status: read on until the target closes, within a grace period.
    let grace: ClockTimer | undefined;
    await Promise.race([closed, new Promise<void>((r) => (grace = clock.setTimeout(r, closeGraceMs)))]);
    if (grace) clock.clearTimeout(grace);
    io.signal.removeEventListener('abort', onAbort);
    // The caller ends its outputs once we return, and a target that did not close within the
    // grace period may keep talking: nothing it sends may reach them now, and a polite close
    // would leave the connection open (and reading) until ws's 30 s close timeout.
    ws.off('message', onMessage);
    ws.terminate();
    if (status) return { status };
    if (io.signal.aborted) throw new Error('the caller went away');
    if (mode === 'attach') return { exitCode: 0 };
    throw new Error('connection to the target closed before the command reported its status');
  };

  return {
    exec: (req, io) => run('exec', req, io),
    attach: (req, io) => run('attach', req, io),
  };
}

/** The message of a Status body, or the body itself, as one printable line of at most 256 characters. Pure. */
function refusalMessage(body: string): string {
  let message = body;
  try {
    const s = JSON.parse(body) as { message?: unknown };
    if (typeof s.message === 'string') message = s.message;
  } catch {
    /* not a Status: the body is the message */
  }
  return sanitizeRemoteText(message);
}
