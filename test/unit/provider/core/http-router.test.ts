import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import type { ClientHttp2Session } from 'node:http2';
import { expect } from 'chai';
import { createRouter, json, text, type Route, type RouteCall } from '../../../../provider/core/http-router.js';
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
    { method: 'POST', path: '/throws', handle: () => { throw new Error('boom'); } },
    { method: 'POST', path: '/rejects', handle: async () => { throw new Error('boom'); } },
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
      expect(calls[0].connection).to.equal(calls[1].connection);
      expect(calls[0].connection.remotePort).to.equal((session.socket as net.Socket).localPort);
    });
  });
});
