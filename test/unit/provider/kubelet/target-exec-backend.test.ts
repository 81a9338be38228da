import { KubeConfig } from '@kubernetes/client-node';
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { PassThrough, Readable, Writable, type Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { FakeClock } from '../../../../provider/core/clock.js';
import { createTargetExecBackend, MAX_TARGET_MESSAGE_BYTES, STDIN_HIGH_WATER_BYTES } from '../../../../provider/kubelet/target-exec-backend.js';

/** A kubeconfig whose cluster is the given loopback server (plain HTTP, as client-node allows with skipTLSVerify). */
function kubeConfigFor(server: { address(): AddressInfo | string | null }): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 't', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'x' }],
    contexts: [{ name: 't', cluster: 't', user: 'u' }],
    currentContext: 't',
  });
  return kubeConfig;
}

/**
 * The target's apiserver, played by a WebSocket server on loopback: `script` decides what it
 * sends on which channel once a client connects.
 */
async function fakeTarget(script: (ws: WebSocket, url: URL) => void): Promise<{ kubeConfig: KubeConfig; close(): Promise<void> }> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, handleProtocols: (offered) => [...offered][0] ?? false });
  await new Promise<void>((r) => wss.once('listening', () => r()));
  wss.on('connection', (ws, req) => script(ws, new URL(req.url ?? '/', 'http://target')));
  return {
    kubeConfig: kubeConfigFor(wss),
    close: () =>
      new Promise<void>((r) => {
        for (const c of wss.clients) c.terminate();
        wss.close(() => r());
      }),
  };
}

/**
 * A target apiserver that ignores every byte it receives after its handshake, our close frame
 * included (ws would answer one): `script` writes raw frames on the socket.
 */
async function deafTarget(script: (socket: net.Socket) => void): Promise<{ kubeConfig: KubeConfig; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    let request = '';
    socket.on('data', function onHandshake(c: Buffer) {
      request += c.toString('latin1');
      if (!request.includes('\r\n\r\n')) return;
      socket.off('data', onHandshake);
      socket.resume();
      const key = /sec-websocket-key: *(\S+)/i.exec(request)![1];
      const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n`);
      script(socket);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    kubeConfig: kubeConfigFor(server),
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** An unmasked binary WebSocket frame (server to client) of less than 64 KiB. */
function wsFrame(payload: Buffer): Buffer {
  const head = payload.length < 126 ? Buffer.from([0x82, payload.length]) : Buffer.from([0x82, 126, payload.length >> 8, payload.length & 0xff]);
  return Buffer.concat([head, payload]);
}

const frame = (channel: number, text: string) => Buffer.concat([Buffer.from([channel]), Buffer.from(text)]);
const request = { namespace: 'ns', pod: 'web-abc', container: 'app', command: ['sh', '-c', 'true'], stdin: false, stdout: true, stderr: true, tty: false };

describe('target exec backend', () => {
  let target: Awaited<ReturnType<typeof fakeTarget>> | undefined;
  afterEach(async () => {
    await target?.close();
    target = undefined;
  });

  it('asks the target for exec on the delegate with the command and channels requested', async () => {
    let seen: URL | undefined;
    target = await fakeTarget((ws, url) => {
      seen = url;
      ws.send(frame(3, JSON.stringify({ metadata: {}, status: 'Success' })));
      ws.close();
    });
    const result = await createTargetExecBackend(target.kubeConfig).exec(request, { stdout: new PassThrough(), stderr: new PassThrough(), signal: new AbortController().signal });
    expect(result).to.deep.equal({ status: { metadata: {}, status: 'Success' } });
    expect(seen?.pathname).to.equal('/api/v1/namespaces/ns/pods/web-abc/exec');
    expect(seen?.searchParams.getAll('command')).to.deep.equal(['sh', '-c', 'true']);
    expect(seen?.searchParams.get('container')).to.equal('app');
    expect(seen?.searchParams.get('stdout')).to.equal('true');
    expect(seen?.searchParams.get('stdin')).to.equal('false');
  });

  it('keeps the output that arrives after the Status, until the target closes', async () => {
    // The target's apiserver copies each stream on its own: output may follow the Status.
    target = await fakeTarget((ws) => {
      ws.send(frame(1, 'first\n'));
      ws.send(frame(3, JSON.stringify({ metadata: {}, status: 'Success' })));
      setTimeout(() => {
        ws.send(frame(1, 'late\n'));
        ws.send(frame(2, 'late error\n'));
        ws.close();
      }, 50);
    });
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let out = '';
    let err = '';
    stdout.on('data', (b) => (out += b));
    stderr.on('data', (b) => (err += b));
    await createTargetExecBackend(target.kubeConfig).exec(request, { stdout, stderr, signal: new AbortController().signal });
    expect(out).to.equal('first\nlate\n');
    expect(err).to.equal('late error\n');
  });

  it('passes a failure Status through and gives up waiting for the close when the grace period ends', async () => {
    // The target never closes, so only the grace timer ends the call: on a fake clock, it is
    // still reading one millisecond before the grace ends, and returns once it has.
    const failure = {
      metadata: {},
      status: 'Failure',
      reason: 'NonZeroExitCode',
      message: 'command terminated with non-zero exit code: exit status 3',
      details: { causes: [{ reason: 'ExitCode', message: '3' }] },
    };
    target = await fakeTarget((ws) => ws.send(frame(3, JSON.stringify(failure)))); // never closes
    const clock = new FakeClock();
    let settled = false;
    const result = createTargetExecBackend(target.kubeConfig, { closeGraceMs: 100, clock })
      .exec(request, { stdout: new PassThrough(), stderr: new PassThrough(), signal: new AbortController().signal })
      .finally(() => (settled = true));
    // The grace timer is set once the Status came.
    while (clock.pending() === 0) await new Promise((r) => setTimeout(r, 2));
    clock.advance(99);
    await new Promise((r) => setImmediate(r));
    expect(settled, 'returned before the grace ended').to.equal(false);
    clock.advance(1);
    expect(await result).to.deep.equal({ status: failure });
  });

  it('closes the connection of a target that keeps talking after the Status, and passes nothing more on', async () => {
    let targetClosed: Promise<unknown> | undefined;
    target = await deafTarget((socket) => {
      // Not events.once: it rejects on the ECONNRESET that the provider's terminate() may cause.
      targetClosed = new Promise((r) => socket.once('close', r));
      socket.write(wsFrame(frame(3, JSON.stringify({ metadata: {}, status: 'Success' }))));
      const talk = setInterval(() => (socket.destroyed ? clearInterval(talk) : socket.write(wsFrame(frame(1, 'more\n')))), 5);
    });
    const stdout = new PassThrough();
    let chunks = 0;
    stdout.on('data', () => chunks++);
    const result = await createTargetExecBackend(target.kubeConfig, { closeGraceMs: 100 }).exec(request, { stdout, signal: new AbortController().signal });
    expect(result).to.deep.equal({ status: { metadata: {}, status: 'Success' } });
    const atReturn = chunks;
    // The front end ends its outputs once the backend returned; a write after that would
    // destroy them with an error nobody listens to.
    stdout.end();
    // Before, a close frame the target ignored left the connection open for ws's 30 s: longer
    // than the test's timeout, which is what reports it, rather than a time asserted here.
    await targetClosed;
    expect(chunks).to.equal(atReturn);
  });

  it('drops output for an output the caller already ended', async () => {
    let release: () => void = () => undefined;
    const released = new Promise<void>((r) => (release = r));
    target = await fakeTarget((ws) => {
      ws.send(frame(1, 'first\n'));
      void released.then(() => {
        ws.send(frame(1, 'after the end\n'));
        ws.send(frame(3, JSON.stringify({ metadata: {}, status: 'Success' })));
        ws.close();
      });
    });
    let out = '';
    // Like a SpdyStream whose FIN waits behind a busy socket: ended, not finished. A write now
    // fails and destroys it with an error.
    const stdout = new Writable({
      write(chunk: Buffer, _enc, cb) {
        out += chunk.toString();
        cb();
        stdout.end();
        release();
      },
      final() {},
    });
    const result = await createTargetExecBackend(target.kubeConfig).exec(request, { stdout, signal: new AbortController().signal });
    expect(result).to.deep.equal({ status: { metadata: {}, status: 'Success' } });
    expect(out).to.equal('first\n');
  });

  it('reports a connection closed before any Status as an error', async () => {
    target = await fakeTarget((ws) => {
      ws.send(frame(1, 'partial'));
      ws.close();
    });
    const err = await createTargetExecBackend(target.kubeConfig)
      .exec(request, { stdout: new PassThrough(), stderr: new PassThrough(), signal: new AbortController().signal })
      .then(
        () => undefined,
        (e: Error) => e,
      );
    expect(err?.message).to.match(/closed before the command reported its status/);
  });

  it('closes the connection of a target that sends a message over the bound, and passes none of it on', async () => {
    // ws takes messages of up to 100 MiB by default, held whole before they are handed on: one
    // per exec session, and a session per kubelet connection.
    target = await fakeTarget((ws) => {
      ws.send(Buffer.concat([Buffer.from([1]), Buffer.alloc(MAX_TARGET_MESSAGE_BYTES, 0x61)]));
      ws.send(frame(3, JSON.stringify({ metadata: {}, status: 'Success' })));
      ws.close();
    });
    let received = 0;
    const stdout = new Writable({ write: (chunk: Buffer, _e, done) => ((received += chunk.length), done()) });
    const err = await createTargetExecBackend(target.kubeConfig)
      .exec(request, { stdout, signal: new AbortController().signal })
      .then(
        () => undefined,
        (e: Error) => e,
      );
    expect(err?.message).to.match(/closed before the command reported its status/);
    expect(received).to.equal(0);
  });

  it('forwards stdin and, in v5, the end of stdin as a close signal', async () => {
    const received: Buffer[] = [];
    target = await fakeTarget((ws) => {
      ws.on('message', (d: Buffer) => {
        received.push(Buffer.from(d));
        if (d[0] === 255) {
          ws.send(frame(3, JSON.stringify({ metadata: {}, status: 'Success' })));
          ws.close();
        }
      });
    });
    const stdin = new PassThrough();
    const running = createTargetExecBackend(target.kubeConfig).exec({ ...request, stdin: true }, { stdin, stdout: new PassThrough(), stderr: new PassThrough(), signal: new AbortController().signal });
    stdin.write('hi\n');
    stdin.end();
    expect(await running).to.deep.equal({ status: { metadata: {}, status: 'Success' } });
    expect(received.map((b) => [...b])).to.deep.equal([
      [0, ...Buffer.from('hi\n')],
      [255, 0],
    ]);
  });

  it("stops reading the caller's stdin while the target does not take it (bounded buffering)", async function () {
    this.timeout(15_000);
    let targetSocket: { pause(): void } | undefined;
    target = await fakeTarget((ws) => {
      // The command never reads its stdin: the target stops reading the connection.
      targetSocket = (ws as unknown as { _socket: { pause(): void } })._socket;
      targetSocket.pause();
    });
    // An eager caller, capped at 64 MiB so that a regression fails instead of eating the machine.
    let produced = 0;
    const stdin = new Readable({
      read() {
        if (produced >= 64 << 20) return;
        produced += 64 * 1024;
        setImmediate(() => this.push(Buffer.alloc(64 * 1024, 0x61)));
      },
    });
    const ac = new AbortController();
    const running = createTargetExecBackend(target.kubeConfig)
      .exec({ ...request, stdin: true }, { stdin, stdout: new PassThrough(), stderr: new PassThrough(), signal: ac.signal })
      .catch((e: Error) => e);
    const rssBefore = process.memoryUsage().rss;
    await new Promise((r) => setTimeout(r, 2_000));
    const afterTwoSeconds = produced;
    await new Promise((r) => setTimeout(r, 1_000));
    const growthMiB = (process.memoryUsage().rss - rssBefore) / 2 ** 20;
    console.log(`      stdin taken from the caller: ${(produced / 2 ** 20).toFixed(1)} MiB in 3 s; RSS +${growthMiB.toFixed(1)} MiB`);
    // The kernel's socket buffers take a few MiB; beyond that, nothing more may be read.
    expect(produced).to.equal(afterTwoSeconds);
    expect(produced).to.be.below(32 * 1024 * 1024);
    expect(STDIN_HIGH_WATER_BYTES).to.be.below(8 * 1024 * 1024);
    ac.abort();
    expect(await running).to.be.instanceOf(Error);
  });

  it('sends terminal resizes on channel 4 for a TTY', async () => {
    const received: string[] = [];
    target = await fakeTarget((ws) => {
      ws.on('message', (d: Buffer) => {
        received.push(`${d[0]}:${d.subarray(1).toString()}`);
        ws.send(frame(3, JSON.stringify({ metadata: {}, status: 'Success' })));
        ws.close();
      });
    });
    async function* sizes() {
      yield { width: 100, height: 40 };
    }
    await createTargetExecBackend(target.kubeConfig).exec({ ...request, tty: true, stderr: false }, { stdout: new PassThrough(), resize: sizes(), signal: new AbortController().signal });
    expect(received).to.deep.equal(['4:{"Width":100,"Height":40}']);
  });

  it("reports the target's refusal with its HTTP code and message", async () => {
    const wss = new WebSocketServer({
      host: '127.0.0.1',
      port: 0,
      verifyClient: (_info, cb) => cb(false, 403, 'Forbidden', { 'Content-Type': 'application/json' }),
    });
    await new Promise<void>((r) => wss.once('listening', () => r()));
    try {
      const err = await createTargetExecBackend(kubeConfigFor(wss))
        .exec(request, { stdout: new PassThrough(), stderr: new PassThrough(), signal: new AbortController().signal })
        .then(
          () => undefined,
          (e: Error) => e,
        );
      expect(err?.message).to.match(/the target refused exec: HTTP 403/);
    } finally {
      await new Promise<void>((r) => wss.close(() => r()));
    }
  });

  describe('a refusal whose body is hostile', () => {
    let server: http.Server | undefined;
    const upgraded = new Set<Duplex>();
    afterEach(async () => {
      for (const socket of upgraded) socket.destroy();
      upgraded.clear();
      await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
      server = undefined;
    });

    /** A target that refuses every upgrade with a 500 whose body `write` produces. */
    async function refusingTarget(write: (socket: Duplex) => void): Promise<KubeConfig> {
      server = http.createServer();
      server.on('upgrade', (_req, socket) => {
        upgraded.add(socket);
        socket.on('error', () => undefined);
        socket.write('HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n');
        write(socket);
      });
      await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
      return kubeConfigFor(server);
    }
    const chunk = (data: Buffer | string) => `${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n`;

    it('reads a prefix of a huge body, then drops the connection', async function () {
      this.timeout(30_000);
      const total = 64 << 20;
      let written = 0;
      let stopped: Promise<void> | undefined;
      const kubeConfig = await refusingTarget((socket) => {
        stopped = new Promise((resolve) => socket.once('close', () => resolve()));
        const piece = chunk(Buffer.alloc(64 * 1024, 0x61));
        const pump = () => {
          while (written < total && !socket.destroyed) {
            written += 64 * 1024;
            if (!socket.write(piece)) return void socket.once('drain', pump);
          }
          socket.end('0\r\n\r\n');
        };
        pump();
      });
      const err = await createTargetExecBackend(kubeConfig)
        .exec(request, { stdout: new PassThrough(), signal: new AbortController().signal })
        .then(
          () => undefined,
          (e: Error) => e,
        );
      await stopped;
      console.log(`      ${(written / 2 ** 20).toFixed(1)} MiB of a 64 MiB refusal written before the connection closed`);
      expect(err?.message).to.match(/^the target refused exec: HTTP 500: a+…$/);
      expect(err?.message.length).to.be.below(300);
      // Whatever the socket buffers took: the body itself was not read to its end.
      expect(written).to.be.below(total / 2);
    });

    it('answers with what came once the body stops coming, as one printable line', async () => {
      const status = JSON.stringify({ kind: 'Status', status: 'Failure', message: 'first line\n\u001b[2Jsecond line', code: 500 });
      const kubeConfig = await refusingTarget((socket) => socket.write(chunk(status))); // never ends
      const err = await createTargetExecBackend(kubeConfig, { refusalBodyTimeoutMs: 100 })
        .exec(request, { stdout: new PassThrough(), signal: new AbortController().signal })
        .then(
          () => undefined,
          (e: Error) => e,
        );
      expect(err?.message).to.equal('the target refused exec: HTTP 500: first line [2Jsecond line');
    });
  });

  it('closes the connection to the target when the caller goes away', async () => {
    let closedByClient: Promise<void> | undefined;
    target = await fakeTarget((ws) => {
      closedByClient = new Promise((r) => ws.once('close', () => r()));
    });
    const ac = new AbortController();
    const running = createTargetExecBackend(target.kubeConfig)
      .exec(request, { stdout: new PassThrough(), stderr: new PassThrough(), signal: ac.signal })
      .catch((e: Error) => e);
    for (let i = 0; i < 100 && !closedByClient; i++) await new Promise((r) => setTimeout(r, 10));
    ac.abort();
    await closedByClient;
    expect(await running).to.be.instanceOf(Error);
  });
});
