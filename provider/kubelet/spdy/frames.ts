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
 * Incremental frame parser: feed it socket chunks with `push`, get complete frames back.
 * Not reentrant. `maxPayloadBytes` bounds memory per frame (a frame larger than that is a
 * protocol error rather than an allocation of up to 16 MiB).
 */
export class FrameParser {
  private buffered: Buffer = Buffer.alloc(0);

  constructor(private readonly maxPayloadBytes: number = MAX_FRAME_PAYLOAD_BYTES) {}

  /** Appends bytes and returns every frame now complete, in wire order. */
  push(chunk: Buffer): SpdyFrame[] {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    const frames: SpdyFrame[] = [];
    let offset = 0;
    while (this.buffered.length - offset >= 8) {
      const word0 = this.buffered.readUInt32BE(offset);
      const word1 = this.buffered.readUInt32BE(offset + 4);
      const length = word1 & 0xffffff;
      const flags = word1 >>> 24;
      if (length > this.maxPayloadBytes) {
        throw new SpdyProtocolError(`frame of ${length} bytes exceeds limit ${this.maxPayloadBytes}`);
      }
      if (this.buffered.length - offset < 8 + length) break;
      // Copy the payload out so frames do not pin the whole socket chunk in memory.
      const payload = Buffer.from(this.buffered.subarray(offset + 8, offset + 8 + length));
      offset += 8 + length;
      if (word0 & 0x80000000) {
        frames.push(decodeControl((word0 >>> 16) & 0x7fff, word0 & 0xffff, flags, payload));
      } else {
        frames.push({ type: 'data', streamId: word0 & 0x7fffffff, fin: (flags & FLAG_FIN) !== 0, data: payload });
      }
    }
    this.buffered = offset === this.buffered.length ? Buffer.alloc(0) : this.buffered.subarray(offset);
    return frames;
  }

  /** Bytes received but not yet forming a complete frame. */
  get pendingBytes(): number {
    return this.buffered.length;
  }
}
