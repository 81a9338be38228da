/**
 * SPDY/3 (and 3.1) frame codec: byte layout only, no header compression (see
 * `header-codec.ts`) and no session state (see `spdy-session.ts`).
 *
 * Layout (all integers big-endian, 8-byte frame header):
 * - control frame: `1` bit + 15-bit version (3), 16-bit type, 8-bit flags, 24-bit length;
 * - data frame: `0` bit + 31-bit stream id, 8-bit flags (`FIN` = 0x01), 24-bit length.
 * Header blocks inside SYN_STREAM / SYN_REPLY / HEADERS are carried here still compressed.
 */

export const SPDY_VERSION = 3;

/** Control frame type codes (SPDY/3 section 2.6). */
export const ControlType = {
  SYN_STREAM: 1,
  SYN_REPLY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PING: 6,
  GOAWAY: 7,
  HEADERS: 8,
  WINDOW_UPDATE: 9,
} as const;

export const FLAG_FIN = 0x01;
export const FLAG_UNIDIRECTIONAL = 0x02;

/** RST_STREAM status codes (SPDY/3 section 2.4.2). */
export const RstStatus = {
  PROTOCOL_ERROR: 1,
  INVALID_STREAM: 2,
  REFUSED_STREAM: 3,
  UNSUPPORTED_VERSION: 4,
  CANCEL: 5,
  INTERNAL_ERROR: 6,
  FLOW_CONTROL_ERROR: 7,
  STREAM_IN_USE: 8,
  STREAM_ALREADY_CLOSED: 9,
} as const;

/** Largest payload a 24-bit length can express. */
export const MAX_FRAME_PAYLOAD_BYTES = 0xffffff;

export type SpdyFrame =
  | { type: 'data'; streamId: number; fin: boolean; data: Buffer }
  | {
      type: 'syn_stream';
      streamId: number;
      associatedStreamId: number;
      priority: number;
      slot: number;
      fin: boolean;
      unidirectional: boolean;
      headerBlock: Buffer;
    }
  | { type: 'syn_reply'; streamId: number; fin: boolean; headerBlock: Buffer }
  | { type: 'rst_stream'; streamId: number; status: number }
  | { type: 'settings'; flags: number; entries: Array<{ flags: number; id: number; value: number }> }
  | { type: 'ping'; id: number }
  | { type: 'goaway'; lastGoodStreamId: number; status: number }
  | { type: 'headers'; streamId: number; fin: boolean; headerBlock: Buffer }
  | { type: 'window_update'; streamId: number; deltaWindowSize: number }
  | { type: 'unknown_control'; version: number; controlType: number; flags: number; payload: Buffer };

/** A frame that cannot be decoded: the session answers with GOAWAY PROTOCOL_ERROR. */
export class SpdyProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SpdyProtocolError';
  }
}

function controlFrame(type: number, flags: number, payload: Buffer): Buffer {
  if (payload.length > MAX_FRAME_PAYLOAD_BYTES) throw new RangeError('SPDY frame payload too large');
  const out = Buffer.alloc(8 + payload.length);
  out.writeUInt16BE(0x8000 | SPDY_VERSION, 0);
  out.writeUInt16BE(type, 2);
  out.writeUInt32BE(((flags & 0xff) << 24) | payload.length, 4);
  payload.copy(out, 8);
  return out;
}

function u31(n: number): number {
  return n & 0x7fffffff;
}

/**
 * Serialises one frame to bytes. Pure. Header blocks must already be compressed. Data
 * payloads larger than 2^24-1 bytes throw; the session splits data into smaller frames.
 */
export function encodeFrame(frame: SpdyFrame): Buffer {
  switch (frame.type) {
    case 'data': {
      if (frame.data.length > MAX_FRAME_PAYLOAD_BYTES) throw new RangeError('SPDY frame payload too large');
      const out = Buffer.alloc(8 + frame.data.length);
      out.writeUInt32BE(u31(frame.streamId), 0);
      out.writeUInt32BE(((frame.fin ? FLAG_FIN : 0) << 24) | frame.data.length, 4);
      frame.data.copy(out, 8);
      return out;
    }
    case 'syn_stream': {
      const fixed = Buffer.alloc(10);
      fixed.writeUInt32BE(u31(frame.streamId), 0);
      fixed.writeUInt32BE(u31(frame.associatedStreamId), 4);
      fixed.writeUInt8((frame.priority & 0x7) << 5, 8);
      fixed.writeUInt8(frame.slot & 0xff, 9);
      const flags = (frame.fin ? FLAG_FIN : 0) | (frame.unidirectional ? FLAG_UNIDIRECTIONAL : 0);
      return controlFrame(ControlType.SYN_STREAM, flags, Buffer.concat([fixed, frame.headerBlock]));
    }
    case 'syn_reply':
    case 'headers': {
      const id = Buffer.alloc(4);
      id.writeUInt32BE(u31(frame.streamId), 0);
      const type = frame.type === 'syn_reply' ? ControlType.SYN_REPLY : ControlType.HEADERS;
      return controlFrame(type, frame.fin ? FLAG_FIN : 0, Buffer.concat([id, frame.headerBlock]));
    }
    case 'rst_stream': {
      const p = Buffer.alloc(8);
      p.writeUInt32BE(u31(frame.streamId), 0);
      p.writeUInt32BE(frame.status >>> 0, 4);
      return controlFrame(ControlType.RST_STREAM, 0, p);
    }
    case 'settings': {
      const p = Buffer.alloc(4 + 8 * frame.entries.length);
      p.writeUInt32BE(frame.entries.length, 0);
      frame.entries.forEach((e, i) => {
        p.writeUInt32BE((((e.flags & 0xff) << 24) | (e.id & 0xffffff)) >>> 0, 4 + 8 * i);
        p.writeUInt32BE(e.value >>> 0, 8 + 8 * i);
      });
      return controlFrame(ControlType.SETTINGS, frame.flags, p);
    }
    case 'ping': {
      const p = Buffer.alloc(4);
      p.writeUInt32BE(frame.id >>> 0, 0);
      return controlFrame(ControlType.PING, 0, p);
    }
    case 'goaway': {
      const p = Buffer.alloc(8);
      p.writeUInt32BE(u31(frame.lastGoodStreamId), 0);
      p.writeUInt32BE(frame.status >>> 0, 4);
      return controlFrame(ControlType.GOAWAY, 0, p);
    }
    case 'window_update': {
      const p = Buffer.alloc(8);
      p.writeUInt32BE(u31(frame.streamId), 0);
      p.writeUInt32BE(u31(frame.deltaWindowSize), 4);
      return controlFrame(ControlType.WINDOW_UPDATE, 0, p);
    }
    case 'unknown_control':
      return controlFrame(frame.controlType, frame.flags, frame.payload);
  }
}

function need(payload: Buffer, bytes: number, what: string): void {
  if (payload.length < bytes) throw new SpdyProtocolError(`${what} frame too short (${payload.length} bytes)`);
}

function decodeControl(version: number, type: number, flags: number, payload: Buffer): SpdyFrame {
  if (version !== SPDY_VERSION) {
    // Unknown versions cannot be parsed safely; keep the bytes so the session can refuse.
    return { type: 'unknown_control', version, controlType: type, flags, payload };
  }
  switch (type) {
    case ControlType.SYN_STREAM:
      need(payload, 10, 'SYN_STREAM');
      return {
        type: 'syn_stream',
        streamId: u31(payload.readUInt32BE(0)),
        associatedStreamId: u31(payload.readUInt32BE(4)),
        priority: payload.readUInt8(8) >> 5,
        slot: payload.readUInt8(9),
        fin: (flags & FLAG_FIN) !== 0,
        unidirectional: (flags & FLAG_UNIDIRECTIONAL) !== 0,
        headerBlock: payload.subarray(10),
      };
    case ControlType.SYN_REPLY:
    case ControlType.HEADERS:
      need(payload, 4, type === ControlType.SYN_REPLY ? 'SYN_REPLY' : 'HEADERS');
      return {
        type: type === ControlType.SYN_REPLY ? 'syn_reply' : 'headers',
        streamId: u31(payload.readUInt32BE(0)),
        fin: (flags & FLAG_FIN) !== 0,
        headerBlock: payload.subarray(4),
      };
    case ControlType.RST_STREAM:
      need(payload, 8, 'RST_STREAM');
      return { type: 'rst_stream', streamId: u31(payload.readUInt32BE(0)), status: payload.readUInt32BE(4) };
    case ControlType.SETTINGS: {
      need(payload, 4, 'SETTINGS');
      const count = payload.readUInt32BE(0);
      need(payload, 4 + 8 * count, 'SETTINGS');
      const entries = [];
      for (let i = 0; i < count; i++) {
        const idWord = payload.readUInt32BE(4 + 8 * i);
        entries.push({ flags: idWord >>> 24, id: idWord & 0xffffff, value: payload.readUInt32BE(8 + 8 * i) });
      }
      return { type: 'settings', flags, entries };
    }
    case ControlType.PING:
      need(payload, 4, 'PING');
      return { type: 'ping', id: payload.readUInt32BE(0) };
    case ControlType.GOAWAY:
      need(payload, 4, 'GOAWAY');
      return {
        type: 'goaway',
        lastGoodStreamId: u31(payload.readUInt32BE(0)),
        // SPDY/2 peers send no status; treat a missing status as OK.
        status: payload.length >= 8 ? payload.readUInt32BE(4) : 0,
      };
    case ControlType.WINDOW_UPDATE:
      need(payload, 8, 'WINDOW_UPDATE');
      return {
        type: 'window_update',
        streamId: u31(payload.readUInt32BE(0)),
        deltaWindowSize: u31(payload.readUInt32BE(4)),
      };
    default:
      // The spec says unknown control frames must be ignored; the session does that.
      return { type: 'unknown_control', version, controlType: type, flags, payload };
  }
}

/**
 * Largest control frame payload we accept. Kubernetes control frames are tiny (a SYN_STREAM
 * with three short headers is under 100 bytes); 16 KiB also bounds what a compressed header
 * block can ask the inflater to produce.
 */
export const MAX_CONTROL_FRAME_PAYLOAD_BYTES = 16 * 1024;

/** Socket chunks smaller than this are merged while queued, so a trickle of tiny chunks costs no object per byte. */
const SMALL_CHUNK_BYTES = 1024;
/** First allocation for a frame payload; it doubles up to the announced length as bytes arrive. */
const INITIAL_PAYLOAD_CAPACITY = 16 * 1024;

/**
 * Incremental frame parser, pull-based: `append` socket chunks, take frames one at a time with
 * `next`, so the caller parses no faster than it handles (and can pause the socket while
 * `queuedBytes` grows). Linear time: every byte is copied once into its frame (the old parser
 * re-copied its whole backlog for every chunk, so a 1 MiB frame sent byte by byte never
 * finished). Memory: the queued input, plus the frame being assembled, whose buffer grows with
 * the bytes received (a peer announcing 1 MiB and sending 8 bytes costs 16 KiB, not 1 MiB).
 * A frame longer than the limit for its kind is a protocol error as soon as its 8-byte header
 * is read. Not reentrant; after it threw, the parser must be dropped.
 */
export class FrameParser {
  private readonly input: Buffer[] = [];
  private inputOffset = 0;
  private inputBytes = 0;
  private readonly header = Buffer.alloc(8);
  private headerFilled = 0;
  private payload: Buffer | undefined;
  private payloadLength = 0;
  private payloadFilled = 0;

  /**
   * @param maxPayloadBytes largest DATA payload (and the bound for control frames when it is smaller)
   * @param maxControlPayloadBytes largest control frame payload
   */
  constructor(
    private readonly maxPayloadBytes: number = MAX_FRAME_PAYLOAD_BYTES,
    private readonly maxControlPayloadBytes: number = MAX_CONTROL_FRAME_PAYLOAD_BYTES,
  ) {}

  /** Queues bytes without parsing them. */
  append(chunk: Buffer): void {
    if (chunk.length === 0) return;
    const last = this.input.length > 1 ? this.input[this.input.length - 1] : undefined;
    if (last && last.length + chunk.length <= SMALL_CHUNK_BYTES) this.input[this.input.length - 1] = Buffer.concat([last, chunk]);
    else this.input.push(chunk);
    this.inputBytes += chunk.length;
  }

  /** The next complete frame, or undefined until more bytes arrive. Throws SpdyProtocolError. */
  next(): SpdyFrame | undefined {
    if (this.headerFilled < 8) {
      this.headerFilled = this.fill(this.header, this.headerFilled, 8);
      if (this.headerFilled < 8) return undefined;
      const length = this.header.readUInt32BE(4) & 0xffffff;
      const control = (this.header.readUInt32BE(0) & 0x80000000) !== 0;
      const limit = control ? Math.min(this.maxControlPayloadBytes, this.maxPayloadBytes) : this.maxPayloadBytes;
      if (length > limit) {
        throw new SpdyProtocolError(`${control ? 'control' : 'data'} frame of ${length} bytes exceeds limit ${limit}`);
      }
      this.payloadLength = length;
      this.payloadFilled = 0;
      this.payload = Buffer.allocUnsafe(Math.min(length, INITIAL_PAYLOAD_CAPACITY));
    }
    while (this.payloadFilled < this.payloadLength && this.inputBytes > 0) {
      if (this.payloadFilled === this.payload!.length) {
        // Grow by doubling: amortised linear, at most twice what was received.
        const grown = Buffer.allocUnsafe(Math.min(this.payloadLength, this.payload!.length * 2));
        this.payload!.copy(grown, 0, 0, this.payloadFilled);
        this.payload = grown;
      }
      this.payloadFilled = this.fill(this.payload!, this.payloadFilled, this.payload!.length);
    }
    if (this.payloadFilled < this.payloadLength) return undefined;
    const payload = this.payload!;
    this.payload = undefined;
    this.headerFilled = 0;
    this.payloadFilled = 0;
    const word0 = this.header.readUInt32BE(0);
    const flags = this.header.readUInt8(4);
    if (word0 & 0x80000000) return decodeControl((word0 >>> 16) & 0x7fff, word0 & 0xffff, flags, payload);
    return { type: 'data', streamId: word0 & 0x7fffffff, fin: (flags & FLAG_FIN) !== 0, data: payload };
  }

  /** Appends bytes and returns every frame now complete, in wire order. */
  push(chunk: Buffer): SpdyFrame[] {
    this.append(chunk);
    const frames: SpdyFrame[] = [];
    for (let f = this.next(); f; f = this.next()) frames.push(f);
    return frames;
  }

  /** Received bytes not yet taken into a frame (what pausing the socket bounds). */
  get queuedBytes(): number {
    return this.inputBytes;
  }

  /** Bytes received but not yet forming a complete frame. */
  get pendingBytes(): number {
    return this.inputBytes + this.headerFilled + this.payloadFilled;
  }

  /** Copies queued input into `target[from..to)`; returns the new fill level. */
  private fill(target: Buffer, from: number, to: number): number {
    let at = from;
    for (let chunk = this.input[0]; at < to && chunk !== undefined; chunk = this.input[0]) {
      const n = Math.min(to - at, chunk.length - this.inputOffset);
      chunk.copy(target, at, this.inputOffset, this.inputOffset + n);
      at += n;
      this.inputOffset += n;
      this.inputBytes -= n;
      if (this.inputOffset === chunk.length) {
        this.input.shift();
        this.inputOffset = 0;
      }
    }
    return at;
  }
}
