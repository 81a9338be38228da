import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { Duplex, PassThrough } from 'node:stream';
import { KubeConfig } from '@kubernetes/client-node';
import { expect } from 'chai';
import { WebSocketServer } from 'ws';
import { createTargetPortForwardBackend, servePortForward, type PortForwardBackend } from '../../../../provider/kubelet/port-forward.js';
import { encodeFrame, FrameParser, RstStatus, type SpdyFrame } from '../../../../provider/kubelet/spdy/frames.js';
import { HeaderCompressor } from '../../../../provider/kubelet/spdy/header-codec.js';
import { SpdySession } from '../../../../provider/kubelet/spdy/spdy-session.js';

/** Port 81 resets the connection on its first bytes; any other port echoes. */
const backend: PortForwardBackend = {
  async portForward(_target, port) {
    if (port === 81) {
      const reset: Duplex = new Duplex({
        read() {},
        write(_chunk, _enc, cb) {
          cb();
          setImmediate(() => reset.destroy(new Error('connection reset by peer')));
        },
      });
      return reset;
    }
    const echo = new PassThrough();
    return Duplex.from({ readable: echo, writable: echo });
  },
};

/**
 * servePortForward on a server session over loopback, and the client's raw socket: `frames`
 * collects what the server sends, `client()` starts a client session on the socket instead.
 */
async function forwarding(opts: { maxConnections: number; streamCreationTimeoutMs?: number }) {
  const listener = net.createServer();
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  const accepted = once(listener, 'connection') as Promise<[net.Socket]>;
  const socket = net.connect((listener.address() as AddressInfo).port, '127.0.0.1');
  await once(socket, 'connect');
  const [serverSocket] = await accepted;
  const server = new SpdySession(serverSocket, { role: 'server' });
  server.on('error', () => undefined);
  server.start();
  void servePortForward({ session: server, target: { kubeConfig: new KubeConfig(), namespace: 'ns', pod: 'p' }, backend, ...opts });
  return {
    socket,
    raw() {
      const parser = new FrameParser();
      const frames: SpdyFrame[] = [];
      socket.on('data', (c: Buffer) => frames.push(...parser.push(c)));
      return frames;
    },
    client: () => new SpdySession(socket, { role: 'client' }).start(),
    close: async () => {
      socket.destroy();
      server.destroy();
      await new Promise<void>((r) => listener.close(() => r()));
    },
  };
}

async function until(cond: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A SYN_STREAM the client sends already closed both ways, as if it were done with it. */
const closedStream = async (c: HeaderCompressor, streamId: number, headers: Record<string, string[]>) =>
  encodeFrame({ type: 'syn_stream', streamId, associatedStreamId: 0, priority: 0, slot: 0, fin: true, unidirectional: true, headerBlock: await c.compress(headers) });

const resets = (frames: SpdyFrame[], status: number) => frames.filter((f) => f.type === 'rst_stream' && f.status === status).map((f) => (f as { streamId: number }).streamId);

describe('port-forward', () => {
  let session: Awaited<ReturnType<typeof forwarding>> | undefined;
  afterEach(async () => {
    await session?.close();
    session = undefined;
  });

  it('refuses the streams of connections past the limit, counting those waiting for their pair until they time out', async () => {
    session = await forwarding({ maxConnections: 4, streamCreationTimeoutMs: 200 });
    const frames = session.raw();
    const c = new HeaderCompressor();
    // Streams the session forgets at once: only servePortForward can count them.
    for (let i = 0; i < 100; i++) session.socket.write(await closedStream(c, 2 * i + 1, { streamtype: ['data'], port: ['80'], requestid: [`r${i}`] }));
    await until(() => resets(frames, RstStatus.REFUSED_STREAM).length === 96);
    // The 4 that waited time out (their data streams are cancelled); then there is room again.
    await until(() => resets(frames, RstStatus.CANCEL).length === 4);
    expect(resets(frames, RstStatus.CANCEL)).to.deep.equal([1, 3, 5, 7]);
    session.socket.write(await closedStream(c, 201, { streamtype: ['data'], port: ['80'], requestid: ['late'] }));
    session.socket.write(encodeFrame({ type: 'ping', id: 7 }));
    await until(() => frames.some((f) => f.type === 'ping'));
    expect(resets(frames, RstStatus.REFUSED_STREAM)).to.not.include(201);
    c.close();
  });

  it('resets a second stream of the same type for a request', async () => {
    session = await forwarding({ maxConnections: 4 });
    const frames = session.raw();
    const c = new HeaderCompressor();
    for (const id of [1, 3]) session.socket.write(await closedStream(c, id, { streamtype: ['data'], port: ['80'], requestid: ['0'] }));
    session.socket.write(encodeFrame({ type: 'ping', id: 7 }));
    await until(() => frames.some((f) => f.type === 'ping'));
    expect(resets(frames, RstStatus.PROTOCOL_ERROR)).to.deep.equal([3]);
    c.close();
  });

  it('counts a forwarded connection until its data stream is done', async () => {
    session = await forwarding({ maxConnections: 1 });
    const client = session.client();
    const open = async (requestId: string) => {
      const error = await client.openStream({ streamtype: ['error'], port: ['80'], requestid: [requestId] });
      const data = await client.openStream({ streamtype: ['data'], port: ['80'], requestid: [requestId] });
      return { error, data };
    };
    const first = await open('0');
    first.data.write('ping');
    await once(first.data, 'data');
    // The one connection is taken: the next request's first stream is refused.
    const refused = await client.openStream({ streamtype: ['error'], port: ['80'], requestid: ['1'] });
    expect(await once(refused, 'reset')).to.deep.equal([RstStatus.REFUSED_STREAM]);
    // Both ends of the first one close: there is room again.
    first.data.resume();
    first.data.end();
    await once(first.data, 'close');
    const second = await open('2');
    second.data.end('pong');
    let echoed = '';
    for await (const chunk of second.data) echoed += chunk;
    expect(echoed).to.equal('pong');
  });

  it('keeps the session going when a forwarded connection fails while the client still sends on it', async () => {
    session = await forwarding({ maxConnections: 4 });
    const client = session.client();
    const open = async (port: number, requestId: string) => {
      const error = await client.openStream({ streamtype: ['error'], port: [String(port)], requestid: [requestId] });
      const data = await client.openStream({ streamtype: ['data'], port: [String(port)], requestid: [requestId] });
      return { error, data };
    };
    const good = await open(80, 'a');
    const bad = await open(81, 'b');
    let badError = '';
    bad.error.on('data', (c: Buffer) => (badError += c));
    bad.data.resume();
    bad.data.write('hello');
    await until(() => badError.includes('reset'));
    // The client has not read the error yet and goes on, as client-go copies until EOF: more
    // than a stream's buffer.
    bad.data.write(Buffer.alloc(64 * 1024));
    let echoed = '';
    good.data.on('data', (c: Buffer) => (echoed += c));
    good.data.write('through 80');
    await until(() => echoed === 'through 80');
    expect(await client.ping()).to.be.a('number');
  });
});

describe('target port-forward backend', () => {
  let wss: WebSocketServer | undefined;
  afterEach(async () => {
    for (const c of wss?.clients ?? []) c.terminate();
    await new Promise<void>((r) => (wss ? wss.close(() => r()) : r()));
    wss = undefined;
  });

  it("passes on a prefix of the target's error text, as one printable line", async () => {
    // The target's apiserver, played by a WebSocket server: on the error channel of port 80,
    // after the port prefix, 1 MiB of text with control characters.
    wss = new WebSocketServer({ host: '127.0.0.1', port: 0, handleProtocols: () => 'v4.channel.k8s.io' });
    await once(wss, 'listening');
    wss.on('connection', (ws) => {
      ws.send(Buffer.from([1, 80, 0]));
      ws.send(Buffer.concat([Buffer.from([1]), Buffer.from('refused\n\u001b[2J')]));
      for (let i = 0; i < 16; i++) ws.send(Buffer.concat([Buffer.from([1]), Buffer.from('x'.repeat(64 * 1024))]));
      ws.close();
    });
    const upstream = await createTargetPortForwardBackend().portForward({ kubeConfig: kubeConfigOf(wss), namespace: 'ns', pod: 'p' }, 80, new AbortController().signal);
    upstream.resume();
    const [err] = (await once(upstream, 'error')) as [Error];
    expect(err.message).to.match(/^refused \[2Jx+…$/);
    expect(err.message).to.have.length(1024);
  });

  it('stops reading the target while the caller does not read, and the caller while the target does not', async function () {
    this.timeout(15_000);
    // The target's apiserver sends as fast as it can (capped at 64 MiB, so that a regression
    // fails instead of eating the machine) and reads nothing.
    wss = new WebSocketServer({ host: '127.0.0.1', port: 0, handleProtocols: () => 'v4.channel.k8s.io' });
    await once(wss, 'listening');
    let sent = 0;
    wss.on('connection', (ws) => {
      (ws as unknown as { _socket: { pause(): void } })._socket.pause();
      ws.send(Buffer.from([0, 80, 0]));
      const more = () => {
        while (sent < 64 << 20 && ws.readyState === ws.OPEN && ws.bufferedAmount < 1 << 20) {
          ws.send(Buffer.concat([Buffer.from([0]), Buffer.alloc(64 * 1024, 0x61)]));
          sent += 64 * 1024;
        }
        if (sent < 64 << 20 && ws.readyState === ws.OPEN) setTimeout(more, 5);
      };
      more();
    });
    const ac = new AbortController();
    const upstream = await createTargetPortForwardBackend().portForward({ kubeConfig: kubeConfigOf(wss), namespace: 'ns', pod: 'p' }, 80, ac.signal);
    // A caller that sends as fast as it may and never reads.
    let written = 0;
    const write = () => {
      while (written < 64 << 20) {
        written += 64 * 1024;
        if (!upstream.write(Buffer.alloc(64 * 1024, 0x62))) return;
      }
    };
    upstream.on('drain', write);
    write();
    await new Promise((r) => setTimeout(r, 2_000));
    const [sentThen, writtenThen] = [sent, written];
    await new Promise((r) => setTimeout(r, 1_000));
    console.log(`      in 3 s: ${(sent / 2 ** 20).toFixed(1)} MiB from the target, ${(written / 2 ** 20).toFixed(1)} MiB from the caller`);
    // The kernel's socket buffers take a few MiB; beyond that, nothing more may be taken.
    expect(sent).to.equal(sentThen);
    expect(written).to.equal(writtenThen);
    expect(sent).to.be.below(32 << 20);
    expect(written).to.be.below(32 << 20);
    ac.abort();
    upstream.destroy();
  });
});

/** A kubeconfig whose cluster is the given loopback server (plain HTTP, as client-node allows with skipTLSVerify). */
function kubeConfigOf(server: WebSocketServer): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 't', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'x' }],
    contexts: [{ name: 't', cluster: 't', user: 'u' }],
    currentContext: 't',
  });
  return kubeConfig;
}
