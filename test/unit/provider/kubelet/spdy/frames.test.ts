import { expect } from 'chai';
import { encodeFrame, FrameParser, SpdyProtocolError } from '../../../../../provider/kubelet/spdy/frames.js';

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
    const wire = Buffer.concat([
      hex('8003 0006 00 000004 00000001'),
      hex('00000001 00 000003 616263'),
      hex('00000001 01 000000'),
    ]);
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
});
