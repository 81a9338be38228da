import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import https from 'node:https';
import type { ClientHttp2Session, SecureClientSessionOptions } from 'node:http2';
import { expect } from 'chai';
import { createRouter, defaultBodyBudget, json, text, type BodyBudgetLimits, type Route, type RouteCall } from '../../../../provider/core/http-router.js';
import { silentLogger } from '../../../../provider/core/logger.js';
import { createWebhookServer, type WebhookServer } from '../../../../webhook/create-webhook-server.js';
import { h2Connect, h2Request } from '../../../support/h2.js';
import { makeTlsFixtures } from '../kubelet/tls-fixtures.js';

const fixtures = makeTlsFixtures();

interface Reply {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
}

/** One HTTP/1.1 call on a fresh connection; `chunked` sends the body without a Content-Length. */
function call(port: number, method: string, path: string, body?: string, headers: http.OutgoingHttpHeaders = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('createRouter', () => {
  const calls: RouteCall[] = [];
  const routes: Route[] = [
    { method: 'GET', path: '/healthz', handle: () => text(200, 'ok') },
    { method: 'POST', path: '/echo', maxBodyBytes: 16, handle: (c) => (calls.push(c), json(200, { got: c.body.toString('utf8') })) },
    {
      method: 'POST',
      path: '/throws',
      handle: () => {
        throw new Error('boom');
      },
    },
    {
      method: 'POST',
      path: '/rejects',
      handle: async () => {
        throw new Error('boom');
      },
    },
    { method: 'POST', path: '/guarded/x', handle: (c) => (calls.push(c), text(200, 'in')) },
  ];
  const router = createRouter({
    routes,
    guards: [{ prefix: '/guarded', check: ({ path }) => (path.endsWith('/x') ? json(403, { Error: 'no' }) : undefined) }],
    logger: silentLogger(),
  });
  let server: http.Server;
  let port: number;
  before(async () => {
    server = http.createServer(router);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  beforeEach(() => (calls.length = 0));

  const table: { name: string; method: string; path: string; body?: string; headers?: http.OutgoingHttpHeaders; status: number; reply: RegExp }[] = [
    { name: 'a GET route', method: 'GET', path: '/healthz', status: 200, reply: /^ok$/ },
    { name: 'a path with a query', method: 'GET', path: '/healthz?verbose=1', status: 200, reply: /^ok$/ },
    { name: 'a POST with its body', method: 'POST', path: '/echo', body: '{"a":1}', status: 200, reply: /^\{"got":"\{\\"a\\":1\}"\}$/ },
    { name: 'an unknown path', method: 'GET', path: '/nope', status: 404, reply: /not found/ },
    { name: 'a path that only shares a prefix', method: 'GET', path: '/healthzz', status: 404, reply: /not found/ },
    { name: 'another method', method: 'PUT', path: '/echo', body: '{}', status: 405, reply: /method PUT not allowed/ },
    { name: 'a declared body past the limit', method: 'POST', path: '/echo', body: 'x'.repeat(17), status: 413, reply: /larger than 16 bytes/ },
    { name: 'a streamed body past the limit', method: 'POST', path: '/echo', body: 'x'.repeat(17), headers: { 'transfer-encoding': 'chunked' }, status: 413, reply: /larger than 16 bytes/ },
    { name: 'a compressed body', method: 'POST', path: '/echo', body: 'xx', headers: { 'content-encoding': 'gzip' }, status: 415, reply: /content encoding "gzip"/ },
    { name: 'a route that throws', method: 'POST', path: '/throws', body: '{}', status: 500, reply: /^internal error$/ },
    { name: 'a route that rejects', method: 'POST', path: '/rejects', body: '{}', status: 500, reply: /^internal error$/ },
    { name: 'a call its guard refuses', method: 'POST', path: '/guarded/x', body: '{}', status: 403, reply: /^\{"Error":"no"\}$/ },
  ];
  for (const row of table) {
    it(`answers ${row.name}: ${row.status}`, async () => {
      const reply = await call(port, row.method, row.path, row.body, row.headers);
      expect(reply.status).to.equal(row.status);
      expect(reply.body).to.match(row.reply);
      expect(Number(reply.headers['content-length'])).to.equal(Buffer.byteLength(reply.body));
    });
  }

  it('says which methods a path allows', async () => {
    expect((await call(port, 'GET', '/echo')).headers.allow).to.equal('POST');
  });

  it('calls no route when the guard refuses, nor one with a body past its limit', async () => {
    await call(port, 'POST', '/guarded/x', '{}');
    await call(port, 'POST', '/echo', 'x'.repeat(17), { 'transfer-encoding': 'chunked' });
    expect(calls).to.deep.equal([]);
  });

  it('closes an HTTP/1.1 connection whose body it refused, so the rest is not read as a request', async () => {
    const s = net.connect(port, '127.0.0.1');
    await once(s, 'connect');
    // The remaining bytes would parse as a request of their own.
    s.write(`POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 60\r\n\r\n${'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'.padEnd(60, ' ')}`);
    let received = '';
    s.on('data', (d: Buffer) => (received += d.toString()));
    await once(s, 'close');
    expect(received).to.match(/^HTTP\/1.1 413/);
    expect(received).to.not.match(/200 OK/);
  });

  describe('over HTTP/2', () => {
    let h2: WebhookServer;
    let session: ClientHttp2Session;
    before(async () => {
      h2 = createWebhookServer({ pair: { certPem: fixtures.server.certPem, keyPem: fixtures.server.keyPem }, handler: router });
      await new Promise<void>((r) => h2.server.listen(0, '127.0.0.1', r));
      session = await h2Connect((h2.server.address() as AddressInfo).port, { ca: fixtures.ca.certPem });
    });
    after(async () => {
      session.destroy();
      await h2.close();
    });

    it('answers the same, and a refused body ends only its stream', async () => {
      expect(await h2Request(session, '/healthz')).to.include({ status: 200, body: 'ok' });
      expect((await h2Request(session, '/echo', '{"a":1}')).body).to.equal('{"got":"{\\"a\\":1}"}');
      expect((await h2Request(session, '/echo', 'x'.repeat(1000))).status).to.equal(413);
      expect((await h2Request(session, '/nope')).status).to.equal(404);
      expect((await h2Request(session, '/throws', '{}')).status).to.equal(500);
      expect((await h2Request(session, '/echo', '{}')).status, 'same connection, next stream').to.equal(200);
      expect(session.closed).to.equal(false);
    });

    it("hands routes and guards the session's socket, one object for all its streams", async () => {
      await h2Request(session, '/echo', '{}');
      await h2Request(session, '/echo', '{}');
      expect(calls).to.have.length(2);
      expect(calls[0]!.connection).to.equal(calls[1]!.connection);
      expect(calls[0]!.connection.remotePort).to.equal((session.socket as net.Socket).localPort);
    });
  });
});

describe('createRouter body budget', () => {
  it("defaults to two bodies of the default limit per connection and 64 MiB in all, more for a route that takes more, and 64 KiB of each connection's own", () => {
    const MiB = 2 ** 20;
    const mutate: Route = { method: 'POST', path: '/mutate', handle: () => text(200, '') };
    const healthz: Route = { method: 'GET', path: '/healthz', maxBodyBytes: 1000 * MiB, handle: () => text(200, '') };
    expect(defaultBodyBudget([mutate, healthz])).to.deep.equal({ perConnectionBytes: 16 * MiB, totalBytes: 64 * MiB, reservedPerConnectionBytes: 64 * 2 ** 10 });
    const filter: Route = { method: 'POST', path: '/filter', maxBodyBytes: 64 * MiB, handle: () => text(200, '') };
    expect(defaultBodyBudget([mutate, filter])).to.deep.equal({ perConnectionBytes: 64 * MiB, totalBytes: 128 * MiB, reservedPerConnectionBytes: 64 * 2 ** 10 });
  });

  // Bodies of 60 bytes: one connection holds one (100), the server two (150), past each
  // connection's reserve of 10 when a test gives one.
  const body = 'x'.repeat(60);
  let gate: { promise: Promise<void>; open: () => void };
  const newGate = () => {
    let open!: () => void;
    const promise = new Promise<void>((r) => (open = r));
    gate = { promise, open };
  };
  const refused: string[] = [];
  const routes: Route[] = [
    { method: 'POST', path: '/take', maxBodyBytes: 64, handle: () => text(200, 'taken') },
    { method: 'POST', path: '/hold', maxBodyBytes: 64, handle: async () => (await gate.promise, text(200, 'held')) },
  ];
  const servers: WebhookServer[] = [];
  const sessions: ClientHttp2Session[] = [];
  /** A webhook server (HTTP/2 and HTTP/1.1) on the router, asking clients for a certificate of the fixtures' CA. */
  const serve = async (bodyBudget: BodyBudgetLimits) => {
    const router = createRouter({ routes, bodyBudget, onBodyRefused: (reason) => refused.push(reason), logger: silentLogger() });
    const server = createWebhookServer({ pair: { certPem: fixtures.server.certPem, keyPem: fixtures.server.keyPem }, handler: router, clientCaPems: [fixtures.ca.certPem] });
    servers.push(server);
    await new Promise<void>((r) => server.server.listen(0, '127.0.0.1', r));
    const port = (server.server.address() as AddressInfo).port;
    return {
      port,
      connect: async (options: SecureClientSessionOptions = {}) => {
        const s = await h2Connect(port, { ca: fixtures.ca.certPem, ...options });
        sessions.push(s);
        return s;
      },
    };
  };
  after(async () => {
    for (const s of sessions) s.destroy();
    for (const server of servers) await server.close();
  });
  beforeEach(() => {
    refused.length = 0;
    newGate();
  });
  /** Gives the calls sent so far time to reach the server. */
  const settle = () => new Promise((r) => setTimeout(r, 100));
  /** A call to /take whose body stays in progress: `bytes` of the 64 it declares, until `finish`. */
  const holdBody = (session: ClientHttp2Session, bytes: number) => {
    const stream = session.request({ ':method': 'POST', ':path': '/take', 'content-length': '64' });
    stream.on('error', () => undefined);
    stream.write('x'.repeat(bytes));
    const answer = new Promise<number>((resolve) => stream.on('response', (h) => resolve(Number(h[':status']))));
    return { answer, finish: () => (stream.end('x'.repeat(64 - bytes)), answer) };
  };

  it("refuses a body past its connection's budget, then one past the server's, and takes calls again once bodies are taken", async () => {
    const { connect } = await serve({ totalBytes: 150, perConnectionBytes: 100 });
    const a = await connect();
    const b = await connect();
    const c = await connect();
    const first = holdBody(a, 60);
    await settle();
    const sameConnection = await h2Request(a, '/take', body);
    expect(sameConnection.status).to.equal(503);
    expect(sameConnection.body).to.match(/this connection/);
    expect(sameConnection.headers['retry-after']).to.equal('1');
    const second = holdBody(b, 60);
    await settle();
    const third = await h2Request(c, '/take', body);
    expect(third.status).to.equal(503);
    expect(third.body).to.match(/the server/);
    expect(refused).to.deep.equal(['connection_budget', 'server_budget']);
    expect(await first.finish()).to.equal(200);
    expect(await second.finish()).to.equal(200);
    expect(a.closed, 'a refused stream leaves its connection up').to.equal(false);
    // Given back: the same connections may hold bodies again.
    expect((await Promise.all([h2Request(a, '/take', body), h2Request(c, '/take', body)])).map((r) => r.status)).to.deep.equal([200, 200]);
  });

  it('gives a body back once its route has taken it, without waiting for the answer to be sent', async () => {
    // A client that never reads its answers (an HTTP/2 zero window) kept them all otherwise.
    const { connect } = await serve({ totalBytes: 150, perConnectionBytes: 100 });
    const pending = [];
    for (let i = 0; i < 4; i++) {
      pending.push(h2Request(await connect(), '/hold', body));
      await settle();
    }
    gate.open();
    expect((await Promise.all(pending)).map((r) => r.status)).to.deep.equal([200, 200, 200, 200]);
    expect(refused).to.deep.equal([]);
  });

  it('gives back the bytes of calls that were cut off before their body ended', async () => {
    const { connect } = await serve({ totalBytes: 150, perConnectionBytes: 100 });
    // Three connections each send 50 of 64 declared bytes, then go: 150 bytes, the whole
    // budget, if they were kept.
    for (let i = 0; i < 3; i++) {
      const s = await connect();
      holdBody(s, 50);
      await settle();
      s.destroy();
    }
    await settle();
    const held = [holdBody(await connect(), 60), holdBody(await connect(), 60)];
    await settle();
    expect(await Promise.all(held.map((h) => h.finish()))).to.deep.equal([200, 200]);
    expect(refused).to.deep.equal([]);
  });

  it('lets each connection hold its reserve whatever the others hold', async () => {
    // As 16 connections that each stall an 8 MiB /mutate body left the apiserver's review no room.
    const { connect } = await serve({ totalBytes: 150, perConnectionBytes: 100, reservedPerConnectionBytes: 10 });
    // Each holds 60, 50 of them past its reserve: the total of 150 is held.
    const holders = [holdBody(await connect(), 60), holdBody(await connect(), 60), holdBody(await connect(), 60)];
    await settle();
    const c = await connect();
    expect((await h2Request(c, '/take', 'x'.repeat(10))).status, 'within its reserve').to.equal(200);
    expect((await h2Request(c, '/take', 'x'.repeat(11))).status, 'past it: the total is held').to.equal(503);
    expect(refused).to.deep.equal(['server_budget']);
    await Promise.all(holders.map((h) => h.finish()));
  });

  it('takes nothing from the total for a connection with a verified client certificate', async () => {
    const { connect } = await serve({ totalBytes: 150, perConnectionBytes: 100 });
    const holders = [holdBody(await connect(), 60), holdBody(await connect(), 60)];
    await settle();
    const client = fixtures.client('admiralty-proxy-scheduler', []);
    const verified = await connect({ cert: client.certPem, key: client.keyPem });
    const unverified = await connect();
    expect((await h2Request(verified, '/take', body)).status).to.equal(200);
    expect((await h2Request(unverified, '/take', body)).status).to.equal(503);
    await Promise.all(holders.map((h) => h.finish()));
  });

  it('counts HTTP/1.1 calls in the same budget', async () => {
    const { port, connect } = await serve({ totalBytes: 150, perConnectionBytes: 100 });
    const holders = [holdBody(await connect(), 60), holdBody(await connect(), 60)];
    await settle();
    const overHttp1 = await new Promise<{ status: number; connection?: string }>((resolve, reject) => {
      const req = https.request({ host: '127.0.0.1', port, method: 'POST', path: '/take', ca: fixtures.ca.certPem, agent: false }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
      });
      req.on('error', reject);
      req.end(body);
    });
    expect(overHttp1.status).to.equal(503);
    expect(overHttp1.connection).to.equal('close');
    await Promise.all(holders.map((h) => h.finish()));
    expect(refused).to.deep.equal(['server_budget']);
  });
});
