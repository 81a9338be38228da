import { expect } from 'chai';
import sinon from 'sinon';
import { encodeFrame, FrameParser, MAX_CONTROL_FRAME_PAYLOAD_BYTES, SpdyProtocolError } from '../../../../../provider/kubelet/spdy/frames.js';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');

describe('SPDY/3 frame codec', () => {
  const cases: Array<{ name: string; frame: Parameters<typeof encodeFrame>[0]; bytes: string }> = [
    {
      name: 'DATA with FIN',
      frame: { type: 'data', streamId: 5, fin: true, data: Buffer.from('hi') },
      bytes: '00000005 01 000002 6869',
    },
    {
      name: 'DATA, empty, no flags',
      frame: { type: 'data', streamId: 0x7fffffff, fin: false, data: Buffer.alloc(0) },
      bytes: '7fffffff 00 000000',
    },
    {
      name: 'SYN_STREAM with FIN, priority 3',
      frame: { type: 'syn_stream', streamId: 1, associatedStreamId: 0, priority: 3, slot: 0, fin: true, unidirectional: false, headerBlock: hex('aabb') },
      bytes: '8003 0001 01 00000c 00000001 00000000 60 00 aabb',
    },
    {
      name: 'SYN_REPLY',
      frame: { type: 'syn_reply', streamId: 3, fin: false, headerBlock: hex('cc') },
      bytes: '8003 0002 00 000005 00000003 cc',
    },
    { name: 'RST_STREAM CANCEL', frame: { type: 'rst_stream', streamId: 7, status: 5 }, bytes: '8003 0003 00 000008 00000007 00000005' },
    {
      name: 'SETTINGS, one entry',
      frame: { type: 'settings', flags: 0, entries: [{ flags: 1, id: 7, value: 65536 }] },
      bytes: '8003 0004 00 00000c 00000001 01000007 00010000',
    },
    { name: 'PING', frame: { type: 'ping', id: 9 }, bytes: '8003 0006 00 000004 00000009' },
    { name: 'GOAWAY', frame: { type: 'goaway', lastGoodStreamId: 11, status: 1 }, bytes: '8003 0007 00 000008 0000000b 00000001' },
    { name: 'HEADERS with FIN', frame: { type: 'headers', streamId: 1, fin: true, headerBlock: hex('dd') }, bytes: '8003 0008 01 000005 00000001 dd' },
    {
      name: 'WINDOW_UPDATE',
      frame: { type: 'window_update', streamId: 1, deltaWindowSize: 32768 },
      bytes: '8003 0009 00 000008 00000001 00008000',
    },
  ];

  for (const c of cases) {
    it(`encodes ${c.name} byte for byte`, () => {
      expect(encodeFrame(c.frame).toString('hex')).to.equal(hex(c.bytes).toString('hex'));
    });
    it(`decodes ${c.name}`, () => {
      const frames = new FrameParser().push(hex(c.bytes));
      expect(frames).to.have.length(1);
      expect(frames[0]).to.deep.equal(c.frame);
    });
  }

  it('reassembles frames split at arbitrary byte boundaries and yields them in order', () => {
    const wire = Buffer.concat([hex('8003 0006 00 000004 00000001'), hex('00000001 00 000003 616263'), hex('00000001 01 000000')]);
    const parser = new FrameParser();
    const frames = [];
    for (const byte of wire) frames.push(...parser.push(Buffer.from([byte])));
    expect(frames.map((f) => f.type)).to.deep.equal(['ping', 'data', 'data']);
    expect(frames[1]).to.include({ streamId: 1, fin: false });
    expect((frames[1] as { data: Buffer }).data.toString()).to.equal('abc');
    expect(frames[2]).to.include({ fin: true });
    expect(parser.pendingBytes).to.equal(0);
  });

  it('keeps unknown control types (to be ignored) and rejects oversized frames', () => {
    const [f] = new FrameParser().push(hex('8003 000a 00 000001 ff'));
    expect(f).to.include({ type: 'unknown_control', controlType: 10 });
    expect(() => new FrameParser(16).push(hex('00000001 00 000011'))).to.throw(SpdyProtocolError);
  });

  it('rejects truncated control payloads', () => {
    expect(() => new FrameParser().push(hex('8003 0003 00 000004 00000001'))).to.throw(SpdyProtocolError);
  });

  describe('hostile input', () => {
    afterEach(() => sinon.restore());

    it('parses a large frame sent byte by byte in linear time (each byte copied a bounded number of times)', () => {
      const size = 64 * 1024;
      const wire = encodeFrame({ type: 'data', streamId: 1, fin: false, data: Buffer.alloc(size, 7) });
      let copied = 0;
      const concat = Buffer.concat;
      sinon.stub(Buffer, 'concat').callsFake((list: readonly Uint8Array[], total?: number) => {
        copied += total ?? list.reduce((n, b) => n + b.length, 0);
        return concat(list, total);
      });
      const copy = Buffer.prototype.copy;
      sinon.stub(Buffer.prototype, 'copy').callsFake(function (this: Buffer, ...args: unknown[]) {
        const [target, ts, ss, se] = args as [Uint8Array, number?, number?, number?];
        copied += (se ?? this.length) - (ss ?? 0);
        return copy.call(this, target, ts, ss, se);
      });
      const parser = new FrameParser();
      const frames = [];
      for (let i = 0; i < wire.length; i++) frames.push(...parser.push(wire.subarray(i, i + 1)));
      sinon.restore();
      expect(frames).to.have.length(1);
      expect((frames[0] as { data: Buffer }).data.equals(Buffer.alloc(size, 7))).to.equal(true);
      // The old parser re-copied its backlog for every chunk: about size^2/2 bytes (2 GiB here).
      expect(copied).to.be.below(4 * wire.length);
    });

    it('refuses a control frame over 16 KiB from its 8-byte header, before any payload arrives', () => {
      const header = Buffer.alloc(8);
      header.writeUInt32BE(0x80030001, 0);
      header.writeUInt32BE(MAX_CONTROL_FRAME_PAYLOAD_BYTES + 1, 4);
      expect(() => new FrameParser(1 << 20).push(header)).to.throw(SpdyProtocolError, /control frame/);
      // A DATA frame of the same size is fine under a 1 MiB data limit.
      header.writeUInt32BE(1, 0);
      expect(new FrameParser(1 << 20).push(header)).to.deep.equal([]);
    });

    it('hands out frames one at a time, leaving the rest queued (parse no faster than handled)', () => {
      const ping = encodeFrame({ type: 'ping', id: 1 });
      const parser = new FrameParser();
      parser.append(Buffer.concat([ping, ping, ping]));
      expect(parser.next()).to.deep.equal({ type: 'ping', id: 1 });
      expect(parser.queuedBytes).to.equal(2 * ping.length);
      expect(parser.next()).to.deep.equal({ type: 'ping', id: 1 });
      expect(parser.next()).to.deep.equal({ type: 'ping', id: 1 });
      expect(parser.next()).to.equal(undefined);
      expect(parser.pendingBytes).to.equal(0);
    });
  });
});
