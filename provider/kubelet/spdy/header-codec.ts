import zlib from 'node:zlib';
import { spdyHeaderDictionary } from './dictionary.js';
import { SpdyProtocolError } from './frames.js';

/**
 * SPDY/3 name/value header blocks.
 *
 * Uncompressed layout: uint32 pair count, then per pair uint32 name length, lowercase name,
 * uint32 value length, value (several values joined by NUL). Compression uses ONE zlib stream
 * per direction per connection, primed with the SPDY/3 dictionary, each block ended with
 * Z_SYNC_FLUSH: a block can only be decoded by the inflater that saw all earlier blocks, which
 * is why the compressor and decompressor below are long-lived objects owned by a session.
 */

/** Header names (lowercase) to their values; a name may carry several values. */
export type SpdyHeaders = Record<string, string[]>;

/**
 * Upper bound for one decompressed header block. Kubernetes blocks are a few dozen bytes
 * (`streamtype`, `port`, `requestid`); zlib can expand about 1000:1, so the bound is enforced
 * while inflating, not after (see {@link SyncFlushPipe}).
 */
export const MAX_HEADER_BLOCK_BYTES = 64 * 1024;

/** Upper bound for name/value pairs in one block, and for values (NUL-separated) in total. */
export const MAX_HEADER_PAIRS = 100;
export const MAX_HEADER_VALUES = 1000;

/**
 * Serialises headers to an uncompressed block. Pure. Names are lowercased (Go's framer rejects
 * uppercase names with a connection-fatal error); multiple values are joined by NUL.
 */
export function encodeHeaderBlock(headers: SpdyHeaders): Buffer {
  const entries = Object.entries(headers);
  const parts: Buffer[] = [];
  const count = Buffer.alloc(4);
  count.writeUInt32BE(entries.length, 0);
  parts.push(count);
  for (const [name, values] of entries) {
    const n = Buffer.from(name.toLowerCase(), 'utf8');
    const v = Buffer.from(values.join('\0'), 'utf8');
    const nl = Buffer.alloc(4);
    nl.writeUInt32BE(n.length, 0);
    const vl = Buffer.alloc(4);
    vl.writeUInt32BE(v.length, 0);
    parts.push(nl, n, vl, v);
  }
  return Buffer.concat(parts);
}

/**
 * Parses an uncompressed block. Pure, linear in the block's size. Names come back lowercased;
 * repeated names merge. More than {@link MAX_HEADER_PAIRS} pairs or {@link MAX_HEADER_VALUES}
 * values is a protocol error. The result has no prototype, so a name like `__proto__` is
 * just a name.
 */
export function decodeHeaderBlock(block: Buffer): SpdyHeaders {
  const out: SpdyHeaders = Object.create(null) as SpdyHeaders;
  let valueCount = 0;
  let off = 0;
  const readU32 = (): number => {
    if (off + 4 > block.length) throw new SpdyProtocolError('truncated header block');
    const n = block.readUInt32BE(off);
    off += 4;
    return n;
  };
  const readBytes = (len: number): string => {
    if (off + len > block.length) throw new SpdyProtocolError('truncated header block');
    const s = block.toString('utf8', off, off + len);
    off += len;
    return s;
  };
  const count = readU32();
  if (count > MAX_HEADER_PAIRS) throw new SpdyProtocolError(`header block has ${count} pairs, limit ${MAX_HEADER_PAIRS}`);
  for (let i = 0; i < count; i++) {
    const name = readBytes(readU32()).toLowerCase();
    const values = readBytes(readU32()).split('\0');
    valueCount += values.length;
    if (valueCount > MAX_HEADER_VALUES) throw new SpdyProtocolError(`header block has more than ${MAX_HEADER_VALUES} values`);
    // Append in place: copying the list on every repeat made decoding quadratic.
    const list = out[name];
    if (list) for (const v of values) list.push(v);
    else out[name] = values;
  }
  return out;
}

/** Case-insensitive single-value lookup (first value), e.g. `headerValue(h, 'streamType')`. */
export function headerValue(headers: SpdyHeaders, name: string): string | undefined {
  return headers[name.toLowerCase()]?.[0];
}

type ZStream = zlib.Deflate | zlib.Inflate;

/**
 * Runs one write + Z_SYNC_FLUSH through a persistent zlib stream, serialising callers.
 *
 * The output limit is checked on every chunk zlib hands back, while inflating: as soon as a
 * block passes `limitBytes` the zlib stream is destroyed (zlib stops producing output at its
 * next chunk) and the call rejects. Checking only after the flush let a 1 MiB bomb inflate to
 * about 1 GB first. A destroyed pipe fails every later call: the shared zlib state is gone, so
 * the session must fail too.
 */
class SyncFlushPipe {
  private chain: Promise<unknown> = Promise.resolve();
  private chunks: Buffer[] = [];
  private size = 0;
  private failure: Error | undefined;
  private current: ((err: Error) => void) | undefined;

  constructor(
    private readonly z: ZStream,
    private readonly limitBytes: number,
  ) {
    z.on('data', (c: Buffer) => {
      if (this.failure) return;
      this.size += c.length;
      if (this.size > this.limitBytes) {
        this.fail(new SpdyProtocolError(`header block larger than ${this.limitBytes} bytes`));
        return;
      }
      this.chunks.push(c);
    });
    z.on('error', (err: Error) => this.fail(new SpdyProtocolError(`header zlib error: ${err.message}`)));
  }

  private fail(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    this.chunks = [];
    this.size = 0;
    this.z.destroy();
    this.current?.(err);
  }

  run(input: Buffer): Promise<Buffer> {
    const job = this.chain.then(
      () =>
        new Promise<Buffer>((resolve, reject) => {
          if (this.failure) return reject(this.failure);
          this.chunks = [];
          this.size = 0;
          this.current = reject;
          this.z.write(input);
          this.z.flush(zlib.constants.Z_SYNC_FLUSH, () => {
            this.current = undefined;
            if (this.failure) return reject(this.failure);
            const out = Buffer.concat(this.chunks, this.size);
            this.chunks = [];
            resolve(out);
          });
        }),
    );
    this.chain = job.catch(() => undefined);
    return job;
  }

  close(): void {
    this.failure ??= new SpdyProtocolError('header zlib stream closed');
    this.chunks = [];
    this.current = undefined;
    this.z.removeAllListeners('data');
    this.z.on('error', () => undefined);
    this.z.destroy();
  }
}

/**
 * The sending half of a connection's header compression. One per session; `compress` calls
 * are serialised internally and must be sent on the wire in call order.
 */
export class HeaderCompressor {
  private readonly pipe = new SyncFlushPipe(zlib.createDeflate({ dictionary: spdyHeaderDictionary() }), Infinity);

  /** Compresses one header block (an empty `{}` block too: the peer expects it compressed). */
  compress(headers: SpdyHeaders): Promise<Buffer> {
    return this.pipe.run(encodeHeaderBlock(headers));
  }

  /** Compresses an already serialised block (tests use it to send hand-made blocks). */
  compressRaw(block: Buffer): Promise<Buffer> {
    return this.pipe.run(block);
  }

  close(): void {
    this.pipe.close();
  }
}

/**
 * The receiving half of a connection's header compression. One per session; every received
 * header block must pass through it in wire order, even for streams we then refuse, or the
 * shared zlib state diverges from the peer's.
 */
export class HeaderDecompressor {
  private readonly pipe = new SyncFlushPipe(zlib.createInflate({ dictionary: spdyHeaderDictionary() }), MAX_HEADER_BLOCK_BYTES);

  async decompress(compressed: Buffer): Promise<SpdyHeaders> {
    return decodeHeaderBlock(await this.pipe.run(compressed));
  }

  decompressRaw(compressed: Buffer): Promise<Buffer> {
    return this.pipe.run(compressed);
  }

  close(): void {
    this.pipe.close();
  }
}
