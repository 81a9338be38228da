import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createWebhookServer } from '../../../webhook/create-webhook-server.js';
import { makeTlsFixtures } from '../provider/kubelet/tls-fixtures.js';

const fixtures = makeTlsFixtures();

/** Resolves with how long the socket stayed open, or 'open' if still open after `waitMs`. */
function closedWithin(socket: net.Socket, waitMs: number): Promise<number | 'open'> {
  const started = Date.now();
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('open'), waitMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(Date.now() - started);
    });
  });
}

describe('webhook: createWebhookServer', () => {
  let server: https.Server;
  let port: number;
  const opened: net.Socket[] = [];
  beforeEach(async () => {
    const hot = createWebhookServer({
      pair: { certPem: fixtures.server.certPem, keyPem: fixtures.server.keyPem },
      handler: (_req, res) => res.end('ok'),
      limits: { maxConnections: 2, handshakeTimeoutMs: 300, firstRequestTimeoutMs: 300, keepAliveTimeoutMs: 300 },
    });
    server = hot.server;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterEach(async () => {
    for (const s of opened.splice(0)) s.destroy();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  const tlsConnect = async () => {
    const s = tls.connect({ port, host: '127.0.0.1', ca: fixtures.ca.certPem });
    s.on('error', () => undefined);
    opened.push(s);
    await once(s, 'secureConnect');
    return s;
  };

  it('closes a TLS connection that sends no request after the handshake (after the first-request allowance)', async () => {
    const s = await tlsConnect();
    expect(await closedWithin(s, 3_000)).to.be.a('number');
  });

  it('closes a TCP connection that never starts the TLS handshake', async () => {
    const s = net.connect(port, '127.0.0.1');
    opened.push(s);
    await once(s, 'connect');
    expect(await closedWithin(s, 3_000)).to.be.a('number');
  });

  it('closes a kept-alive connection once idle, and serves requests meanwhile', async () => {
    const s = await tlsConnect();
    s.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    const [reply] = (await once(s, 'data')) as [Buffer];
    expect(reply.toString()).to.match(/^HTTP\/1.1 200/);
    expect(await closedWithin(s, 3_000)).to.be.a('number');
  });

  it('refuses connections past the cap', async () => {
    await tlsConnect();
    await tlsConnect();
    const third = tls.connect({ port, host: '127.0.0.1', ca: fixtures.ca.certPem });
    third.on('error', () => undefined);
    opened.push(third);
    let handshaken = false;
    third.once('secureConnect', () => (handshaken = true));
    expect(await closedWithin(third, 250)).to.be.a('number');
    expect(handshaken).to.equal(false);
  });

  describe('a connection the client dialled and keeps idle, unused (Go under a burst)', () => {
    let idle: https.Server;
    let idlePort: number;
    const closed: string[] = [];
    beforeEach(async () => {
      closed.length = 0;
      const hot = createWebhookServer({
        pair: { certPem: fixtures.server.certPem, keyPem: fixtures.server.keyPem },
        handler: (req, res) => {
          req.resume();
          req.on('end', () => res.end('ok'));
        },
        // Scaled down: the client's idle timeout stands for Go's 90 s; the first-request allowance
        // outlasts it as the default does (120 s), and the per-request deadline (30 s by default)
        // and Node's own check (every 30 s by default) are shorter than that, as in production.
        limits: { maxConnections: 8, handshakeTimeoutMs: 300, firstRequestTimeoutMs: 1_500, keepAliveTimeoutMs: 1_500 },
        requestTimeoutMs: 400,
        connectionsCheckingIntervalMs: 50,
        onClose: (reason) => closed.push(reason),
      });
      idle = hot.server;
      await new Promise<void>((r) => idle.listen(0, '127.0.0.1', r));
      idlePort = (idle.address() as AddressInfo).port;
    });
    afterEach(async () => {
      idle.closeAllConnections();
      await new Promise<void>((r) => idle.close(() => r()));
    });
    const connect = async () => {
      const s = tls.connect({ port: idlePort, host: '127.0.0.1', ca: fixtures.ca.certPem });
      s.on('error', () => undefined);
      opened.push(s);
      await once(s, 'secureConnect');
      return s;
    };
    const post = (s: tls.TLSSocket) => {
      s.write('POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}');
      return once(s, 'data').then(([d]) => (d as Buffer).toString());
    };

    it('is served when it is first used after idling longer than the per-request deadline and Node checks', async () => {
      const s = await connect();
      // Past the request deadline (400 ms) and many of Node's checks (50 ms): before the fix, Node's
      // requestTimeout and headersTimeout, counted from the connection's start, closed it with a 408.
      expect(await closedWithin(s, 1_000)).to.equal('open');
      expect(await post(s)).to.match(/^HTTP\/1.1 200/);
      expect(closed).to.deep.equal([]);
    });

    it('is closed, and reported, only once the first-request allowance has passed', async () => {
      const s = await connect();
      const t = await closedWithin(s, 3_000);
      expect(t).to.be.a('number').and.at.least(1_400);
      expect(closed).to.deep.equal(['first_request_timeout']);
    });

    it('still closes a request whose body does not arrive in time, and reports it', async () => {
      const s = await connect();
      s.write('POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{}');
      const t = await closedWithin(s, 3_000);
      expect(t).to.be.a('number').and.below(1_000);
      expect(closed).to.deep.equal(['request_timeout']);
    });
  });
});
