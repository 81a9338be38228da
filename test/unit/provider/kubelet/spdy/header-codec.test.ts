import zlib from 'node:zlib';
import { expect } from 'chai';
import { SpdyProtocolError } from '../../../../../provider/kubelet/spdy/frames.js';
import { spdyHeaderDictionary } from '../../../../../provider/kubelet/spdy/dictionary.js';
import { decodeHeaderBlock, encodeHeaderBlock, HeaderCompressor, HeaderDecompressor, MAX_HEADER_BLOCK_BYTES } from '../../../../../provider/kubelet/spdy/header-codec.js';

function adler32(buf: Buffer): number {
  let a = 1;
  let b = 0;
  for (const x of buf) {
    a = (a + x) % 65521;
    b = (b + a) % 65521;
  }
  return ((b << 16) | a) >>> 0;
}

describe('SPDY/3 header blocks', () => {
  it('embeds the spec dictionary (1423 bytes, Adler-32 0xe3c6a7c2)', () => {
    const d = spdyHeaderDictionary();
    expect(d.length).to.equal(1423);
    expect(adler32(d)).to.equal(0xe3c6a7c2);
  });

  it('serialises name/value pairs byte for byte, lowercasing names and joining values with NUL', () => {
    const block = encodeHeaderBlock({ streamType: ['error'], x: ['a', 'b'] });
    const expected = Buffer.concat([
      Buffer.from('00000002', 'hex'),
      Buffer.from('0000000a', 'hex'),
      Buffer.from('streamtype'),
      Buffer.from('00000005', 'hex'),
      Buffer.from('error'),
      Buffer.from('00000001', 'hex'),
      Buffer.from('x'),
      Buffer.from('00000003', 'hex'),
      Buffer.from('a\0b'),
    ]);
    expect(block.toString('hex')).to.equal(expected.toString('hex'));
    expect(decodeHeaderBlock(block)).to.deep.equal({ streamtype: ['error'], x: ['a', 'b'] });
  });

  it('our compressor output decodes with an independent inflater primed with the dictionary', async () => {
    const c = new HeaderCompressor();
    const first = await c.compress({ streamtype: ['stdout'] });
    const second = await c.compress({});
    const third = await c.compress({ streamtype: ['data'], port: ['8080'], requestid: ['0'] });
    c.close();
    // The first block starts a zlib stream whose header names the dictionary (FDICT bit).
    expect(first[1]! & 0x20).to.equal(0x20);
    expect(first.readUInt32BE(2)).to.equal(0xe3c6a7c2);
    // Later blocks continue the same stream: decode the concatenation with a fresh inflater.
    const opts = { dictionary: spdyHeaderDictionary(), finishFlush: zlib.constants.Z_SYNC_FLUSH };
    expect(decodeHeaderBlock(zlib.inflateSync(first, opts))).to.deep.equal({ streamtype: ['stdout'] });
    const all = zlib.inflateSync(Buffer.concat([first, second, third]), opts);
    const firstLen = encodeHeaderBlock({ streamtype: ['stdout'] }).length;
    const secondLen = encodeHeaderBlock({}).length;
    expect(decodeHeaderBlock(all.subarray(firstLen + secondLen))).to.deep.equal({ streamtype: ['data'], port: ['8080'], requestid: ['0'] });
  });

  it('our decompressor decodes blocks from an independent deflater, block after block', async () => {
    const deflate = zlib.createDeflate({ dictionary: spdyHeaderDictionary() });
    const out: Buffer[] = [];
    deflate.on('data', (b: Buffer) => out.push(b));
    const block = async (raw: Buffer) => {
      out.length = 0;
      deflate.write(raw);
      await new Promise<void>((r) => deflate.flush(zlib.constants.Z_SYNC_FLUSH, () => r()));
      return Buffer.concat(out);
    };
    const b1 = await block(encodeHeaderBlock({ streamtype: ['error'] }));
    const b2 = await block(encodeHeaderBlock({ streamtype: ['stdin'] }));
    deflate.close();
    const d = new HeaderDecompressor();
    expect(await d.decompress(b1)).to.deep.equal({ streamtype: ['error'] });
    expect(await d.decompress(b2)).to.deep.equal({ streamtype: ['stdin'] });
    d.close();
  });

  it('round-trips many blocks between a compressor and a decompressor in order', async () => {
    const c = new HeaderCompressor();
    const d = new HeaderDecompressor();
    const blocks = await Promise.all(Array.from({ length: 20 }, (_, i) => c.compress({ requestid: [String(i)] })));
    for (let i = 0; i < blocks.length; i++) expect(await d.decompress(blocks[i]!)).to.deep.equal({ requestid: [String(i)] });
    c.close();
    d.close();
  });

  describe('hostile blocks', () => {
    /** Header block of `pairs` entries [name, value] (values may hold NULs), uncompressed. */
    const rawBlock = (pairs: Array<[string, string]>) => {
      const parts = [Buffer.alloc(4)];
      parts[0]!.writeUInt32BE(pairs.length, 0);
      for (const [n, v] of pairs) {
        for (const s of [n, v]) {
          const len = Buffer.alloc(4);
          len.writeUInt32BE(Buffer.byteLength(s), 0);
          parts.push(len, Buffer.from(s));
        }
      }
      return Buffer.concat(parts);
    };

    it('refuses a block with too many pairs, whatever their names (the quadratic merge attack)', () => {
      // 20k repeats of one name: the old merge copied the list each time (2e8 copies).
      const block = rawBlock(Array.from({ length: 20_000 }, () => ['x', 'v'] as [string, string]));
      expect(() => decodeHeaderBlock(block)).to.throw(SpdyProtocolError, /pairs/);
    });

    it('refuses a block with too many NUL-separated values', () => {
      expect(() => decodeHeaderBlock(rawBlock([['x', '\0'.repeat(50_000)]]))).to.throw(SpdyProtocolError, /values/);
    });

    it('merges repeated names in order, and a __proto__ name is just a name', () => {
      const h = decodeHeaderBlock(
        rawBlock([
          ['x', 'a\0b'],
          ['__proto__', 'p'],
          ['X', 'c'],
        ]),
      );
      expect(h.x).to.deep.equal(['a', 'b', 'c']);
      expect(Object.getPrototypeOf(h)).to.equal(null);
      expect(h['__proto__']).to.deep.equal(['p']);
    });

    it('stops inflating a decompression bomb at the limit and keeps no memory (256 MiB of zeros in ~256 KiB)', async function () {
      this.timeout(30_000);
      const c = new HeaderCompressor();
      // After the first 16 MiB block the window is all zeros, so every later block of zeros
      // compresses to the same bytes: repeating it builds a large bomb cheaply.
      const first = await c.compressRaw(Buffer.alloc(16 << 20));
      const next = await c.compressRaw(Buffer.alloc(16 << 20));
      c.close();
      const bomb = Buffer.concat([first, ...Array.from({ length: 15 }, () => next)]);
      const d = new HeaderDecompressor();
      const rssBefore = process.memoryUsage().rss;
      let peakRss = rssBefore;
      const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 5);
      const err = await d.decompressRaw(bomb).then(
        () => undefined,
        (e: Error) => e,
      );
      clearInterval(sampler);
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
      const growthMiB = (peakRss - rssBefore) / 2 ** 20;
      console.log(`      bomb of ${(bomb.length / 1024).toFixed(0)} KiB: RSS growth ${growthMiB.toFixed(1)} MiB`);
      expect(err).to.be.instanceOf(SpdyProtocolError);
      expect(err!.message).to.match(new RegExp(String(MAX_HEADER_BLOCK_BYTES)));
      // Unbounded, the block inflated to 256 MiB before being refused.
      expect(growthMiB).to.be.below(64);
      // The zlib state is gone: the connection cannot go on.
      const later = await d.decompress(first).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(later).to.be.instanceOf(SpdyProtocolError);
      d.close();
    });
  });
});
