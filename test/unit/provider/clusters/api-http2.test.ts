import { expect } from 'chai';
import http2 from 'node:http2';
import https from 'node:https';
import net, { type AddressInfo, type Socket } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { gzipSync } from 'node:zlib';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { createCA } from '../../../../certs/create-ca.js';
import { createServingCert } from '../../../../certs/create-serving-cert.js';
import { apiCallsOverHttp2, ApiHttp2Transport, type ApiHttp2Options } from '../../../../provider/clusters/api-http2.js';
import { reuseConnections } from '../../../../provider/clusters/connection-reuse.js';
import { withRequestDeadline } from '../../../../provider/clusters/request-deadline.js';
import { classifyApiError } from '../../../../provider/core/errors.js';
import { USER_AGENT } from '../../../../provider/core/version.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const NAMESPACES = JSON.stringify({ kind: 'NamespaceList', apiVersion: 'v1', metadata: { resourceVersion: '7' }, items: [{ metadata: { name: 'a' } }] });

describe('apiCallsOverHttp2', () => {
  const ca = createCA({ commonName: 'test-ca' });
  const serving = createServingCert({ ca, commonName: 'localhost', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0)) await close();
  });

  /** What the test server saw. */
  interface Seen {
    /** TLS connections accepted. */
    connections: number;
    /** Per call: the protocol version and the Authorization header. */
    calls: { version: string; authorization?: string; userAgent?: string; path: string }[];
    /** The most streams open at once. */
    peak: number;
  }

  type Handler = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse, seen: Seen) => void;
  const answer: Handler = (_req, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end(NAMESPACES);

  /** A TLS server on 127.0.0.1 speaking HTTP/2 and HTTP/1.1 (or only HTTP/1.1), each call to `handle`. */
  async function startServer(handle: Handler = answer, opts: { http1Only?: boolean; settings?: http2.Settings } = {}): Promise<{ port: number; seen: Seen }> {
    const seen: Seen = { connections: 0, calls: [], peak: 0 };
    let open = 0;
    const onRequest = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => {
      seen.calls.push({ version: req.httpVersion, authorization: req.headers.authorization, userAgent: req.headers['user-agent'], path: req.url });
      seen.peak = Math.max(seen.peak, ++open);
      res.on('close', () => open--);
      handle(req, res, seen);
    };
    const tlsOptions = { cert: serving.certPem, key: serving.keyPem };
    const server = opts.http1Only
      ? https.createServer(tlsOptions, onRequest as unknown as Parameters<typeof https.createServer>[1])
      : http2.createSecureServer({ ...tlsOptions, allowHTTP1: true, settings: opts.settings }, onRequest);
    const sockets = new Set<Socket>();
    server.on('secureConnection', (s: Socket) => {
      seen.connections++;
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    closers.push(async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    });
    return { port: (server.address() as AddressInfo).port, seen };
  }

  function kubeConfig(port: number): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `https://127.0.0.1:${port}`, caData: Buffer.from(ca.certPem).toString('base64'), skipTLSVerify: false }],
      users: [{ name: 'u', token: 'secret-token' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    return kc;
  }

  /** A CoreV1Api as the provider builds it: pooled agents, a deadline, HTTP/2. */
  function coreApi(port: number, opts: ApiHttp2Options & { deadlineMs?: number } = {}): CoreV1Api {
    const kc = reuseConnections(kubeConfig(port));
    withRequestDeadline(kc, opts.deadlineMs ?? 30_000);
    return apiCallsOverHttp2(kc, new ApiHttp2Transport(opts)).makeApiClient(CoreV1Api);
  }

  async function failure(call: Promise<unknown>, what = 'the call'): Promise<Error> {
    try {
      await call;
    } catch (err) {
      return err as Error;
    }
    throw new Error(`${what} succeeded`);
  }

  it('sends concurrent calls over one HTTP/2 connection, with their credentials', async () => {
    const { port, seen } = await startServer((req, res) => void setTimeout(() => answer(req, res, seen), 20));
    const api = coreApi(port);
    const lists = await Promise.all(Array.from({ length: 50 }, () => api.listNamespace()));
    expect(lists.map((l) => l.items[0]!.metadata?.name)).to.deep.equal(Array(50).fill('a'));
    expect(lists[0]!.metadata?.resourceVersion).to.equal('7');
    expect(seen.connections).to.equal(1);
    expect(seen.calls).to.have.length(50);
    expect(new Set(seen.calls.map((c) => c.version))).to.deep.equal(new Set(['2.0']));
    expect(new Set(seen.calls.map((c) => c.authorization))).to.deep.equal(new Set(['Bearer secret-token']));
    // The calls overlapped on the one connection.
    expect(seen.peak).to.be.greaterThan(1);
  });

  it('names the provider in User-Agent, over HTTP/2 and HTTP/1.1 (the apiserver names field managers after it)', async () => {
    for (const http1Only of [false, true]) {
      const { port, seen } = await startServer(answer, { http1Only });
      await coreApi(port).listNamespace();
      await coreApi(port, { userAgent: 'someone-else/1' }).listNamespace();
      expect(seen.calls.map((c) => [c.version, c.userAgent])).to.deep.equal([
        [http1Only ? '1.1' : '2.0', USER_AGENT],
        [http1Only ? '1.1' : '2.0', 'someone-else/1'],
      ]);
    }
    expect(USER_AGENT).to.match(/^admiralty-ts\//);
  });

  it('sends a body and reads an error Status as client-node does', async () => {
    const bodies: string[] = [];
    const { port } = await startServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        bodies.push(body);
        res.writeHead(409, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'AlreadyExists', code: 409 }));
      });
    });
    const err = await failure(coreApi(port).createNamespace({ body: { metadata: { name: 'n' } } }));
    expect(classifyApiError(err)).to.equal('AlreadyExists');
    expect(JSON.parse(bodies[0]!)).to.deep.include({ metadata: { name: 'n' } });
  });

  it('takes a gzip answer, and asks for it', async () => {
    let acceptEncoding: string | undefined;
    const { port } = await startServer((req, res) => {
      acceptEncoding = String(req.headers['accept-encoding']);
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }).end(gzipSync(NAMESPACES));
    });
    const list = await coreApi(port).listNamespace();
    expect(acceptEncoding).to.equal('gzip');
    expect(list.items[0]!.metadata?.name).to.equal('a');
  });

  it('fails an answer over its bound, compressed or not, as a network failure', async () => {
    const big = JSON.stringify({ kind: 'NamespaceList', apiVersion: 'v1', metadata: {}, items: [], pad: 'x'.repeat(10_000) });
    let gzip = false;
    const { port } = await startServer((_req, res) => {
      if (gzip) res.writeHead(200, { 'content-encoding': 'gzip' }).end(gzipSync(big));
      else res.writeHead(200).end(big);
    });
    const api = coreApi(port, { maxAnswerBytes: 5000 });
    const plain = await failure(api.listNamespace());
    expect(plain.message).to.match(/larger than 5000 bytes/);
    expect(classifyApiError(plain)).to.equal('Network');
    gzip = true;
    // 10 kB of one letter compresses far below the bound: it is the decompressed size that counts.
    const compressed = await failure(api.listNamespace());
    expect(compressed.message).to.match(/does not decompress/);
    expect(classifyApiError(compressed)).to.equal('Network');
  });

  describe('the structure of a JSON answer (maxAnswerTokens)', () => {
    const list = (pad: string) => `{"kind":"NamespaceList","apiVersion":"v1","metadata":{},"items":[],"pad":${pad}}`;
    /** 1.5 MiB of empty arrays: about a million tokens, 20 MiB of heap once parsed. */
    const flat = list(`[${'[],'.repeat(2 ** 19)}[]]`);
    /** Nested 200 deep, and over 1 MiB (answers up to 1 MiB are not scanned). */
    const deep = list(`[${'['.repeat(200)}${']'.repeat(200)},"${'x'.repeat(2 ** 20)}"]`);
    type Reply = { body: string | Buffer; headers: Record<string, string> };
    const json = (body: string | Buffer, headers: Record<string, string> = {}): Reply => ({ body, headers: { 'content-type': 'application/json', ...headers } });

    async function serve(http1Only: boolean): Promise<{ port: number; reply: (r: Reply) => void }> {
      let current = json(NAMESPACES);
      const { port } = await startServer((_req, res) => void res.writeHead(200, current.headers).end(current.body), { http1Only });
      return { port, reply: (r) => (current = r) };
    }

    for (const http1Only of [false, true]) {
      const protocol = http1Only ? 'HTTP/1.1' : 'HTTP/2';

      it(`refuses too many tokens or too deep a nesting as too large, quoting none of it, over ${protocol}`, async () => {
        const { port, reply } = await serve(http1Only);
        const api = coreApi(port, { maxAnswerTokens: 100_000 });
        const refusals: [string, Reply, RegExp][] = [
          ['too many tokens', json(flat), /^answer of \/api\/v1\/namespaces has more than 100000 arrays, objects and items/],
          ['too deep', json(deep), /^answer of \/api\/v1\/namespaces is nested deeper than 100 levels$/],
          ['gzip', json(gzipSync(flat), { 'content-encoding': 'gzip' }), /has more than 100000 arrays/],
          // client-node reads the media type without parameters, spaces or case, and parses any +json.
          ['a JSON type spelled otherwise', json(flat, { 'content-type': 'Application/Merge-Patch+JSON ; charset=utf-8' }), /has more than 100000 arrays/],
          ['no content type', { body: flat, headers: {} }, /has more than 100000 arrays/],
        ];
        for (const [what, r, message] of refusals) {
          reply(r);
          const err = await failure(api.listNamespace(), what);
          expect(err.message, what).to.match(message);
          expect(err.message, what).to.not.contain('[]');
          expect(err.name, what).to.equal('FetchError');
          expect((err as { type?: string }).type, what).to.equal('max-size');
          expect(classifyApiError(err), what).to.equal('Network');
        }
        // The session or connection serves the next call.
        reply(json(NAMESPACES));
        expect((await api.listNamespace()).items).to.have.length(1);
      });

      it(`takes the same answers with no maxAnswerTokens, and big answers of few tokens with it, over ${protocol}`, async () => {
        const { port, reply } = await serve(http1Only);
        const unchecked = coreApi(port);
        for (const body of [flat, deep]) {
          reply(json(body));
          expect((await unchecked.listNamespace()).kind).to.equal('NamespaceList');
        }
        const checked = coreApi(port, { maxAnswerTokens: 10_000 });
        // 3 MiB of 300 namespaces with a 10 kB annotation each: a few thousand tokens.
        const items = Array.from({ length: 300 }, (_, i) => ({ metadata: { name: `ns-${i}`, annotations: { note: `${i}`.padEnd(10_000, 'x') } } }));
        reply(json(JSON.stringify({ kind: 'NamespaceList', apiVersion: 'v1', metadata: {}, items })));
        const got = await checked.listNamespace();
        expect(got.items).to.have.length(300);
        expect(got.items[299]!.metadata?.annotations?.note).to.have.length(10_000);
        // Text is not JSON: client-node hands it on as it is, so it is not scanned.
        reply({ body: flat, headers: { 'content-type': 'text/plain' } });
        expect(await checked.readNamespacedPodLog({ name: 'p', namespace: 'n' })).to.have.length(flat.length);
      });
    }
  });

  it('goes on over HTTP/1.1 with a server that does not choose h2', async () => {
    const { port, seen } = await startServer(answer, { http1Only: true });
    const api = coreApi(port);
    for (let i = 0; i < 3; i++) expect((await api.listNamespace()).items).to.have.length(1);
    expect(seen.calls.map((c) => c.version)).to.deep.equal(['1.1', '1.1', '1.1']);
    // The server is not asked again: the calls after go over the pooled HTTP/1.1 connection.
    const connections = seen.connections;
    for (let i = 0; i < 3; i++) await api.listNamespace();
    expect(seen.connections).to.equal(connections);
  });

  it('bounds an answer over HTTP/1.1 as over HTTP/2 (a server that does not choose h2 is no way around it)', async () => {
    const big = JSON.stringify({ kind: 'NamespaceList', apiVersion: 'v1', metadata: {}, items: [], pad: 'x'.repeat(10_000) });
    let gzip = false;
    const { port, seen } = await startServer(
      (_req, res) => {
        if (gzip) res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }).end(gzipSync(big));
        else res.writeHead(200, { 'content-type': 'application/json' }).end(big);
      },
      { http1Only: true },
    );
    const api = coreApi(port, { maxAnswerBytes: 5000 });
    const plain = await failure(api.listNamespace());
    expect(plain.message).to.match(/larger than 5000 bytes/);
    expect(classifyApiError(plain)).to.equal('Network');
    gzip = true;
    const compressed = await failure(api.listNamespace());
    expect(compressed.message).to.match(/does not decompress/);
    expect(classifyApiError(compressed)).to.equal('Network');
    expect(seen.calls.map((c) => c.version)).to.deep.equal(['1.1', '1.1']);
  });

  it("follows no redirect, over HTTP/2 or HTTP/1.1: a target's server may not send our calls elsewhere", async () => {
    const elsewhere = await startServer();
    for (const http1Only of [false, true]) {
      const { port } = await startServer((_req, res) => void res.writeHead(307, { location: `https://127.0.0.1:${elsewhere.port}/api/v1/namespaces` }).end(), { http1Only });
      const err = await failure(coreApi(port).listNamespace());
      expect((err as { code?: number }).code).to.equal(307);
    }
    expect(elsewhere.seen.calls).to.deep.equal([]);
  });

  it('holds an answer sent a byte at a time in memory close to its length, over HTTP/2 and HTTP/1.1', async function () {
    this.timeout(30_000);
    // Each DATA frame or TLS record is handed on as a Buffer of its own, about a hundred bytes of
    // heap: the bound on an answer counts bytes, not what holds them.
    const bytes = 80_000;
    /** MiB of heap held while the answer is read. */
    const held: Record<string, number> = {};
    for (const http1Only of [false, true]) {
      let sent = 0;
      const { port } = await startServer(
        (_req, res) => {
          res.writeHead(200, { 'content-type': 'application/json' });
          const more = () => {
            if (res.destroyed || sent === bytes) return;
            res.write(' ');
            sent++;
            setImmediate(more);
          };
          more();
        },
        { http1Only },
      );
      gc();
      const before = process.memoryUsage().heapUsed;
      const call = failure(coreApi(port, { deadlineMs: 20_000 }).listNamespace());
      while (sent < bytes) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 100));
      gc();
      const heldMiB = (process.memoryUsage().heapUsed - before) / 2 ** 20;
      for (const close of closers.splice(0)) await close();
      await call;
      held[http1Only ? 'HTTP/1.1' : 'HTTP/2'] = heldMiB;
    }
    // 80 kB held as they came were 15 MiB over HTTP/2.
    for (const [protocol, mib] of Object.entries(held)) expect(mib, protocol).to.be.below(4);
  });

  it("keeps to the server's limit of concurrent streams", async () => {
    const { port, seen } = await startServer((req, res) => void setTimeout(() => answer(req, res, seen), 10), { settings: { maxConcurrentStreams: 3 } });
    const api = coreApi(port);
    await Promise.all(Array.from({ length: 30 }, () => api.listNamespace()));
    expect(seen.calls).to.have.length(30);
    expect(seen.peak).to.equal(3);
    expect(seen.connections).to.equal(1);
  });

  it('sends a stream the server refused once more', async () => {
    let refuse = true;
    const { port, seen } = await startServer((req, res) => {
      if (refuse) {
        refuse = false;
        req.stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
        return;
      }
      answer(req, res, seen);
    });
    const list = await coreApi(port).listNamespace();
    expect(list.items).to.have.length(1);
    expect(seen.calls).to.have.length(2);
  });

  it('fails a reset stream as a network failure, without sending it again', async () => {
    const { port, seen } = await startServer((req) => void req.stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
    const err = await failure(coreApi(port).listNamespace());
    expect(classifyApiError(err)).to.equal('Network');
    expect(seen.calls).to.have.length(1);
  });

  it('opens a new session after the server sends GOAWAY', async () => {
    let goaway = true;
    const { port, seen } = await startServer((req, res) => {
      answer(req, res, seen);
      if (goaway) {
        goaway = false;
        req.stream.session?.close();
      }
    });
    const api = coreApi(port);
    await api.listNamespace();
    await new Promise((r) => setTimeout(r, 50));
    await api.listNamespace();
    expect(seen.calls).to.have.length(2);
    expect(seen.connections).to.equal(2);
  });

  it('aborts a call at its deadline with the error node-fetch gives, and keeps a live session', async () => {
    const { port, seen } = await startServer((req, res) => {
      if (req.url.includes('hang')) return;
      answer(req, res, seen);
    });
    const api = coreApi(port, { deadlineMs: 200 });
    const err = await failure(api.readNamespace({ name: 'hang' }));
    expect(err.name).to.equal('AbortError');
    expect(classifyApiError(err)).to.equal('Network');
    // The ping that followed was answered: the same connection serves the next call.
    await new Promise((r) => setTimeout(r, 100));
    await api.listNamespace();
    expect(seen.connections).to.equal(1);
  });

  it('drops a session whose connection went silent, once a ping goes unanswered', async () => {
    const { port: serverPort, seen } = await startServer();
    // A relay that can stop carrying bytes, as a connection cut without a FIN.
    let frozen = false;
    const relay = net.createServer((client) => {
      const upstream = net.connect(serverPort, '127.0.0.1');
      client.on('data', (d) => void (frozen ? undefined : upstream.write(d)));
      upstream.on('data', (d) => void (frozen ? undefined : client.write(d)));
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      client.on('error', () => undefined);
      upstream.on('error', () => undefined);
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => relay.close(() => r())));
    const api = coreApi((relay.address() as AddressInfo).port, { deadlineMs: 150, pingTimeoutMs: 150 });
    await api.listNamespace();
    frozen = true;
    expect((await failure(api.listNamespace())).name).to.equal('AbortError');
    // The deadline sent a ping; none came back: the session is gone, and a new one is opened.
    await new Promise((r) => setTimeout(r, 500));
    frozen = false;
    await api.listNamespace();
    expect(seen.connections).to.equal(2);
  });

  it('fails a call to a closed port as a network failure with its code', async () => {
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const err = await failure(coreApi(port).listNamespace());
    expect(err.name).to.equal('FetchError');
    expect((err as NodeJS.ErrnoException).code).to.equal('ECONNREFUSED');
    expect(classifyApiError(err)).to.equal('Network');
  });

  it('leaves calls whose agent it does not know to client-node (no pooled agent: a proxy, plain http)', async () => {
    const { port, seen } = await startServer();
    // No reuseConnections: client-node's own agent, which carries no connection options.
    const kc = apiCallsOverHttp2(kubeConfig(port));
    await kc.makeApiClient(CoreV1Api).listNamespace();
    expect(seen.calls.map((c) => c.version)).to.deep.equal(['1.1']);
  });
});
