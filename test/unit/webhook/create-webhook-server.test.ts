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

  it('closes a TLS connection that sends no request after the handshake', async () => {
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
});
