import { EventEmitter, once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { Duplex } from 'node:stream';
import { encodeFrame, FrameParser, RstStatus, SpdyProtocolError, type SpdyFrame } from './frames.js';
import { decodeHeaderBlock, HeaderCompressor, HeaderDecompressor, MAX_HEADER_BLOCK_BYTES, MAX_HEADER_PAIRS, type SpdyHeaders } from './header-codec.js';

/**
 * A SPDY/3.1 session over one byte stream (the socket left after an HTTP `Upgrade: SPDY/3.1`),
 * in the dialect of moby/spdystream, which client-go and the kube-apiserver speak:
 *
 * - streams carry only application headers (`streamtype`, `port`, `requestid`), no `:method`;
 * - the server replies to every SYN_STREAM with an empty SYN_REPLY;
 * - spdystream never sends WINDOW_UPDATE and ignores received ones, so we do not enforce send
 *   windows (a server that did would stall after 64 KiB); back-pressure comes from TCP instead.
 *   For peers that do honour windows we still return credit with per-stream WINDOW_UPDATEs.
 *
 * Role `server` accepts client-initiated streams (odd ids) and emits `stream`; role `client`
 * (used by unit tests and benchmarks) opens them with `openStream`.
 *
 * Events: `stream` (SpdyStream, server role), `goaway` (status), `error` (Error, protocol
 * failures; the session then closes), `close`.
 *
 * Every byte from the peer is treated as hostile, and memory per session is bounded:
 * - frames are taken from the parser one at a time and handled in order; while a handler
 *   waits (header inflation, a reply behind a blocked write, a stream whose reader is full)
 *   received bytes queue up to {@link INPUT_HIGH_WATER_BYTES}, then the socket is paused, so
 *   TCP pushes back on the peer (30 MB of unread PINGs used to become 830 MB of heap);
 * - outgoing frames queued behind a blocked write stop the reading of new frames once
 *   {@link MAX_QUEUED_OUTGOING_FRAMES} are waiting;
 * - at most `maxConcurrentStreams` streams are open; more are refused with RST_STREAM
 *   REFUSED_STREAM, as an HTTP/2 server refuses streams past SETTINGS_MAX_CONCURRENT_STREAMS;
 * - the header blocks of one stream (SYN_STREAM, then HEADERS or SYN_REPLY) inflate to at
 *   most {@link MAX_HEADER_BLOCK_BYTES} together, as one block may; past it is a protocol error;
 * - a protocol error sends GOAWAY without waiting behind queued frames and drops the
 *   connection, at once if the peer does not read.
 */
export interface SpdySessionOptions {
  role: 'server' | 'client';
  /** Largest DATA payload we send; Go writers use 32 KiB. */
  maxDataFrameBytes?: number;
  /** Largest frame we accept, bounding memory per frame. */
  maxIncomingFrameBytes?: number;
  /** Received bytes on a stream before we return window credit to the peer. */
  windowUpdateThresholdBytes?: number;
  /** Streams open at once (either direction); the peer's next SYN_STREAM is refused. */
  maxConcurrentStreams?: number;
}

/** Unparsed bytes queued while a frame handler waits, before the socket is paused. */
export const INPUT_HIGH_WATER_BYTES = 64 * 1024;
/** Outgoing frames waiting for the socket before no more incoming frames are handled. */
export const MAX_QUEUED_OUTGOING_FRAMES = 64;
/** Default for `maxConcurrentStreams`: port-forward uses 2 per connection, exec up to 5. */
export const DEFAULT_MAX_CONCURRENT_STREAMS = 64;
/** Longest run of frame handling before the session yields to the event loop. */
const PUMP_SLICE_MS = 5;
/** How long a GOAWAY after a protocol error may take to leave before the socket is destroyed. */
const GOAWAY_FLUSH_TIMEOUT_MS = 1_000;

const DEFAULT_MAX_DATA_FRAME_BYTES = 32 * 1024;
const DEFAULT_MAX_INCOMING_FRAME_BYTES = 1024 * 1024;
// Half the SPDY/3 default initial window (64 KiB): return credit before the peer would stall.
const DEFAULT_WINDOW_UPDATE_THRESHOLD_BYTES = 32 * 1024;

/** One SPDY stream as a Duplex: reads are the peer's DATA, `end()` sends FIN (half-close). */
export class SpdyStream extends Duplex {
  /** Set when the peer reset the stream (RST_STREAM status) . */
  resetStatus: number | undefined;
  /** Headers received later in HEADERS frames are merged here. */
  readonly headers: SpdyHeaders;
  /** @internal */ localFin = false;
  /** @internal */ remoteFin = false;
  /** @internal */ unackedBytes = 0;
  /** @internal Inflated bytes of the header blocks received for this stream. */ headerBytes = 0;

  constructor(
    readonly id: number,
    headers: SpdyHeaders,
    private readonly session: SpdySession,
  ) {
    super({ allowHalfOpen: true });
    this.headers = headers;
  }

  override _read(): void {
    this.session.resumeReading();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.localFin || this.resetStatus !== undefined) return cb();
    this.session.sendData(this.id, chunk, false).then(
      () => cb(),
      () => cb(),
    );
  }

  override _final(cb: (err?: Error | null) => void): void {
    if (this.localFin || this.resetStatus !== undefined) return cb();
    this.localFin = true;
    this.session.sendData(this.id, Buffer.alloc(0), true).then(
      () => {
        this.session.maybeForget(this);
        cb();
      },
      () => cb(),
    );
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    // Destroying a stream that is still open on either side cancels it for the peer too.
    if (!(this.localFin && this.remoteFin) && this.resetStatus === undefined) {
      this.resetStatus = RstStatus.CANCEL;
      void this.session.sendReset(this.id, RstStatus.CANCEL).catch(() => undefined);
    }
    this.session.forget(this);
    cb(err);
  }

  /** Aborts the stream with RST_STREAM (default CANCEL). */
  reset(status: number = RstStatus.CANCEL): void {
    if (this.resetStatus !== undefined) return;
    this.resetStatus = status;
    void this.session.sendReset(this.id, status).catch(() => undefined);
    this.destroy();
  }

  /** @internal called by the session for each received DATA frame. */
  deliver(data: Buffer, fin: boolean): void {
    // A destroyed stream would refuse the push and leave the session paused for good.
    if (this.remoteFin || this.destroyed) return;
    if (data.length > 0 && !this.push(data)) this.session.pauseReading();
    if (fin) {
      this.remoteFin = true;
      this.push(null);
      this.session.maybeForget(this);
    }
  }
}

export class SpdySession extends EventEmitter {
  private readonly parser: FrameParser;
  private readonly compressor = new HeaderCompressor();
  private readonly decompressor = new HeaderDecompressor();
  private readonly streams = new Map<number, SpdyStream>();
  private readonly pendingReplies = new Map<number, { resolve: (s: SpdyStream) => void; reject: (e: Error) => void }>();
  private readonly pendingPings = new Map<number, () => void>();
  private outChain: Promise<void> = Promise.resolve();
  private outQueued = 0;
  private pumping = false;
  private inputEnded = false;
  private failed = false;
  private socketPaused = false;
  private lastPeerStreamId = 0;
  private nextStreamId: number;
  private nextPingId: number;
  private closed = false;
  private goneAway = false;
  private pausedByUs = false;
  private readonly maxDataFrameBytes: number;
  private readonly windowUpdateThresholdBytes: number;
  private readonly maxConcurrentStreams: number;

  constructor(
    private readonly socket: Duplex,
    private readonly opts: SpdySessionOptions,
  ) {
    super();
    this.parser = new FrameParser(opts.maxIncomingFrameBytes ?? DEFAULT_MAX_INCOMING_FRAME_BYTES);
    this.maxDataFrameBytes = opts.maxDataFrameBytes ?? DEFAULT_MAX_DATA_FRAME_BYTES;
    this.windowUpdateThresholdBytes = opts.windowUpdateThresholdBytes ?? DEFAULT_WINDOW_UPDATE_THRESHOLD_BYTES;
    this.maxConcurrentStreams = opts.maxConcurrentStreams ?? DEFAULT_MAX_CONCURRENT_STREAMS;
    // Clients use odd stream and ping ids, servers even ones (SPDY/3 sections 2.3.2, 2.6.5).
    this.nextStreamId = opts.role === 'client' ? 1 : 2;
    this.nextPingId = opts.role === 'client' ? 1 : 2;
  }

  /**
   * Starts reading frames. `head` holds bytes the HTTP parser read past the upgrade headers;
   * they are the first frames of the session.
   */
  start(head?: Buffer): this {
    this.socket.on('data', (chunk: Buffer) => this.onBytes(chunk));
    // Frames already received are still handled (the pump ends the session once idle).
    const gone = () => {
      this.inputEnded = true;
      if (!this.pumping) this.onSocketGone();
    };
    this.socket.on('end', gone);
    this.socket.on('close', gone);
    this.socket.on('error', gone);
    if (head && head.length > 0) this.onBytes(head);
    return this;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Number of streams still open in at least one direction. */
  get openStreamCount(): number {
    return this.streams.size;
  }

  /** Client role: opens a stream and resolves once the peer's SYN_REPLY arrives. */
  openStream(headers: SpdyHeaders, opts: { fin?: boolean } = {}): Promise<SpdyStream> {
    if (this.closed || this.goneAway) return Promise.reject(new Error('SPDY session is closed'));
    const id = this.nextStreamId;
    this.nextStreamId += 2;
    const stream = new SpdyStream(id, headers, this);
    if (opts.fin) stream.localFin = true;
    this.streams.set(id, stream);
    const replied = new Promise<SpdyStream>((resolve, reject) => this.pendingReplies.set(id, { resolve, reject }));
    void this.enqueue(async () =>
      encodeFrame({
        type: 'syn_stream',
        streamId: id,
        associatedStreamId: 0,
        priority: 0,
        slot: 0,
        fin: !!opts.fin,
        unidirectional: false,
        headerBlock: await this.compressor.compress(headers),
      }),
    ).catch((err: Error) => this.pendingReplies.get(id)?.reject(err));
    if (opts.fin) stream.end();
    return replied;
  }

  /** Sends a PING and resolves with the round trip in milliseconds. */
  async ping(): Promise<number> {
    const id = this.nextPingId;
    this.nextPingId = this.nextPingId + 2 > 0x7fffffff ? (this.nextPingId % 2) + 1 : this.nextPingId + 2;
    const started = process.hrtime.bigint();
    const answered = new Promise<void>((resolve) => this.pendingPings.set(id, resolve));
    await this.enqueue(() => encodeFrame({ type: 'ping', id }));
    await answered;
    return Number(process.hrtime.bigint() - started) / 1e6;
  }

  /**
   * Ends the session politely: GOAWAY (status OK), then ends the socket once queued frames
   * are written. Streams still open are left to the socket close.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    if (!this.goneAway) {
      this.goneAway = true;
      await this.enqueue(() => encodeFrame({ type: 'goaway', lastGoodStreamId: this.lastPeerStreamId, status: 0 })).catch(() => undefined);
    }
    await this.outChain;
    this.socket.end();
  }

  /** Tears the session down immediately. */
  destroy(err?: Error): void {
    if (!this.closed && err) this.emit('error', err);
    this.socket.destroy();
    this.onSocketGone();
  }

  /** @internal Sends data on a stream, split into frames; resolves when the socket took it. */
  sendData(streamId: number, data: Buffer, fin: boolean): Promise<void> {
    if (data.length <= this.maxDataFrameBytes) {
      return this.enqueue(() => encodeFrame({ type: 'data', streamId, fin, data }));
    }
    let last: Promise<void> = Promise.resolve();
    for (let off = 0; off < data.length; off += this.maxDataFrameBytes) {
      const piece = data.subarray(off, off + this.maxDataFrameBytes);
      const isLast = off + this.maxDataFrameBytes >= data.length;
      last = this.enqueue(() => encodeFrame({ type: 'data', streamId, fin: fin && isLast, data: piece }));
    }
    return last;
  }

  /** @internal */
  sendReset(streamId: number, status: number): Promise<void> {
    return this.enqueue(() => encodeFrame({ type: 'rst_stream', streamId, status }));
  }

  /** @internal TCP back-pressure: a stream's read buffer is full; no frame is handled until it drains. */
  pauseReading(): void {
    this.pausedByUs = true;
    this.updateSocketFlow();
  }

  /** @internal A stream wants more data. */
  resumeReading(): void {
    if (this.pausedByUs) {
      this.pausedByUs = false;
      this.pump();
    }
  }

  /** Bytes received and not yet handled: frames queued in the parser (test and metrics aid). */
  get queuedInputBytes(): number {
    return this.parser.pendingBytes;
  }

  /** @internal Drops a stream closed in both directions. */
  maybeForget(stream: SpdyStream): void {
    if (stream.localFin && stream.remoteFin) this.forget(stream);
  }

  /** @internal */
  forget(stream: SpdyStream): void {
    if (this.streams.get(stream.id) === stream) this.streams.delete(stream.id);
  }

  /** Writes frames in order; a frame built asynchronously (compression) holds later frames. */
  private enqueue(build: () => Buffer | Promise<Buffer>): Promise<void> {
    this.outQueued++;
    const job = this.outChain.then(async () => {
      if (this.closed || this.failed || this.socket.destroyed) throw new Error('SPDY session is closed');
      const bytes = await build();
      if (!this.socket.write(bytes)) await this.waitDrain();
    });
    this.outChain = job.catch(() => undefined).finally(() => this.outQueued--);
    return job;
  }

  private async waitDrain(): Promise<void> {
    // A socket already gone emits neither drain nor close again.
    if (this.socket.destroyed || this.socket.writableEnded) return;
    const ac = new AbortController();
    try {
      await Promise.race([once(this.socket, 'drain', { signal: ac.signal }), once(this.socket, 'close', { signal: ac.signal })]);
    } catch {
      /* socket error: the close handler tears the session down */
    } finally {
      ac.abort();
    }
  }

  private onBytes(chunk: Buffer): void {
    if (this.closed || this.failed) return;
    this.parser.append(chunk);
    this.pump();
  }

  /** Starts the frame loop unless it runs; otherwise only re-evaluates socket flow. */
  private pump(): void {
    if (this.pumping) return this.updateSocketFlow();
    this.pumping = true;
    void this.pumpLoop().finally(() => {
      this.pumping = false;
      // A stream may have drained between the loop's exit and now (its _read found the loop
      // still marked running): input left queued would then wait for bytes that never come.
      if (!this.pausedByUs && !this.closed && !this.failed && this.parser.queuedBytes > 0) return this.pump();
      this.updateSocketFlow();
      if (this.inputEnded) this.onSocketGone();
    });
  }

  /**
   * Takes frames from the parser one at a time and handles each before the next, so input is
   * parsed no faster than it is handled. Stops when no complete frame is left or a stream's
   * reader is full (its `_read` restarts the loop).
   */
  private async pumpLoop(): Promise<void> {
    let sliceStartedMs = performance.now();
    while (!this.closed && !this.failed && !this.pausedByUs) {
      // Frames whose handling completes synchronously (PINGs, DATA) would otherwise run back to
      // back in one macrotask; yield now and then so other connections and timers get a turn.
      if (performance.now() - sliceStartedMs > PUMP_SLICE_MS) {
        this.updateSocketFlow();
        await new Promise<void>((resolve) => setImmediate(resolve));
        sliceStartedMs = performance.now();
        continue;
      }
      // Outgoing frames pile up behind a blocked write: wait for them before handling more.
      if (this.outQueued >= MAX_QUEUED_OUTGOING_FRAMES) {
        this.updateSocketFlow();
        await this.outChain;
        continue;
      }
      let frame: SpdyFrame | undefined;
      try {
        frame = this.parser.next();
        if (!frame) return;
        this.updateSocketFlow();
        await this.handleFrame(frame);
      } catch (err) {
        this.protocolFailure(err as Error);
        return;
      }
    }
  }

  /** Pauses the socket while a stream is full or unhandled input passed the high-water mark. */
  private updateSocketFlow(): void {
    const pause = !this.closed && (this.pausedByUs || this.parser.queuedBytes >= INPUT_HIGH_WATER_BYTES);
    if (pause && !this.socketPaused) {
      this.socketPaused = true;
      this.socket.pause();
    } else if (!pause && this.socketPaused) {
      this.socketPaused = false;
      this.socket.resume();
    }
  }

  private protocolFailure(err: Error): void {
    if (this.closed || this.failed) return;
    this.failed = true;
    const wrapped = err instanceof SpdyProtocolError ? err : new SpdyProtocolError(err.message);
    this.goneAway = true;
    // GOAWAY status 1 = PROTOCOL_ERROR, written past the queue: frames waiting there are moot,
    // and a peer that does not read must not keep the session alive.
    const socket = this.socket;
    if (!socket.destroyed && !socket.writableEnded) {
      socket.end(encodeFrame({ type: 'goaway', lastGoodStreamId: this.lastPeerStreamId, status: 1 }));
      const timer = setTimeout(() => socket.destroy(), GOAWAY_FLUSH_TIMEOUT_MS);
      timer.unref();
      socket.once('close', () => clearTimeout(timer));
    }
    this.emit('error', wrapped);
    this.onSocketGone();
  }

  // eslint-disable-next-line max-lines-per-function -- one switch over the SPDY frame types, a short case each
  private async handleFrame(frame: SpdyFrame): Promise<void> {
    if (this.closed) return;
    switch (frame.type) {
      case 'syn_stream':
        return this.onSynStream(frame);
      case 'syn_reply': {
        // A server opens no stream, so it is owed no reply (and the peer's streams would
        // collect its headers).
        if (this.opts.role === 'server') throw new SpdyProtocolError(`SYN_REPLY for stream ${frame.streamId}, which the server did not open`);
        // Always inflate, even if nobody waits for this reply, to keep zlib state in step.
        const block = await this.decompressor.decompressRaw(frame.headerBlock);
        const headers = decodeHeaderBlock(block);
        const stream = this.streams.get(frame.streamId);
        const pending = this.pendingReplies.get(frame.streamId);
        this.pendingReplies.delete(frame.streamId);
        if (stream) {
          this.mergeHeaders(stream, headers, block.length);
          pending?.resolve(stream);
          if (frame.fin) stream.deliver(Buffer.alloc(0), true);
        }
        return;
      }
      case 'headers': {
        const block = await this.decompressor.decompressRaw(frame.headerBlock);
        const headers = decodeHeaderBlock(block);
        const stream = this.streams.get(frame.streamId);
        if (stream) {
          this.mergeHeaders(stream, headers, block.length);
          stream.emit('headers', headers);
          if (frame.fin) stream.deliver(Buffer.alloc(0), true);
        }
        return;
      }
      case 'data': {
        const stream = this.streams.get(frame.streamId);
        // Data for a stream we no longer know (e.g. after a reset) is dropped, as spdystream does.
        if (!stream) return;
        stream.deliver(frame.data, frame.fin);
        stream.unackedBytes += frame.data.length;
        if (stream.unackedBytes >= this.windowUpdateThresholdBytes && !stream.remoteFin) {
          const delta = stream.unackedBytes;
          stream.unackedBytes = 0;
          void this.enqueue(() => encodeFrame({ type: 'window_update', streamId: stream.id, deltaWindowSize: delta })).catch(() => undefined);
        }
        return;
      }
      case 'rst_stream': {
        const stream = this.streams.get(frame.streamId);
        const pending = this.pendingReplies.get(frame.streamId);
        this.pendingReplies.delete(frame.streamId);
        pending?.reject(new Error(`stream ${frame.streamId} reset by peer (status ${frame.status})`));
        if (stream) {
          stream.resetStatus = frame.status;
          stream.localFin = true;
          if (!stream.remoteFin) {
            stream.remoteFin = true;
            stream.push(null);
          }
          this.forget(stream);
          stream.emit('reset', frame.status);
        }
        return;
      }
      case 'ping': {
        const ours = (frame.id % 2 === 1) === (this.opts.role === 'client');
        if (ours) {
          this.pendingPings.get(frame.id)?.();
          this.pendingPings.delete(frame.id);
        } else {
          await this.enqueue(() => encodeFrame({ type: 'ping', id: frame.id }));
        }
        return;
      }
      case 'goaway':
        this.goneAway = true;
        this.emit('goaway', frame.status);
        return;
      case 'settings':
      case 'window_update':
        // No send-side flow control: spdystream never refills windows (see class comment).
        return;
      case 'unknown_control':
        if (frame.version !== 3) throw new SpdyProtocolError(`unsupported SPDY version ${frame.version}`);
        return;
    }
  }

  /** Adds a later header block to a stream's headers; throws past the stream's bounds. */
  private mergeHeaders(stream: SpdyStream, headers: SpdyHeaders, blockBytes: number): void {
    // Each block is bounded, but a stream could collect blocks frame after frame: 100 names
    // of 64 KiB each, on every open stream, from a few KiB of compressed frames.
    stream.headerBytes += blockBytes;
    if (stream.headerBytes > MAX_HEADER_BLOCK_BYTES) {
      throw new SpdyProtocolError(`stream ${stream.id} has more than ${MAX_HEADER_BLOCK_BYTES} bytes of headers`);
    }
    Object.assign(stream.headers, headers);
    if (Object.keys(stream.headers).length > MAX_HEADER_PAIRS) {
      throw new SpdyProtocolError(`stream ${stream.id} has more than ${MAX_HEADER_PAIRS} header names`);
    }
  }

  private async onSynStream(frame: Extract<SpdyFrame, { type: 'syn_stream' }>): Promise<void> {
    const block = await this.decompressor.decompressRaw(frame.headerBlock);
    const headers = decodeHeaderBlock(block);
    const peerParity = this.opts.role === 'server' ? 1 : 0;
    if (frame.streamId === 0 || frame.streamId % 2 !== peerParity || frame.streamId <= this.lastPeerStreamId) {
      await this.sendReset(frame.streamId, RstStatus.PROTOCOL_ERROR);
      return;
    }
    this.lastPeerStreamId = frame.streamId;
    if (this.goneAway || this.opts.role === 'client' || this.streams.size >= this.maxConcurrentStreams) {
      await this.sendReset(frame.streamId, RstStatus.REFUSED_STREAM);
      return;
    }
    const stream = new SpdyStream(frame.streamId, headers, this);
    stream.headerBytes = block.length;
    this.streams.set(frame.streamId, stream);
    if (frame.unidirectional) stream.localFin = true;
    // Reply before anything else is written on the stream: spdystream drops DATA that
    // arrives before the reply, and the client waits for it to consider the stream open.
    // Compress inside the write job: compression order must equal wire order.
    await this.enqueue(async () =>
      encodeFrame({
        type: 'syn_reply',
        streamId: frame.streamId,
        fin: false,
        headerBlock: await this.compressor.compress({}),
      }),
    );
    if (frame.fin) stream.deliver(Buffer.alloc(0), true);
    this.emit('stream', stream);
  }

  private onSocketGone(): void {
    if (this.closed) return;
    this.closed = true;
    this.socketPaused = false;
    for (const { reject } of this.pendingReplies.values()) reject(new Error('SPDY session closed'));
    this.pendingReplies.clear();
    for (const resolve of this.pendingPings.values()) resolve();
    this.pendingPings.clear();
    for (const stream of this.streams.values()) {
      stream.localFin = true;
      if (!stream.remoteFin) {
        stream.remoteFin = true;
        stream.push(null);
      }
    }
    this.streams.clear();
    this.compressor.close();
    this.decompressor.close();
    this.emit('close');
  }
}
