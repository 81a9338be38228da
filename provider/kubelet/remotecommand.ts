import { once } from 'node:events';
import type { Readable, Writable } from 'node:stream';
import type { V1Status } from '@kubernetes/client-node';
import { RstStatus } from './spdy/frames.js';
import { headerValue } from './spdy/header-codec.js';
import type { SpdySession, SpdyStream } from './spdy/spdy-session.js';
import type { KubeStatus } from './upgrade.js';

/** remotecommand protocols we serve over SPDY, in our order of preference (as the kubelet). */
export const REMOTECOMMAND_PROTOCOLS = ['v4.channel.k8s.io', 'v3.channel.k8s.io', 'v2.channel.k8s.io', 'channel.k8s.io'] as const;

/** Terminal size in character cells, as carried by the resize stream/channel. */
export interface TerminalSize {
  width: number;
  height: number;
}

/** What to run (exec) or join (attach), already validated. `command` is empty for attach. */
export interface ExecRequest {
  namespace: string;
  pod: string;
  container: string;
  command: string[];
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
  tty: boolean;
}

/**
 * The caller's side of the streams. Present exactly for the requested channels. `signal`
 * aborts when the caller went away; the backend must then stop (close its upstream).
 */
export interface ExecIO {
  stdin?: Readable;
  stdout?: Writable;
  stderr?: Writable;
  resize?: AsyncIterable<TerminalSize>;
  signal: AbortSignal;
}

/** Outcome of an exec/attach: an exit code, or a Status to pass through verbatim. */
export type ExecResult = { exitCode: number } | { status: V1Status };

/**
 * Where exec/attach really happen (the delegate pod in a target cluster, or a fake in tests).
 * Resolves when the remote command/attach session ended; rejects on transport failure.
 * Implementations must not end `io.stdout`/`io.stderr` before all output was written.
 */
export interface ExecBackend {
  exec(req: ExecRequest, io: ExecIO): Promise<ExecResult>;
  attach(req: ExecRequest, io: ExecIO): Promise<ExecResult>;
}

/**
 * Parses exec/attach query parameters as the kubelet does. Pure. Accepts the kubelet-side
 * names the apiserver sends (`input`, `output`, `error`) and the public ones (`stdin`,
 * `stdout`, `stderr`); "1" or "true" mean yes. Throws a message (string) on invalid input.
 */
export function parseExecQuery(query: URLSearchParams, target: { namespace: string; pod: string; container: string }, mode: 'exec' | 'attach'): ExecRequest | string {
  const flag = (...names: string[]) => names.some((n) => ['1', 'true'].includes((query.get(n) ?? '').toLowerCase()));
  const tty = flag('tty');
  const req: ExecRequest = {
    ...target,
    command: mode === 'exec' ? query.getAll('command') : [],
    stdin: flag('input', 'stdin'),
    stdout: flag('output', 'stdout'),
    // With a TTY, stderr is merged into stdout by the terminal; the kubelet drops it silently.
    stderr: flag('error', 'stderr') && !tty,
    tty,
  };
  if (!req.stdin && !req.stdout && !flag('error', 'stderr')) {
    return 'you must specify at least 1 of stdin, stdout, stderr';
  }
  if (mode === 'exec' && req.command.length === 0) return 'you must specify at least one command for the container';
  if (!target.container) return 'a container name is required';
  return req;
}

/** The v4 Status for a finished command (exit code clamped to 0..255 as the client parses it). Pure. */
export function exitStatus(exitCode: number): KubeStatus {
  if (exitCode === 0) return { metadata: {}, status: 'Success' };
  const code = Math.min(255, Math.max(0, Math.trunc(exitCode))) || 1;
  return {
    metadata: {},
    status: 'Failure',
    message: `command terminated with non-zero exit code: exit status ${code}`,
    reason: 'NonZeroExitCode',
    details: { causes: [{ reason: 'ExitCode', message: String(code) }] },
  };
}

/** A Status for an internal failure (upstream unreachable, timeout...). Pure. */
export function internalErrorStatus(message: string): KubeStatus {
  return { metadata: {}, status: 'Failure', message, reason: 'InternalError', details: { causes: [{ message }] }, code: 500 };
}

/**
 * Longest resize line we keep: `{"Width":65535,"Height":65535}` is 30 bytes, so 1 KiB leaves
 * room for whitespace and odd key spellings while bounding what a client can make us hold.
 */
export const MAX_RESIZE_LINE_BYTES = 1024;

/**
 * Splits the resize stream into sizes. The client writes one JSON object per line
 * (`{"Width":80,"Height":24}\n`), possibly split across DATA frames; keys are matched
 * case-insensitively as Go's decoder does. Malformed lines are skipped, and so is a line
 * longer than {@link MAX_RESIZE_LINE_BYTES} (its bytes are dropped as they come, up to its
 * newline). Linear: each byte is scanned once (the old parser rescanned its whole backlog per
 * chunk while a line without a newline grew without bound).
 */
export async function* parseResizeStream(input: AsyncIterable<Buffer | string>): AsyncIterable<TerminalSize> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let skipping = false;
  const parseLine = (raw: string): TerminalSize | undefined => {
    const line = raw.trim();
    if (!line) return undefined;
    try {
      const obj = JSON.parse(line) as Record<string, unknown>;
      const get = (k: string) => Object.entries(obj).find(([key]) => key.toLowerCase() === k)?.[1];
      const width = Number(get('width'));
      const height = Number(get('height'));
      if (Number.isInteger(width) && Number.isInteger(height) && width >= 0 && height >= 0) return { width, height };
    } catch {
      /* skip malformed */
    }
    return undefined;
  };
  const take = (piece: Buffer) => {
    if (skipping) return;
    if (pendingBytes + piece.length > MAX_RESIZE_LINE_BYTES) {
      skipping = true;
      pending = [];
      pendingBytes = 0;
      return;
    }
    pending.push(piece);
    pendingBytes += piece.length;
  };
  for await (const c of input) {
    const chunk = typeof c === 'string' ? Buffer.from(c) : c;
    let from = 0;
    let nl: number;
    while ((nl = chunk.indexOf(0x0a, from)) >= 0) {
      take(chunk.subarray(from, nl));
      const line = skipping ? undefined : Buffer.concat(pending, pendingBytes).toString('utf8');
      pending = [];
      pendingBytes = 0;
      skipping = false;
      from = nl + 1;
      const size = line === undefined ? undefined : parseLine(line);
      if (size) yield size;
    }
    // Copy the tail: a subarray would pin the whole chunk while the line waits for its end.
    if (from < chunk.length) take(Buffer.from(chunk.subarray(from)));
  }
  const last = skipping ? undefined : parseLine(Buffer.concat(pending, pendingBytes).toString('utf8'));
  if (last) yield last;
}

/** Options for {@link serveRemoteCommand}. */
export interface RemoteCommandOptions {
  session: SpdySession;
  /** The negotiated protocol (one of REMOTECOMMAND_PROTOCOLS). */
  protocol: string;
  request: ExecRequest;
  mode: 'exec' | 'attach';
  backend: ExecBackend;
  /** How long the client has to create all its streams (kubelet default 30 s). */
  streamCreationTimeoutMs?: number;
}

type StreamType = 'error' | 'stdin' | 'stdout' | 'stderr' | 'resize';

/**
 * Runs one exec/attach over an accepted SPDY session (the 101 is already written): waits for
 * the client's streams (`streamtype` header: error, stdin, stdout, stderr, resize), calls the
 * backend, then ends stdout/stderr, writes the outcome on the error stream (v4: a Status JSON;
 * older protocols: plain text, only on failure) and closes the session. Resolves with the
 * result; never rejects (failures are reported to the client on the error stream).
 */
export async function serveRemoteCommand(opts: RemoteCommandOptions): Promise<ExecResult | { error: string }> {
  const { session, request } = opts;
  const wantResize = request.tty && opts.protocol !== 'channel.k8s.io' && opts.protocol !== 'v2.channel.k8s.io';
  const expected = new Set<StreamType>(['error']);
  if (request.stdin) expected.add('stdin');
  if (request.stdout) expected.add('stdout');
  if (request.stderr) expected.add('stderr');
  if (wantResize) expected.add('resize');

  const streams = new Map<StreamType, SpdyStream>();
  const ac = new AbortController();
  session.once('close', () => ac.abort());

  const gathered = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => done(false), opts.streamCreationTimeoutMs ?? 30_000);
    const onStream = (stream: SpdyStream) => {
      const type = (headerValue(stream.headers, 'streamType') ?? '').toLowerCase() as StreamType;
      if (!expected.has(type) || streams.has(type)) {
        // Unknown or duplicate stream types are ignored, as the kubelet does.
        stream.resume();
        return;
      }
      streams.set(type, stream);
      if (streams.size === expected.size) done(true);
    };
    const onClose = () => done(false);
    const done = (ok: boolean) => {
      clearTimeout(timer);
      session.off('stream', onStream);
      session.off('close', onClose);
      resolve(ok);
    };
    session.on('stream', onStream);
    session.once('close', onClose);
  });
  if (!gathered) {
    const message = 'timed out waiting for client to create streams';
    const errStream = streams.get('error');
    if (errStream && !session.isClosed) await finishError(errStream, opts.protocol, internalErrorStatus(message));
    if (!session.isClosed) await session.close();
    return { error: message };
  }

  // Streams opened after the set is complete have no reader: refuse them rather than let
  // their data fill a buffer and stall the session.
  session.on('stream', (late: SpdyStream) => late.reset(RstStatus.REFUSED_STREAM));
  const errorStream = streams.get('error')!;
  // The client half-closes the error stream right away; keep it flowing so it never blocks.
  errorStream.resume();
  const stdout = streams.get('stdout');
  const stderr = streams.get('stderr');
  // A backend that writes after we ended an output breaks its contract; the write fails and
  // resets that stream. Without a listener, that error would end the process.
  for (const out of [stdout, stderr]) out?.on('error', () => undefined);
  const resizeStream = streams.get('resize');
  const io: ExecIO = {
    stdin: streams.get('stdin'),
    stdout,
    stderr,
    resize: resizeStream ? parseResizeStream(resizeStream) : undefined,
    signal: ac.signal,
  };

  let outcome: ExecResult | { error: string };
  try {
    outcome = await (opts.mode === 'exec' ? opts.backend.exec(request, io) : opts.backend.attach(request, io));
  } catch (err) {
    outcome = { error: err instanceof Error ? err.message : String(err) };
  }
  if (session.isClosed) return outcome;

  // Client logic: it reads stdout/stderr to EOF, then the error stream; FIN outputs first.
  await Promise.all([stdout, stderr].map((s) => (s ? endAndWait(s) : Promise.resolve())));
  await finishError(errorStream, opts.protocol, outcomeStatus(outcome));
  streams.get('stdin')?.resume();
  await session.close();
  return outcome;
}

/** The Status that reports an outcome on the error channel. Pure. */
export function outcomeStatus(outcome: ExecResult | { error: string }): KubeStatus {
  if ('error' in outcome) return internalErrorStatus(outcome.error);
  if ('status' in outcome) return outcome.status as KubeStatus;
  return exitStatus(outcome.exitCode);
}

/** Ends a writable and waits until everything written was flushed (or it failed). */
export async function endAndWait(stream: Writable): Promise<void> {
  if (stream.writableFinished || stream.destroyed) return;
  stream.end();
  const ac = new AbortController();
  try {
    await Promise.race([once(stream, 'finish', { signal: ac.signal }), once(stream, 'close', { signal: ac.signal })]);
  } catch {
    /* stream errored: nothing more to flush */
  } finally {
    ac.abort();
  }
}

async function finishError(errorStream: SpdyStream, protocol: string, status: KubeStatus): Promise<void> {
  if (protocol === 'v4.channel.k8s.io') {
    errorStream.write(JSON.stringify(status));
  } else if (status.status !== 'Success') {
    // v1-v3 clients read the error stream as plain text and treat any text as failure.
    errorStream.write(status.message ?? 'error');
  }
  await endAndWait(errorStream);
}
