import zlib from 'node:zlib';
import { expect } from 'chai';
import { spdyHeaderDictionary } from '../../../../../provider/kubelet/spdy/dictionary.js';
import {
  decodeHeaderBlock,
  encodeHeaderBlock,
  HeaderCompressor,
  HeaderDecompressor,
} from '../../../../../provider/kubelet/spdy/header-codec.js';

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
    expect(first[1] & 0x20).to.equal(0x20);
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
    for (let i = 0; i < blocks.length; i++) expect(await d.decompress(blocks[i])).to.deep.equal({ requestid: [String(i)] });
    c.close();
    d.close();
  });
});
