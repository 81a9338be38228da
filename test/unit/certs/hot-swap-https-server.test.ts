import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { expect } from 'chai';
import { createCA } from '../../../certs/create-ca.js';
import { createServingCert } from '../../../certs/create-serving-cert.js';
import { createHotSwapHttpsServer, type HotSwapHttpsServer } from '../../../certs/hot-swap-https-server.js';
import { readCertificate } from '../../../certs/read-certificate.js';
import type { CertKeyPair } from '../../../certs/cert-types.js';

interface Answer {
  body: string;
  socket: TLSSocket;
  serialHex: string;
}

/** GET over `agent`, verifying the server against `caPem` with SNI/hostname `localhost`. */
function get(port: number, agent: https.Agent, caPem: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, path: '/', agent, ca: caPem, servername: 'localhost' }, (res) => {
      // Read the socket now: it is detached from the response once the agent takes it back.
      const socket = res.socket as TLSSocket;
      const serialHex = socket.getPeerCertificate().serialNumber.toLowerCase();
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ body, socket, serialHex }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('certs: createHotSwapHttpsServer', () => {
  let ca: CertKeyPair;
  let first: CertKeyPair;
  let second: CertKeyPair;
  let hot: HotSwapHttpsServer;
  let port: number;
  const agents: https.Agent[] = [];

  before(async () => {
    ca = createCA({ commonName: 'test-ca' });
    const serving = { ca, commonName: 'localhost', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] };
    first = createServingCert(serving);
    second = createServingCert(serving);
    hot = createHotSwapHttpsServer({ pair: first, handler: (_req, res) => res.end('ok') });
    await new Promise<void>((resolve) => hot.server.listen(0, '127.0.0.1', resolve));
    port = (hot.server.address() as AddressInfo).port;
  });

  after(async () => {
    for (const a of agents) a.destroy();
    hot.server.closeAllConnections();
    await new Promise((resolve) => hot.server.close(resolve));
  });

  const newAgent = () => {
    // One socket per agent, kept alive: a second request on it reuses the same TLS connection.
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
    agents.push(agent);
    return agent;
  };

  it('serves the new certificate to new handshakes while old connections keep working', async () => {
    const oldAgent = newAgent();
    const before = await get(port, oldAgent, ca.certPem);
    expect(before.body).to.equal('ok');
    expect(before.serialHex).to.equal(readCertificate(first.certPem).serialHex);

    hot.swap(second);

    // A fresh agent (no cached TLS session) makes a full handshake and sees the new certificate.
    const after = await get(port, newAgent(), ca.certPem);
    expect(after.body).to.equal('ok');
    expect(after.serialHex).to.equal(readCertificate(second.certPem).serialHex);

    // The keep-alive connection opened before the swap still answers, on the same socket.
    const again = await get(port, oldAgent, ca.certPem);
    expect(again.body).to.equal('ok');
    expect(again.socket).to.equal(before.socket);
    expect(again.serialHex).to.equal(readCertificate(first.certPem).serialHex);
  });

  it('keeps the previous certificate when the new PEMs are invalid', async () => {
    const current = await get(port, newAgent(), ca.certPem);
    expect(() => hot.swap({ certPem: 'garbage', keyPem: 'garbage' })).to.throw();
    const after = await get(port, newAgent(), ca.certPem);
    expect(after.serialHex).to.equal(current.serialHex);
  });
});
