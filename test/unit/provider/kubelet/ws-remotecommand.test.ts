import { KubeConfig } from '@kubernetes/client-node';
import { expect } from 'chai';
import type { IncomingMessage } from 'node:http';
import https from 'node:https';
import { Registry } from 'prom-client';
import WebSocket from 'ws';
import { silentLogger } from '../../../../provider/core/logger.js';
import type { KubeletAuthorizer } from '../../../../provider/kubelet/auth.js';
import { createKubeletServer, type KubeletServer } from '../../../../provider/kubelet/kubelet-server.js';
import type { ExecBackend, ExecIO, ExecRequest, ExecResult } from '../../../../provider/kubelet/remotecommand.js';
import { pickWebSocketProtocol } from '../../../../provider/kubelet/ws-remotecommand.js';
import { makeTlsFixtures } from './tls-fixtures.js';

const tls = makeTlsFixtures();

/** Token "good" may do anything; anything else is anonymous. */
const auth: KubeletAuthorizer = {
  async authenticate(req: IncomingMessage) {
    if (req.headers.authorization === 'Bearer reader') return { name: 'reader', groups: [] };
    return req.headers.authorization === 'Bearer good' ? { name: 'alice', groups: [] } : null;
  },
  // "reader" holds only `get nodes/proxy`, as a monitoring agent might.
  async authorize(user, attrs) {
    return user.name !== 'reader' || attrs.verb === 'get';
  },
};

/** A backend whose behaviour each test sets; it records what it was given. */
class ScriptedExec implements ExecBackend {
  requests: ExecRequest[] = [];
  aborted = false;
  run: (io: ExecIO, req: ExecRequest) => Promise<ExecResult> = async () => ({ exitCode: 0 });
  async exec(req: ExecRequest, io: ExecIO) {
    this.requests.push(req);
    io.signal.addEventListener('abort', () => (this.aborted = true));
    return this.run(io, req);
  }
  async attach(req: ExecRequest, io: ExecIO) {
    return this.exec(req, io);
  }
}

/** A client session: every message received, as [channel, text]; resolves at close. */
function connect(port: number, path: string, opts: { protocols?: string[]; token?: string } = {}) {
  const ws = new WebSocket(`wss://127.0.0.1:${port}${path}`, opts.protocols ?? ['v5.channel.k8s.io'], {
    ca: tls.ca.certPem,
    headers: { Authorization: `Bearer ${opts.token ?? 'good'}` },
  });
  const messages: Array<[number, string]> = [];
  ws.on('message', (d: Buffer) => messages.push([d[0]!, d.subarray(1).toString()]));
  const opened = new Promise<void>((res, rej) => {
    ws.once('open', () => res());
    ws.once('unexpected-response', (_req, r) => rej(Object.assign(new Error(`HTTP ${r.statusCode}`), { statusCode: r.statusCode })));
    ws.once('error', rej);
  });
  const closed = new Promise<number>((res) => ws.once('close', (code) => res(code)));
  const send = (channel: number, data: string | Buffer) => ws.send(Buffer.concat([Buffer.from([channel]), Buffer.from(data)]));
  return { ws, messages, opened, closed, send };
}

const status = (messages: Array<[number, string]>) => messages.filter(([c]) => c === 3).map(([, t]) => t);

/** Polls until `check` holds (deadline 1 s); the caller asserts afterwards. */
async function eventually(check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 100 && !(await check()); i++) await new Promise((r) => setTimeout(r, 10));
}

describe('kubelet server: remotecommand over WebSocket', () => {
  let server: KubeletServer;
  let port: number;
  let exec: ScriptedExec;
  let registry: Registry;

  beforeEach(async () => {
    exec = new ScriptedExec();
    registry = new Registry();
    server = createKubeletServer({
      host: '127.0.0.1',
      port: 0,
      tls: { certPem: tls.server.certPem, keyPem: tls.server.keyPem },
      resolver: { resolve: async (namespace, pod) => ({ nodeName: 'n', target: { kubeConfig: new KubeConfig(), namespace, pod: `${pod}-d` } }) },
      nodeUsage: { nodeUsage: async () => null },
      auth,
      logger: silentLogger(),
      registry,
      backends: { exec: () => exec },
    });
    port = await server.listen();
  });
  afterEach(() => server.close());

  it('prefers the client’s order among the protocols it serves', () => {
    expect(pickWebSocketProtocol(['base64.channel.k8s.io', 'v4.channel.k8s.io', 'v5.channel.k8s.io'])).to.equal('v4.channel.k8s.io');
    expect(pickWebSocketProtocol([' v5.channel.k8s.io'])).to.equal('v5.channel.k8s.io');
    expect(pickWebSocketProtocol(['chat'])).to.equal(undefined);
  });

  it('stops reading the socket while resizes are not taken by the backend', async function () {
    this.timeout(15_000);
    // A backend that never looks at resizes (nor stdin), until the caller goes away.
    exec.run = async (io) => {
      if (!io.signal.aborted) await new Promise((r) => io.signal.addEventListener('abort', r));
      return { exitCode: 0 };
    };
    const c = connect(port, '/exec/ns/web/app?command=sh&input=1&output=1&tty=1');
    await c.opened;
    const message = Buffer.from(`{"Width":1,"Height":1}${' '.repeat(16 * 1024)}`);
    for (let i = 0; i < 2000; i++) c.send(4, message); // 32 MiB
    // Wait until the client's queue stops shrinking.
    let last = -1;
    for (let i = 0; i < 50 && c.ws.bufferedAmount !== last; i++) {
      last = c.ws.bufferedAmount;
      await new Promise((r) => setTimeout(r, 200));
    }
    console.log(`      32 MiB of unread resizes: ${(c.ws.bufferedAmount / 2 ** 20).toFixed(1)} MiB still queued at the client`);
    // Unbounded, the server read it all into the resize buffer and the client queue emptied.
    expect(c.ws.bufferedAmount).to.be.greaterThan(16 << 20);
    c.ws.terminate();
  });

  it('runs the command with output on channels 1 and 2 and a v5 Status carrying the exit code', async () => {
    exec.run = async (io) => {
      io.stdout!.write('out\n');
      io.stderr!.write('err\n');
      return { exitCode: 3 };
    };
    const c = connect(port, '/exec/ns/web/app?command=sh&command=-c&command=exit+3&output=1&error=1');
    await c.opened;
    expect(c.ws.protocol).to.equal('v5.channel.k8s.io');
    expect(await c.closed).to.equal(1000);
    // First an empty "established" message on stdout, then the output, then the outcome.
    expect(c.messages.slice(0, 3)).to.deep.equal([
      [1, ''],
      [1, 'out\n'],
      [2, 'err\n'],
    ]);
    // Byte for byte what the kubelet's json.Marshal of the metav1.Status gives.
    expect(status(c.messages)).to.deep.equal([
      '{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: exit status 3",' +
        '"reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}',
    ]);
    expect(c.messages.at(-1)?.[0]).to.equal(3); // nothing after the outcome
    expect(exec.requests[0]).to.deep.include({ namespace: 'ns', pod: 'web-d', container: 'app', command: ['sh', '-c', 'exit 3'], stdin: false, tty: false });
    // Counted like an SPDY session: the handshake's 101, once the session is over.
    await eventually(async () => /route="exec",code="101"\} 1/.test(await registry.metrics()));
    expect(await registry.metrics()).to.match(/admiralty_kubelet_requests_total\{route="exec",code="101"\} 1/);
  });

  it('sends a Success Status on v4 and text only on failure for older protocols', async () => {
    const v4 = connect(port, '/exec/ns/web/app?command=true&output=1', { protocols: ['v4.channel.k8s.io'] });
    await v4.closed;
    expect(status(v4.messages)).to.deep.equal(['{"metadata":{},"status":"Success"}']);
    exec.run = async () => ({ exitCode: 300 });
    const v4fail = connect(port, '/exec/ns/web/app?command=false&output=1', { protocols: ['v4.channel.k8s.io'] });
    await v4fail.closed;
    expect(status(v4fail.messages)).to.deep.equal([
      '{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: exit status 255",' +
        '"reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"255"}]}}',
    ]);
    exec.run = async () => ({ exitCode: 0 });
    const v3ok = connect(port, '/exec/ns/web/app?command=true&output=1', { protocols: ['v3.channel.k8s.io'] });
    await v3ok.closed;
    expect(status(v3ok.messages)).to.deep.equal([]); // before v4, success says nothing
    exec.run = async () => ({ exitCode: 2 });
    const v3fail = connect(port, '/exec/ns/web/app?command=false&output=1', { protocols: ['v3.channel.k8s.io'] });
    await v3fail.closed;
    expect(status(v3fail.messages).pop()).to.equal('command terminated with non-zero exit code: exit status 2');
  });

  it('delivers stdin, and the v5 close signal ends it', async () => {
    exec.run = async (io) => {
      let got = '';
      for await (const chunk of io.stdin!) got += chunk;
      io.stdout!.write(`got ${got}`);
      return { exitCode: 0 };
    };
    const c = connect(port, '/exec/ns/web/app?command=cat&input=1&output=1');
    await c.opened;
    c.send(0, 'hello ');
    c.send(0, 'world');
    c.send(255, Buffer.from([0]));
    await c.closed;
    expect(
      c.messages
        .filter(([ch]) => ch === 1)
        .map(([, t]) => t)
        .join(''),
    ).to.equal('got hello world');
  });

  it('ignores the close signal before v5 (the channel does not exist there)', async () => {
    exec.run = async (io) => {
      let got = '';
      for await (const chunk of io.stdin!) {
        got += chunk;
        break;
      }
      io.stdout!.write(`got ${got}`);
      return { exitCode: 0 };
    };
    const c = connect(port, '/exec/ns/web/app?command=cat&input=1&output=1', { protocols: ['v4.channel.k8s.io'] });
    await c.opened;
    c.send(255, Buffer.from([0]));
    c.send(0, 'still open');
    await c.closed;
    expect(
      c.messages
        .filter(([ch]) => ch === 1)
        .map(([, t]) => t)
        .join(''),
    ).to.equal('got still open');
  });

  it('announces the session with an empty message on the lowest channel it will write', async () => {
    const stderrOnly = connect(port, '/exec/ns/web/app?command=true&error=1');
    await stderrOnly.closed;
    expect(stderrOnly.messages[0]).to.deep.equal([2, '']);
    const stdinOnly = connect(port, '/exec/ns/web/app?command=true&input=1');
    await stdinOnly.opened;
    stdinOnly.send(255, Buffer.from([0]));
    await stdinOnly.closed;
    expect(stdinOnly.messages).to.deep.equal([
      [3, ''],
      [3, '{"metadata":{},"status":"Success"}'],
    ]);
  });

  it('serves a client that offers no subprotocol as channel.k8s.io, as the kubelet does', async () => {
    exec.run = async (io) => {
      io.stdout!.write('hi');
      return { exitCode: 1 };
    };
    const c = connect(port, '/exec/ns/web/app?command=false&output=1', { protocols: [] });
    await c.opened;
    expect(c.ws.protocol).to.equal('');
    expect(await c.closed).to.equal(1000);
    expect(c.messages).to.deep.equal([
      [1, ''],
      [1, 'hi'],
      [3, 'command terminated with non-zero exit code: exit status 1'],
    ]);
  });

  it('passes resizes to the backend for a TTY, and drops stderr as the kubelet does', async () => {
    const sizes: Array<{ width: number; height: number }> = [];
    exec.run = async (io) => {
      expect(io.stderr).to.equal(undefined);
      for await (const s of io.resize!) {
        sizes.push(s);
        if (sizes.length === 2) break;
      }
      return { exitCode: 0 };
    };
    const c = connect(port, '/exec/ns/web/app?command=sh&input=1&output=1&error=1&tty=1');
    await c.opened;
    c.send(4, '{"Width":80,"Height":24}');
    c.send(4, '{"width":120,"height":40}');
    await c.closed;
    expect(sizes).to.deep.equal([
      { width: 80, height: 24 },
      { width: 120, height: 40 },
    ]);
    expect(exec.requests[0]).to.include({ tty: true, stderr: false });
    expect(c.messages.filter(([ch]) => ch === 2)).to.deep.equal([]);
  });

  it('aborts the backend when the client goes away', async () => {
    exec.run = (io) => new Promise((resolve) => io.signal.addEventListener('abort', () => resolve({ exitCode: 137 })));
    const c = connect(port, '/exec/ns/web/app?command=sleep&output=1');
    await c.opened;
    c.ws.terminate();
    for (let i = 0; i < 100 && !exec.aborted; i++) await new Promise((r) => setTimeout(r, 10));
    expect(exec.aborted).to.equal(true);
  });

  it('ends open sessions and aborts their backends when the server closes', async () => {
    exec.run = (io) => new Promise((resolve) => io.signal.addEventListener('abort', () => resolve({ exitCode: 137 })));
    const c = connect(port, '/attach/ns/web/app?output=1');
    await c.opened;
    await server.close();
    await c.closed;
    await eventually(() => exec.aborted);
    expect(exec.aborted).to.equal(true);
  });

  it('refuses before the handshake: 401 without credentials, 403 for unknown protocols, 400 for port-forward', async () => {
    const anonymous = connect(port, '/exec/ns/web/app?command=true&output=1', { token: 'bad' });
    expect(await anonymous.opened.catch((e: { statusCode: number }) => e.statusCode)).to.equal(401);
    const chat = connect(port, '/exec/ns/web/app?command=true&output=1', { protocols: ['chat'] });
    expect(await chat.opened.catch((e: { statusCode: number }) => e.statusCode)).to.equal(403);
    const pf = connect(port, '/portForward/ns/web', { protocols: ['v4.channel.k8s.io'] });
    expect(await pf.opened.catch((e: { statusCode: number }) => e.statusCode)).to.equal(400);
    expect(exec.requests).to.have.length(0);
  });

  it('refuses exec to a caller with only get on nodes/proxy, though a WebSocket upgrade is a GET', async () => {
    const reader = connect(port, '/exec/ns/web/app?command=true&output=1', { token: 'reader' });
    expect(await reader.opened.catch((e: { statusCode: number }) => e.statusCode)).to.equal(403);
    expect(exec.requests).to.have.length(0);
  });

  it('answers a malformed handshake with 400 and runs nothing', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = https.request({
        host: '127.0.0.1',
        port,
        path: '/exec/ns/web/app?command=true&output=1',
        ca: tls.ca.certPem,
        headers: {
          Connection: 'Upgrade',
          Upgrade: 'websocket',
          'Sec-WebSocket-Version': '8',
          'Sec-WebSocket-Key': 'not-a-key',
          'Sec-WebSocket-Protocol': 'v5.channel.k8s.io',
          Authorization: 'Bearer good',
        },
      });
      req.on('response', (r) => resolve(r.statusCode ?? 0));
      req.on('upgrade', () => reject(new Error('upgraded')));
      req.on('error', reject);
      req.end();
    });
    expect(status).to.equal(400);
    expect(exec.requests).to.have.length(0);
    // The request is accounted for, not left pending.
    for (let i = 0; i < 50 && !/route="exec",code="400"\} 1/.test(await registry.metrics()); i++) await new Promise((r) => setTimeout(r, 10));
    expect(await registry.metrics()).to.match(/admiralty_kubelet_requests_total\{route="exec",code="400"\} 1/);
  });
});
