import net from 'node:net';
import { once } from 'node:events';
import { expect } from 'chai';
import { encodeFrame, FrameParser, RstStatus, type SpdyFrame } from '../../../../../provider/kubelet/spdy/frames.js';
import { encodeHeaderBlock, HeaderCompressor, MAX_HEADER_BLOCK_BYTES } from '../../../../../provider/kubelet/spdy/header-codec.js';
import { flood } from '../flood-client.js';
import { INPUT_HIGH_WATER_BYTES, SpdySession, type SpdyStream } from '../../../../../provider/kubelet/spdy/spdy-session.js';

/** A server session on 127.0.0.1 and the raw client socket that talks to it. */
async function sessionPair(opts: { maxConcurrentStreams?: number } = {}) {
  const listener = net.createServer();
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  const accepted = once(listener, 'connection') as Promise<[net.Socket]>;
  const client = net.connect((listener.address() as net.AddressInfo).port, '127.0.0.1');
  await once(client, 'connect');
  const [serverSocket] = await accepted;
  const session = new SpdySession(serverSocket, { role: 'server', ...opts });
  const errors: Error[] = [];
  session.on('error', (e: Error) => errors.push(e));
  session.start();
  return {
    session,
    client,
    serverSocket,
    errors,
    close: async () => {
      client.destroy();
      session.destroy();
      await new Promise<void>((r) => listener.close(() => r()));
    },
  };
}

/** Frames the client received (a reading client). */
function collect(client: net.Socket): SpdyFrame[] {
  const parser = new FrameParser();
  const frames: SpdyFrame[] = [];
  client.on('data', (c: Buffer) => frames.push(...parser.push(c)));
  return frames;
}

async function until(cond: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('SPDY session', () => {
  it('answers PINGs and opens streams for a well-behaved client', async () => {
    const pair = await sessionPair();
    const frames = collect(pair.client);
    const streams: SpdyStream[] = [];
    pair.session.on('stream', (s: SpdyStream) => streams.push(s));
    const c = new HeaderCompressor();
    pair.client.write(encodeFrame({ type: 'ping', id: 1 }));
    const block = await c.compress({ streamtype: ['data'] });
    pair.client.write(encodeFrame({ type: 'syn_stream', streamId: 1, associatedStreamId: 0, priority: 0, slot: 0, fin: false, unidirectional: false, headerBlock: block }));
    await until(() => frames.length >= 2 && streams.length === 1);
    expect(frames.map((f) => f.type)).to.deep.equal(['ping', 'syn_reply']);
    expect(streams[0]!.headers.streamtype).to.deep.equal(['data']);
    c.close();
    await pair.close();
  });

  it('pauses the socket while PING replies cannot be written (a peer that never reads)', async function () {
    this.timeout(60_000);
    const listener = net.createServer();
    await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
    const accepted = once(listener, 'connection') as Promise<[net.Socket]>;
    const heapBefore = process.memoryUsage().heapUsed;
    const attack = flood({ port: (listener.address() as net.AddressInfo).port, unit: encodeFrame({ type: 'ping', id: 1 }), totalBytes: 30 << 20 });
    const [socket] = await accepted;
    const session = new SpdySession(socket, { role: 'server' }).start();
    const { sentBytes, child } = await attack;
    const heapGrowthMiB = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20;
    console.log(`      30 MiB of PINGs, never reading: ${(sentBytes / 2 ** 20).toFixed(1)} MiB got out; server queued ${session.queuedInputBytes} B; heap +${heapGrowthMiB.toFixed(1)} MiB`);
    child.kill();
    // Unbounded, the server read all 30 MB and queued a promise per frame (+830 MB of heap).
    expect(sentBytes).to.be.below(30 << 20);
    expect(session.queuedInputBytes).to.be.at.most(INPUT_HIGH_WATER_BYTES + 65536);
    expect(heapGrowthMiB).to.be.below(50);
    session.destroy();
    await new Promise<void>((r) => listener.close(() => r()));
  });

  it('refuses streams beyond the concurrency limit with RST_STREAM REFUSED_STREAM', async () => {
    const pair = await sessionPair({ maxConcurrentStreams: 5 });
    const frames = collect(pair.client);
    const c = new HeaderCompressor();
    for (let id = 1; id <= 41; id += 2) {
      const headerBlock = await c.compress({ streamtype: ['data'] });
      pair.client.write(encodeFrame({ type: 'syn_stream', streamId: id, associatedStreamId: 0, priority: 0, slot: 0, fin: false, unidirectional: false, headerBlock }));
    }
    await until(() => frames.length === 21);
    expect(frames.filter((f) => f.type === 'syn_reply')).to.have.length(5);
    const resets = frames.filter((f) => f.type === 'rst_stream');
    expect(resets).to.have.length(16);
    expect(resets.every((f) => f.type === 'rst_stream' && f.status === RstStatus.REFUSED_STREAM)).to.equal(true);
    expect(pair.session.openStreamCount).to.equal(5);
    c.close();
    await pair.close();
  });

  it('answers an oversized control frame with GOAWAY PROTOCOL_ERROR and closes', async () => {
    const pair = await sessionPair();
    const frames = collect(pair.client);
    const header = Buffer.alloc(8);
    header.writeUInt32BE(0x80030001, 0);
    header.writeUInt32BE(1 << 20, 4);
    pair.client.write(header);
    await once(pair.client, 'close');
    expect(frames).to.deep.equal([{ type: 'goaway', lastGoodStreamId: 0, status: 1 }]);
    expect(pair.errors).to.have.length(1);
    expect(pair.session.isClosed).to.equal(true);
    await pair.close();
  });

  it("bounds a stream's headers across HEADERS frames as one block: past it, GOAWAY PROTOCOL_ERROR", async () => {
    const pair = await sessionPair();
    const frames = collect(pair.client);
    const c = new HeaderCompressor();
    const syn = await c.compress({ streamtype: ['data'], port: ['80'], requestid: ['0'] });
    pair.client.write(encodeFrame({ type: 'syn_stream', streamId: 1, associatedStreamId: 0, priority: 0, slot: 0, fin: false, unidirectional: false, headerBlock: syn }));
    // Two blocks each under the bound, together over it (and far under 100 names).
    const value = 'a'.repeat(MAX_HEADER_BLOCK_BYTES / 2);
    for (const name of ['x0', 'x1']) {
      pair.client.write(encodeFrame({ type: 'headers', streamId: 1, fin: false, headerBlock: await c.compressRaw(encodeHeaderBlock({ [name]: [value] })) }));
    }
    pair.client.write(encodeFrame({ type: 'ping', id: 7 }));
    await until(() => frames.some((f) => f.type === 'goaway' || f.type === 'ping'));
    expect(frames.map((f) => f.type)).to.deep.equal(['syn_reply', 'goaway']);
    expect(frames[1]).to.deep.include({ status: RstStatus.PROTOCOL_ERROR });
    expect(pair.errors.map((e) => e.message)).to.deep.equal([`stream 1 has more than ${MAX_HEADER_BLOCK_BYTES} bytes of headers`]);
    c.close();
    await pair.close();
  });

  it('answers a SYN_REPLY sent to the server with GOAWAY PROTOCOL_ERROR', async () => {
    const pair = await sessionPair();
    const frames = collect(pair.client);
    const c = new HeaderCompressor();
    const syn = await c.compress({ streamtype: ['data'] });
    pair.client.write(encodeFrame({ type: 'syn_stream', streamId: 1, associatedStreamId: 0, priority: 0, slot: 0, fin: false, unidirectional: false, headerBlock: syn }));
    pair.client.write(encodeFrame({ type: 'syn_reply', streamId: 1, fin: false, headerBlock: await c.compress({ x: ['y'] }) }));
    pair.client.write(encodeFrame({ type: 'ping', id: 7 }));
    await until(() => frames.some((f) => f.type === 'goaway' || f.type === 'ping'));
    expect(frames.map((f) => f.type)).to.deep.equal(['syn_reply', 'goaway']);
    expect(pair.errors).to.have.length(1);
    c.close();
    await pair.close();
  });

  it('handles no frame behind a stream whose reader is full, and resumes when it reads', async () => {
    const pair = await sessionPair();
    const frames = collect(pair.client);
    const streams: SpdyStream[] = [];
    pair.session.on('stream', (st: SpdyStream) => streams.push(st));
    const c = new HeaderCompressor();
    const headerBlock = await c.compress({ streamtype: ['stdin'] });
    pair.client.write(encodeFrame({ type: 'syn_stream', streamId: 1, associatedStreamId: 0, priority: 0, slot: 0, fin: false, unidirectional: false, headerBlock }));
    await until(() => streams.length === 1);
    // 1 MiB of DATA nobody reads, then a PING.
    const chunk = encodeFrame({ type: 'data', streamId: 1, fin: false, data: Buffer.alloc(32 * 1024) });
    for (let i = 0; i < 32; i++) pair.client.write(chunk);
    pair.client.write(encodeFrame({ type: 'ping', id: 7 }));
    await new Promise((r) => setTimeout(r, 300));
    expect(frames.some((f) => f.type === 'ping')).to.equal(false);
    expect(streams[0]!.readableLength).to.be.at.most(64 * 1024);
    expect(pair.session.queuedInputBytes).to.be.at.most(INPUT_HIGH_WATER_BYTES + 2 * 65536);
    let read = 0;
    streams[0]!.on('data', (b: Buffer) => (read += b.length));
    await until(() => frames.some((f) => f.type === 'ping'));
    expect(read).to.equal(32 * 32 * 1024);
    c.close();
    await pair.close();
  });
});
