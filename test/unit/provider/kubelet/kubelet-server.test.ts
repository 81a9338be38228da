import https from 'node:https';
import { connect as tlsConnect } from 'node:tls';
import { PassThrough, Readable, Duplex } from 'node:stream';
import { expect } from 'chai';
import { Registry } from 'prom-client';
import { KubeConfig } from '@kubernetes/client-node';
import { silentLogger, type Logger } from '../../../../provider/core/logger.js';
import type { NodeUsage } from '../../../../provider/model/resource-metrics.js';
import { createKubeletServer, parseKubeletPath, parseNodeScopedPath, type KubeletServer, type PodResolver } from '../../../../provider/kubelet/kubelet-server.js';
import { userFromClientCertificate, type KubeletAuthorizer, type KubeletRequestAttributes, type KubeletUser } from '../../../../provider/kubelet/auth.js';
import type { ExecBackend, ExecIO, ExecRequest } from '../../../../provider/kubelet/remotecommand.js';
import type { ContainerLogOptions, LogBackend } from '../../../../provider/kubelet/logs.js';
import type { PortForwardBackend } from '../../../../provider/kubelet/port-forward.js';
import { connectSpdy } from '../../../../provider/kubelet/spdy/spdy-client.js';
import type { SpdySession, SpdyStream } from '../../../../provider/kubelet/spdy/spdy-session.js';
import { makeTlsFixtures } from './tls-fixtures.js';

const tls = makeTlsFixtures();

async function readAll(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks).toString('utf8');
}

function get(port: number, path: string, opts: https.RequestOptions = {}): Promise<{ status: number; body: string; etag?: string }> {
  return new Promise((resolve, reject) => {
    https
      .get({ host: '127.0.0.1', port, path, ca: tls.ca.certPem, ...opts }, (res) => {
        void readAll(res).then((body) => resolve({ status: res.statusCode ?? 0, body, ...(res.headers.etag ? { etag: res.headers.etag } : {}) }));
      })
      .on('error', reject);
  });
}

/** Sends `request` as is on a TLS connection and reads everything until the server closes. */
async function rawExchange(port: number, request: string): Promise<string> {
  const socket = tlsConnect({ port, host: '127.0.0.1', ca: tls.ca.certPem });
  socket.on('error', () => undefined);
  socket.write(request);
  return readAll(socket);
}

const resolver: PodResolver = {
  async resolve(namespace, pod) {
    if (pod === 'missing') return null;
    // As a failed TokenReview reads: the apiserver's answer and headers.
    if (pod === 'broken') throw new Error('HTTP-Code: 429 Headers: {"audit-id":"a1"} Body: system:serviceaccount:admiralty:admiralty');
    return { nodeName: 'admiralty-cluster-c1', target: { kubeConfig: new KubeConfig(), namespace: `t-${namespace}`, pod: `${pod}-delegate` } };
  },
};

class FakeAuth implements KubeletAuthorizer {
  allow = true;
  seen: Array<{ user: KubeletUser; attrs: KubeletRequestAttributes }> = [];
  async authenticate(req: import('node:http').IncomingMessage) {
    const cert = userFromClientCertificate(req);
    if (cert) return cert;
    return req.headers.authorization === 'Bearer good' ? { name: 'token-user', groups: ['g'] } : null;
  }
  async authorize(user: KubeletUser, attrs: KubeletRequestAttributes) {
    this.seen.push({ user, attrs });
    return this.allow;
  }
}

/** Echoes stdin to stdout, writes to stderr, records resizes, exits with code 3. */
class EchoExec implements ExecBackend {
  requests: ExecRequest[] = [];
  resizes: Array<{ width: number; height: number }> = [];
  async exec(req: ExecRequest, io: ExecIO) {
    this.requests.push(req);
    io.stderr?.write('to stderr\n');
    const resizing = (async () => {
      if (io.resize) for await (const s of io.resize) this.resizes.push(s);
    })();
    if (io.stdin && io.stdout) for await (const chunk of io.stdin) io.stdout.write(chunk);
    if (req.tty) await resizing;
    return { exitCode: 3 };
  }
  async attach(req: ExecRequest, io: ExecIO) {
    this.requests.push(req);
    io.stdout?.write('attached');
    return { exitCode: 0 };
  }
}

class FakeLogs implements LogBackend {
  calls: Array<{ container: string; opts: ContainerLogOptions; pod: string }> = [];
  aborted = false;
  follow?: PassThrough;
  async streamLogs(target: { pod: string }, container: string, opts: ContainerLogOptions, signal: AbortSignal) {
    this.calls.push({ container, opts, pod: target.pod });
    signal.addEventListener('abort', () => (this.aborted = true));
    if (opts.follow) {
      this.follow = new PassThrough();
      this.follow.write('line 1\n');
      return this.follow;
    }
    return Readable.from([Buffer.from('line 1\n'), Buffer.from('line 2\n')]);
  }
}

const echoPortForward: PortForwardBackend = {
  async portForward(_t, port) {
    if (port === 9) throw new Error('connection refused');
    // An echo server: whatever is written comes back.
    const p = new PassThrough();
    return Duplex.from({ readable: p, writable: p });
  },
};

function openStreams(session: SpdySession, types: string[], extra: Record<string, string[]> = {}): Promise<SpdyStream[]> {
  return Promise.all(types.map((t) => session.openStream({ streamtype: [t], ...extra })));
}

/** One virtual node, admiralty-cluster-c1, with one proxy of one container. */
const c1Usage: NodeUsage = {
  nodeName: 'admiralty-cluster-c1',
  startTimeMs: Date.UTC(2026, 0, 1),
  timestampMs: Date.UTC(2026, 0, 1, 1),
  cpuNanoCores: 250_000_000,
  cpuCoreSeconds: 12.5,
  memoryWorkingSetBytes: 64 * 1024 * 1024,
  pods: [
    {
      namespace: 'ns',
      name: 'p',
      uid: 'u1',
      startTimeMs: Date.UTC(2026, 0, 1),
      containers: [{ name: 'c', startTimeMs: Date.UTC(2026, 0, 1), timestampMs: Date.UTC(2026, 0, 1, 1), cpuNanoCores: 250_000_000, cpuCoreSeconds: 12.5, memoryWorkingSetBytes: 64 * 1024 * 1024 }],
    },
  ],
};

describe('kubelet server', () => {
  let server: KubeletServer;
  let port: number;
  let auth: FakeAuth;
  let exec: EchoExec;
  let logs: FakeLogs;
  let registry: Registry;

  beforeEach(async () => {
    auth = new FakeAuth();
    exec = new EchoExec();
    logs = new FakeLogs();
    registry = new Registry();
    server = createKubeletServer({
      host: '127.0.0.1',
      port: 0,
      tls: { certPem: tls.server.certPem, keyPem: tls.server.keyPem },
      clientCaPem: tls.ca.certPem,
      resolver,
      nodeUsage: { nodeUsage: async (name) => (name === 'admiralty-cluster-c1' ? c1Usage : null) },
      auth,
      logger: silentLogger(),
      registry,
      backends: { exec: () => exec, logs, portForward: echoPortForward },
      streamCreationTimeoutMs: 2000,
    });
    port = await server.listen();
  });
  afterEach(async () => {
    await server.close();
  });

  const spdy = (path: string, protocols: string[], headers: Record<string, string> = { Authorization: 'Bearer good' }) =>
    connectSpdy({ url: `https://127.0.0.1:${port}${path}`, protocols, headers, tls: { ca: tls.ca.certPem } });

  it('parses kubelet paths', () => {
    expect(parseKubeletPath('/exec/ns/p/c')).to.deep.equal({ route: 'exec', namespace: 'ns', pod: 'p', container: 'c' });
    expect(parseKubeletPath('/portForward/ns/p')).to.deep.equal({ route: 'portForward', namespace: 'ns', pod: 'p', container: '' });
    expect(parseKubeletPath('/containerLogs/ns/p/uid/c')?.container).to.equal('c');
    expect(parseKubeletPath('/stats/summary')).to.equal(null);
    expect(parseKubeletPath('/exec/ns//c')).to.equal(null);
  });

  it('serves /healthz without credentials and 404 elsewhere', async () => {
    expect(await get(port, '/healthz')).to.deep.equal({ status: 200, body: 'ok' });
    expect((await get(port, '/pods', { headers: { Authorization: 'Bearer good' } })).status).to.equal(404);
  });

  it('answers 400 to an upgrade whose request target the URL parser refuses, without credentials, and goes on serving', async () => {
    // `//` is no URL relative to any base: it once made the upgrade handler reject unhandled,
    // which ends the process.
    const answer = await rawExchange(port, 'POST // HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
    expect(answer).to.match(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).to.include({ reason: 'BadRequest', message: 'malformed request target' });
    expect(await get(port, '/healthz')).to.deep.equal({ status: 200, body: 'ok' });
  });

  describe('node-scoped reads (/metrics/resource, /stats/summary)', () => {
    const bearer = { Authorization: 'Bearer good' };
    it("names the node by the path or by the node proxy's X-Forwarded-Uri, nothing else", () => {
      expect(parseNodeScopedPath('/metrics/resource/admiralty-cluster-c1', undefined)).to.deep.equal({ route: 'metricsResource', nodeName: 'admiralty-cluster-c1' });
      expect(parseNodeScopedPath('/stats/summary', '/api/v1/nodes/n1/proxy/stats/summary')).to.deep.equal({ route: 'statsSummary', nodeName: 'n1' });
      expect(parseNodeScopedPath('/metrics/resource', '/api/v1/nodes/https:n1:10250/proxy/metrics/resource')).to.deep.equal({ route: 'metricsResource', nodeName: 'n1' });
      expect(parseNodeScopedPath('/metrics/resource', '/api/v1/nodes/n1:10250/proxy/metrics/resource')?.nodeName).to.equal('n1');
      // The forwarded path must be the one asked; a bad name or encoding names nothing.
      expect(parseNodeScopedPath('/stats/summary', '/api/v1/nodes/n1/proxy/metrics/resource')?.nodeName).to.equal(null);
      expect(parseNodeScopedPath('/stats/summary', '/api/v1/nodes/N_1/proxy/stats/summary')?.nodeName).to.equal(null);
      expect(parseNodeScopedPath('/stats/summary', '/api/v1/nodes/%E0%A4%A/proxy/stats/summary')?.nodeName).to.equal(null);
      expect(parseNodeScopedPath('/stats/summary', undefined)).to.deep.equal({ route: 'statsSummary', nodeName: null });
      expect(parseNodeScopedPath('/metrics/resource/UPPER', undefined)).to.equal(null);
      expect(parseNodeScopedPath('/metrics/cadvisor', undefined)).to.equal(null);
      expect(parseNodeScopedPath('/stats/summary/x', undefined)).to.equal(null);
    });

    it('serves the resource metrics of the node named in the path, authorized on nodes/metrics of that node', async () => {
      const res = await get(port, '/metrics/resource/admiralty-cluster-c1', { headers: bearer });
      expect(res.status).to.equal(200);
      expect(res.body).to.contain('container_cpu_usage_seconds_total{container="c",namespace="ns",pod="p"} 12.5 1767229200000\n');
      expect(auth.seen[0]!.attrs).to.deep.equal({ verb: 'get', resource: 'nodes', subresource: 'metrics', name: 'admiralty-cluster-c1' });
    });

    it('serves the summary of the node the apiserver proxies to, authorized on nodes/stats', async () => {
      const res = await get(port, '/stats/summary', { headers: { ...bearer, 'X-Forwarded-Uri': '/api/v1/nodes/admiralty-cluster-c1/proxy/stats/summary' } });
      expect(res.status).to.equal(200);
      expect(JSON.parse(res.body).node).to.include({ nodeName: 'admiralty-cluster-c1' });
      // Scraped every few seconds, never revalidated: no SHA-1 of every answer for an ETag.
      expect(res.etag).to.equal(undefined);
      expect(auth.seen[0]!.attrs).to.deep.equal({ verb: 'get', resource: 'nodes', subresource: 'stats', name: 'admiralty-cluster-c1' });
    });

    it('answers 401 without credentials, 403 when denied, 404 for a node not ours or not named', async () => {
      expect((await get(port, '/metrics/resource/admiralty-cluster-c1')).status).to.equal(401);
      expect((await get(port, '/metrics/resource/some-real-node', { headers: bearer })).status).to.equal(404);
      const unnamed = await get(port, '/stats/summary', { headers: bearer });
      expect(unnamed.status).to.equal(404);
      expect(auth.seen[1]!.attrs).to.deep.equal({ verb: 'get', resource: 'nodes', subresource: 'stats', name: '' });
      auth.allow = false;
      const denied = await get(port, '/metrics/resource/admiralty-cluster-c1', { headers: bearer });
      expect(denied).to.deep.equal({ status: 403, body: 'Forbidden (user=token-user, verb=get, resource=nodes, subresource(s)=[metrics])' });
      // Denied callers learn nothing about which nodes exist.
      expect((await get(port, '/metrics/resource/some-real-node', { headers: bearer })).status).to.equal(403);
    });

    it('answers 400 to a request target the URL parser refuses, as it names no node, and goes on serving', async () => {
      // An absolute-form target whose port is past 65535: express routes it by its path, which the
      // URL parser then refuses (it once made a 500).
      for (const target of ['http://x:99999/metrics/resource/admiralty-cluster-c1', 'http://x:99999/stats/summary']) {
        expect(await get(port, target, { headers: bearer }), target).to.deep.equal({ status: 400, body: 'malformed request target' });
      }
      expect(auth.seen, 'asked about nothing').to.deep.equal([]);
      expect((await get(port, '/metrics/resource/admiralty-cluster-c1', { headers: bearer })).status).to.equal(200);
    });
  });

  describe('auth', () => {
    it('answers 401 Unauthorized without credentials', async () => {
      expect(await get(port, '/containerLogs/ns/p/c')).to.deep.equal({ status: 401, body: 'Unauthorized' });
      const res = await spdy('/exec/ns/p/c?command=sh&output=1', ['v4.channel.k8s.io'], {});
      expect(res.upgraded).to.equal(false);
      if (!res.upgraded) {
        expect(res.statusCode).to.equal(401);
        expect(JSON.parse(res.body)).to.include({ kind: 'Status', reason: 'Unauthorized', code: 401 });
      }
    });

    it('answers 403 with the kubelet message when the authorizer denies, asking for nodes/proxy of the virtual node', async () => {
      auth.allow = false;
      const res = await get(port, '/containerLogs/ns/p/c', { headers: { Authorization: 'Bearer good' } });
      expect(res.status).to.equal(403);
      expect(res.body).to.equal('Forbidden (user=token-user, verb=get, resource=nodes, subresource(s)=[proxy])');
      expect(auth.seen[0]!.attrs).to.deep.equal({ verb: 'get', resource: 'nodes', subresource: 'proxy', name: 'admiralty-cluster-c1' });
      const up = await spdy('/exec/ns/p/c?command=sh&output=1', ['v4.channel.k8s.io']);
      expect(up.upgraded).to.equal(false);
      if (!up.upgraded) expect(up.statusCode).to.equal(403);
      expect(auth.seen[1]!.attrs.verb).to.equal('create');
    });

    it('authenticates an x509 client certificate signed by the client CA (user = CN, groups = O)', async () => {
      const good = tls.client('kube-apiserver-kubelet-client', ['system:masters', 'kubeadm:cluster-admins']);
      const res = await get(port, '/containerLogs/ns/p/c', { cert: good.certPem, key: good.keyPem });
      expect(res.status).to.equal(200);
      expect(auth.seen[0]!.user).to.deep.equal({ name: 'kube-apiserver-kubelet-client', groups: ['system:masters', 'kubeadm:cluster-admins'] });
    });

    it('ignores a client certificate from another CA', async () => {
      const rogue = tls.client('mallory', ['system:masters'], {});
      const res = await get(port, '/containerLogs/ns/p/c', { cert: rogue.certPem, key: rogue.keyPem });
      expect(res.status).to.equal(401);
    });

    it('answers 404 for a pod the resolver does not know, to a caller allowed on nodes/proxy', async () => {
      expect((await get(port, '/containerLogs/ns/missing/c', { headers: { Authorization: 'Bearer good' } })).status).to.equal(404);
      expect(auth.seen[0]!.attrs).to.deep.equal({ verb: 'get', resource: 'nodes', subresource: 'proxy', name: '' });
    });

    it('answers 403, not 404, for an unknown pod when the caller may not use nodes/proxy (no existence leak)', async () => {
      auth.allow = false;
      expect((await get(port, '/containerLogs/ns/missing/c', { headers: { Authorization: 'Bearer good' } })).status).to.equal(403);
    });

    it('answers an internal failure with 500 "internal error", its details left to the log', async () => {
      expect(await get(port, '/containerLogs/ns/broken/c', { headers: { Authorization: 'Bearer good' } })).to.deep.equal({ status: 500, body: 'internal error' });
      const res = await spdy('/exec/ns/broken/c?command=sh&output=1', ['v4.channel.k8s.io']);
      if (res.upgraded) throw new Error('upgraded');
      expect(res.statusCode).to.equal(500);
      expect(JSON.parse(res.body)).to.include({ reason: 'InternalError', message: 'internal error' });
    });
  });

  describe('/containerLogs', () => {
    const auth = { headers: { Authorization: 'Bearer good' } };

    it('streams the delegate log with the parsed options', async () => {
      const res = await get(port, '/containerLogs/ns/p/c?tailLines=0&timestamps=true', auth);
      expect(res).to.deep.equal({ status: 200, body: 'line 1\nline 2\n' });
      expect(logs.calls[0]).to.deep.equal({ container: 'c', pod: 'p-delegate', opts: { follow: false, previous: false, timestamps: true, tailLines: 0 } });
      const text = await registry.metrics();
      expect(text).to.match(/admiralty_kubelet_requests_total\{route="containerLogs",code="200"\} 1/);
    });

    it('answers 400 with a plain-text reason for invalid options', async () => {
      const res = await get(port, '/containerLogs/ns/p/c?tailLines=-1', auth);
      expect(res.status).to.equal(400);
      expect(res.body).to.contain('tailLines');
    });

    it('flushes follow output as it comes and aborts upstream when the client disconnects', async () => {
      const received = await new Promise<string>((resolve, reject) => {
        const req = https.get({ host: '127.0.0.1', port, path: '/containerLogs/ns/p/c?follow=true', ca: tls.ca.certPem, ...auth }, (res) => {
          res.once('data', (c: Buffer) => {
            resolve(c.toString());
            req.destroy();
          });
        });
        req.on('error', () => undefined);
        setTimeout(() => reject(new Error('no data')), 3000);
      });
      expect(received).to.equal('line 1\n');
      for (let i = 0; i < 50 && !logs.aborted; i++) await new Promise((r) => setTimeout(r, 20));
      expect(logs.aborted).to.equal(true);
    });
  });

  describe('exec over SPDY', () => {
    it('negotiates v4, bridges stdin/stdout/stderr and reports exit code 3 as a NonZeroExitCode Status', async () => {
      const res = await spdy('/exec/ns/p/c?command=cat&command=-n&input=1&output=1&error=1', ['v5.channel.k8s.io', 'v4.channel.k8s.io', 'v3.channel.k8s.io']);
      expect(res.upgraded).to.equal(true);
      if (!res.upgraded) return;
      expect(res.protocol).to.equal('v4.channel.k8s.io');
      const [error, stdin, stdout, stderr] = await openStreams(res.session, ['error', 'stdin', 'stdout', 'stderr']);
      error!.end();
      const outP = readAll(stdout!);
      const errP = readAll(stderr!);
      const statusP = readAll(error!);
      stdin!.write('hello ');
      // More than the 64 KiB SPDY initial window, to prove nothing stalls on flow control.
      const big = 'x'.repeat(200 * 1024);
      stdin!.end(big);
      expect(await outP).to.equal('hello ' + big);
      expect(await errP).to.equal('to stderr\n');
      expect(JSON.parse(await statusP)).to.deep.equal({
        metadata: {},
        status: 'Failure',
        message: 'command terminated with non-zero exit code: exit status 3',
        reason: 'NonZeroExitCode',
        details: { causes: [{ reason: 'ExitCode', message: '3' }] },
      });
      expect(exec.requests[0]).to.deep.equal({
        namespace: 't-ns',
        pod: 'p-delegate',
        container: 'c',
        command: ['cat', '-n'],
        stdin: true,
        stdout: true,
        stderr: true,
        tty: false,
      });
    });

    it('with a TTY drops stderr, parses resize messages split across frames', async () => {
      const res = await spdy('/exec/ns/p/c?command=sh&input=1&output=1&error=1&tty=1', ['v4.channel.k8s.io']);
      if (!res.upgraded) throw new Error('not upgraded');
      const [error, stdin, stdout, resize] = await openStreams(res.session, ['error', 'stdin', 'stdout', 'resize']);
      error!.end();
      const statusP = readAll(error!);
      const outP = readAll(stdout!);
      resize!.write('{"Width":80,"He');
      resize!.write('ight":24}\n{"width":100,"height":40}\n');
      resize!.end();
      stdin!.end('ls\n');
      expect(await outP).to.equal('ls\n');
      expect(JSON.parse(await statusP).reason).to.equal('NonZeroExitCode');
      expect(exec.requests[0]!.stderr).to.equal(false);
      expect(exec.resizes).to.deep.equal([
        { width: 80, height: 24 },
        { width: 100, height: 40 },
      ]);
    });

    it('refuses with 403 and X-Accepted-Stream-Protocol-Versions when no protocol matches', async () => {
      const res = await spdy('/exec/ns/p/c?command=sh&output=1', ['v9.channel.k8s.io']);
      expect(res.upgraded).to.equal(false);
      if (res.upgraded) return;
      expect(res.statusCode).to.equal(403);
      expect(String(res.headers['x-accepted-stream-protocol-versions'])).to.contain('v4.channel.k8s.io');
    });

    it('answers 400 before upgrading when no stream is requested', async () => {
      const res = await spdy('/exec/ns/p/c?command=sh', ['v4.channel.k8s.io']);
      expect(res.upgraded).to.equal(false);
      if (!res.upgraded) expect(res.statusCode).to.equal(400);
    });

    it('outlives a backend that writes to stdout after it returned', async () => {
      let lateWrite: Promise<void> | undefined;
      exec.attach = async (_req, io) => {
        const stdout = io.stdout!;
        // Once the server ended stdout and stopped waiting on it; the stream lives on while
        // the client's half of it is open.
        lateWrite = new Promise((resolve) =>
          stdout.once('finish', () =>
            setImmediate(() => {
              stdout.write('late');
              // The write's error is emitted on the next tick.
              setImmediate(resolve);
            }),
          ),
        );
        return { exitCode: 0 };
      };
      const res = await spdy('/attach/ns/p/c?output=1', ['v4.channel.k8s.io']);
      if (!res.upgraded) throw new Error('not upgraded');
      const [error, stdout] = await openStreams(res.session, ['error', 'stdout']);
      error!.end();
      expect(await readAll(stdout!)).to.equal('');
      expect(JSON.parse(await readAll(error!))).to.deep.equal({ metadata: {}, status: 'Success' });
      await lateWrite;
    });

    it('attach writes Success on the error stream; pings are echoed', async () => {
      const res = await spdy('/attach/ns/p/c?output=1', ['v4.channel.k8s.io']);
      if (!res.upgraded) throw new Error('not upgraded');
      expect(await res.session.ping()).to.be.a('number');
      const [error, stdout] = await openStreams(res.session, ['error', 'stdout']);
      error!.end();
      expect(await readAll(stdout!)).to.equal('attached');
      expect(JSON.parse(await readAll(error!))).to.deep.equal({ metadata: {}, status: 'Success' });
    });
  });

  describe('a failure while answering a failure', () => {
    // Each handler answers its own failures. Should that answer fail too (here: the log sink
    // throws), the connection is dropped and the error logged: a rejection left unhandled
    // would end the process.
    let broken: KubeletServer;
    let brokenPort: number;
    let logged: string[];

    beforeEach(async () => {
      logged = [];
      const logger = silentLogger();
      Object.assign(logger, {
        warn: () => {
          throw new Error('log sink down');
        },
        error: (message: string) => logged.push(message),
      });
      broken = createKubeletServer({
        port: 0,
        tls: { certPem: tls.server.certPem, keyPem: tls.server.keyPem },
        resolver: {
          async resolve() {
            throw new Error('registry down');
          },
        },
        nodeUsage: {
          async nodeUsage() {
            throw new Error('registry down');
          },
        },
        auth,
        logger: logger as Logger,
      });
      brokenPort = await broken.listen();
    });
    afterEach(async () => broken.close());

    it('drops the connection of logs, node-scoped reads and upgrades, and logs why', async () => {
      const bearer = 'Authorization: Bearer good\r\n';
      for (const request of [
        `GET /containerLogs/ns/p/c HTTP/1.1\r\nHost: x\r\n${bearer}\r\n`,
        `GET /metrics/resource/admiralty-cluster-c1 HTTP/1.1\r\nHost: x\r\n${bearer}\r\n`,
        `POST /exec/ns/p/c?command=sh&output=1 HTTP/1.1\r\nHost: x\r\n${bearer}Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n`,
      ]) {
        expect(await rawExchange(brokenPort, request), request.split('\r\n')[0]).to.equal('');
      }
      expect(logged).to.deep.equal(Array(3).fill('kubelet request handler failed'));
    });
  });

  describe('port-forward over SPDY', () => {
    it('pairs data and error streams by requestid and bridges them to the backend', async () => {
      const res = await spdy('/portForward/ns/p', ['portforward.k8s.io']);
      if (!res.upgraded) throw new Error('not upgraded');
      expect(res.protocol).to.equal('portforward.k8s.io');
      const error = await res.session.openStream({ streamtype: ['error'], port: ['8080'], requestid: ['0'] });
      error.end();
      const data = await res.session.openStream({ streamtype: ['data'], port: ['8080'], requestid: ['0'] });
      data.end('ping');
      expect(await readAll(data)).to.equal('ping');

      const error2 = await res.session.openStream({ streamtype: ['error'], port: ['9'], requestid: ['1'] });
      error2.end();
      const data2 = await res.session.openStream({ streamtype: ['data'], port: ['9'], requestid: ['1'] });
      expect(await readAll(error2)).to.contain('connection refused');
      data2.destroy();
      await res.session.close();
    });
  });
});
