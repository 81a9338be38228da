import { expect } from 'chai';
import { once } from 'node:events';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { applyConnectionLimits, clientAddress, DEFAULT_CONNECTION_LIMITS } from '../../../../provider/core/connection-limits.js';
import { WEBHOOK_CONNECTION_LIMITS } from '../../../../webhook/create-webhook-server.js';
import { makeTlsFixtures } from '../kubelet/tls-fixtures.js';

describe('DEFAULT_CONNECTION_LIMITS', () => {
  it("keeps an idle connection longer than the apiserver's clients do (Go's 90 s), so they close it first", () => {
    // A server that closes first races the client reusing the connection: the webhook call
    // fails with "connection reset by peer" and, with failurePolicy Fail, the pod is refused.
    expect(DEFAULT_CONNECTION_LIMITS.keepAliveTimeoutMs).to.be.above(90_000);
  });

  it('lets a connection wait as long for its first request: Go keeps connections it dialled but never used as idle ones', () => {
    // Under a burst, Go's http.Transport dials one connection per waiting request; a request that
    // gets a freed connection first leaves the new one in the idle pool, unused, for up to 90 s.
    expect(DEFAULT_CONNECTION_LIMITS.firstRequestTimeoutMs).to.be.above(90_000);
  });

  it("lets the webhook take as many connections as one apiserver's default in-flight limits, with room for Go's extra dials", () => {
    // --max-requests-inflight 400 + --max-mutating-requests-inflight 200: every one can be a webhook call.
    expect(WEBHOOK_CONNECTION_LIMITS.maxConnections).to.be.above(600);
  });

  it('lets one address take as many webhook connections too, so that an apiserver on HTTP/1.1 is not cut by the per-address cap', () => {
    expect(WEBHOOK_CONNECTION_LIMITS.maxConnectionsPerAddress).to.be.above(600);
  });

  it('keeps the per-address caps below the overall ones, so that one address cannot take every connection', () => {
    expect(DEFAULT_CONNECTION_LIMITS.maxConnectionsPerAddress).to.be.below(DEFAULT_CONNECTION_LIMITS.maxConnections);
    expect(WEBHOOK_CONNECTION_LIMITS.maxConnectionsPerAddress).to.be.below(WEBHOOK_CONNECTION_LIMITS.maxConnections);
  });
});

describe('clientAddress', () => {
  const cases: Array<[string | undefined, string]> = [
    ['127.0.0.2', '127.0.0.2'],
    ['::ffff:127.0.0.2', '127.0.0.2'],
    ['::FFFF:10.1.2.3', '10.1.2.3'],
    ['::1', '::1'],
    ['FE80::1', 'fe80::1'],
    [undefined, 'unknown'],
  ];
  for (const [remote, want] of cases) {
    it(`counts ${remote ?? 'no address'} as ${want}`, () => expect(clientAddress(remote)).to.equal(want));
  }
});

describe('applyConnectionLimits: per-address cap (real sockets on 127.0.0.1 and 127.0.0.2)', () => {
  const fixtures = makeTlsFixtures();
  const clientPair = fixtures.client('system:kube-apiserver', []);
  let server: https.Server;
  let port: number;
  const closed: Array<[string, string | undefined]> = [];
  /** The server's side of every connection it accepted, in order. */
  const accepted: net.Socket[] = [];
  const opened: net.Socket[] = [];

  beforeEach(async () => {
    closed.length = 0;
    accepted.length = 0;
    server = https.createServer({ cert: fixtures.server.certPem, key: fixtures.server.keyPem, ca: fixtures.ca.certPem, requestCert: true, rejectUnauthorized: false }, (_req, res) => res.end('ok'));
    applyConnectionLimits(server, { ...DEFAULT_CONNECTION_LIMITS, maxConnections: 10, maxConnectionsPerAddress: 2 }, { onClose: (reason, address) => closed.push([reason, address]) });
    // After applyConnectionLimits' own listeners, so a close seen here has been counted out.
    server.on('connection', (s: net.Socket) => accepted.push(s));
    server.on('tlsClientError', () => undefined);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterEach(async () => {
    for (const s of opened.splice(0)) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });

  /** A TLS connection from `from`; resolves with whether its handshake completed (false: the server closed it first). */
  const tlsFrom = async (from: string, withCert = false): Promise<{ socket: tls.TLSSocket; handshaken: boolean }> => {
    // tls.connect's options have no localAddress: the TCP socket is dialled from `from` first.
    const tcp = net.connect({ port, host: '127.0.0.1', localAddress: from });
    tcp.on('error', () => undefined);
    opened.push(tcp);
    const socket = tls.connect({ socket: tcp, host: '127.0.0.1', ca: fixtures.ca.certPem, ...(withCert ? { cert: clientPair.certPem, key: clientPair.keyPem } : {}) });
    socket.on('error', () => undefined);
    opened.push(socket);
    // Not events.once: it rejects on the 'error' a refused handshake also emits.
    const handshaken = await new Promise<boolean>((resolve) => {
      socket.once('secureConnect', () => resolve(true));
      socket.once('close', () => resolve(false));
    });
    return { socket, handshaken };
  };
  /** Resolves once the server has accepted `n` connections in all. */
  const acceptedCount = async (n: number) => {
    while (accepted.length < n) await once(server, 'connection');
  };

  it('closes the connections of one address past its cap, at accept, while another address still connects', async () => {
    expect((await tlsFrom('127.0.0.2')).handshaken).to.equal(true);
    expect((await tlsFrom('127.0.0.2')).handshaken).to.equal(true);
    expect((await tlsFrom('127.0.0.2')).handshaken).to.equal(false);
    expect((await tlsFrom('127.0.0.1')).handshaken).to.equal(true);
    expect(closed).to.deep.equal([['connection_limit_per_address', '127.0.0.2']]);
  });

  it('counts TCP connections that never start their handshake', async () => {
    for (let i = 0; i < 2; i++) {
      const raw = net.connect({ port, host: '127.0.0.1', localAddress: '127.0.0.2' });
      raw.on('error', () => undefined);
      opened.push(raw);
    }
    await acceptedCount(2);
    expect((await tlsFrom('127.0.0.2')).handshaken).to.equal(false);
    expect(closed).to.deep.equal([['connection_limit_per_address', '127.0.0.2']]);
  });

  it('counts a connection out once it closes: its address may open another', async () => {
    const first = await tlsFrom('127.0.0.2');
    await tlsFrom('127.0.0.2');
    const serverSide = accepted[0]!;
    first.socket.destroy();
    await once(serverSide, 'close');
    expect((await tlsFrom('127.0.0.2')).handshaken).to.equal(true);
    expect(closed).to.deep.equal([]);
  });

  it('counts a connection whose client certificate verified only until its handshake ends', async () => {
    for (let i = 0; i < 3; i++) {
      // Under TLS 1.3 the client's handshake ends before the server has read its certificate.
      const verified = once(server, 'secureConnection');
      expect((await tlsFrom('127.0.0.2', true)).handshaken).to.equal(true);
      await verified;
    }
    expect((await tlsFrom('127.0.0.2')).handshaken).to.equal(true);
    expect((await tlsFrom('127.0.0.2')).handshaken).to.equal(true);
    expect((await tlsFrom('127.0.0.2')).handshaken).to.equal(false);
    expect(closed).to.deep.equal([['connection_limit_per_address', '127.0.0.2']]);
  });
});
