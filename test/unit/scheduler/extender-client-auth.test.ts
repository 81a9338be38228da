import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { TLSSocket } from 'node:tls';
import { expect } from 'chai';
import sinon from 'sinon';
import { Registry } from 'prom-client';
import type { CertKeyPair } from '../../../certs/cert-types.js';
import { createCA } from '../../../certs/create-ca.js';
import { createClientCert } from '../../../certs/create-client-cert.js';
import { createServingCert } from '../../../certs/create-serving-cert.js';
import { createRouter, json, text } from '../../../provider/core/http-router.js';
import { silentLogger } from '../../../provider/core/logger.js';
import { createExtenderClientGuard, PROXY_SCHEDULER_CLIENT_CN } from '../../../scheduler/extender-client-auth.js';
import { EXTENDER_PATH_PREFIX } from '../../../scheduler/extender-server.js';
import { createWebhookServer, type WebhookServer } from '../../../webhook/create-webhook-server.js';
import { h2Connect, h2Request } from '../../support/h2.js';

// The certificates are issued once: RSA key generation is the slow part.
const ca = createCA({ commonName: 'admiralty-webhook-cert-ca' });
// Same subject name as ours, another key: only the signature tells them apart.
const otherCa = createCA({ commonName: 'admiralty-webhook-cert-ca' });
const serving = createServingCert({ ca, commonName: '127.0.0.1', dnsNames: [], ipAddresses: ['127.0.0.1'] });
const good = createClientCert({ ca, commonName: PROXY_SCHEDULER_CLIENT_CN });
const foreign = createClientCert({ ca: otherCa, commonName: PROXY_SCHEDULER_CLIENT_CN });
const wrongCn = createClientCert({ ca, commonName: 'system:kube-scheduler' });
// A serving certificate of our CA whose CN is right: its key usage is serverAuth only.
const servingAsClient = createServingCert({ ca, commonName: PROXY_SCHEDULER_CLIENT_CN, dnsNames: ['x'] });

interface Reply {
  status: number;
  body: string;
}

describe('scheduler: createExtenderClientGuard over a real TLS server', () => {
  let hot: WebhookServer;
  let port: number;
  let metrics: Registry;

  beforeEach(async () => {
    metrics = new Registry();
    const handler = createRouter({
      routes: [
        { method: 'POST', path: '/mutate', handle: () => text(200, 'mutated') },
        { method: 'POST', path: `${EXTENDER_PATH_PREFIX}/bind`, handle: () => json(200, { Error: '' }) },
        { method: 'POST', path: `${EXTENDER_PATH_PREFIX}/filter`, handle: () => json(200, { FailedNodes: {}, Error: '' }) },
      ],
      guards: [createExtenderClientGuard({ logger: silentLogger(), metricsRegistry: metrics })],
      logger: silentLogger(),
    });
    hot = createWebhookServer({ pair: serving, handler, clientCaPems: [ca.certPem] });
    await new Promise<void>((r) => hot.server.listen(0, '127.0.0.1', r));
    port = (hot.server.address() as AddressInfo).port;
  });
  afterEach(async () => {
    await hot.close();
  });

  /** A POST on a fresh connection (no agent: every call is its own handshake). */
  const post = (path: string, client?: CertKeyPair): Promise<Reply> =>
    new Promise((resolve, reject) => {
      const req = https.request({ host: '127.0.0.1', port, path, method: 'POST', ca: ca.certPem, cert: client?.certPem, key: client?.keyPem, agent: false }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end('{}');
    });

  const refusals = async () => Object.fromEntries((await metrics.getSingleMetric('admiralty_scheduler_extender_refused_requests_total')!.get()).values.map((v) => [v.labels.reason, v.value]));

  const table: { name: string; client?: CertKeyPair; status: number; body: RegExp }[] = [
    { name: 'no certificate', status: 401, body: /requires a client certificate/ },
    { name: 'a certificate of another CA (same CA name)', client: foreign, status: 401, body: /not signed by the provider's CA/ },
    { name: 'a serving certificate of our CA with the right CN', client: servingAsClient, status: 401, body: /not signed by the provider's CA.*purpose/i },
    { name: 'a certificate of our CA with another CN', client: wrongCn, status: 403, body: /CN "system:kube-scheduler" may not call/ },
  ];
  for (const row of table) {
    it(`refuses bind and filter with ${row.name}`, async () => {
      for (const verb of ['bind', 'filter']) {
        const reply = await post(`${EXTENDER_PATH_PREFIX}/${verb}`, row.client);
        expect(reply.status, verb).to.equal(row.status);
        expect(JSON.parse(reply.body).Error, verb).to.match(row.body);
      }
    });
  }

  it("serves bind and filter to the proxy scheduler's certificate", async () => {
    expect(await post(`${EXTENDER_PATH_PREFIX}/bind`, good)).to.deep.equal({ status: 200, body: '{"Error":""}' });
    expect((await post(`${EXTENDER_PATH_PREFIX}/filter`, good)).status).to.equal(200);
    expect(await refusals()).to.deep.equal({});
  });

  it('counts refusals by reason', async () => {
    await post(`${EXTENDER_PATH_PREFIX}/bind`);
    await post(`${EXTENDER_PATH_PREFIX}/bind`, foreign);
    await post(`${EXTENDER_PATH_PREFIX}/filter`, wrongCn);
    await post(`${EXTENDER_PATH_PREFIX}/filter`, wrongCn);
    expect(await refusals()).to.deep.equal({ no_certificate: 1, untrusted_certificate: 1, wrong_identity: 2 });
  });

  it('leaves the webhook route open to callers without a certificate (the apiserver presents none)', async () => {
    expect(await post('/mutate')).to.deep.equal({ status: 200, body: 'mutated' });
  });

  /** `n` POSTs in a row on one kept-alive connection, with the TLS version given. */
  const postsOnOneConnection = async (n: number, client: CertKeyPair | undefined, maxVersion: 'TLSv1.2' | 'TLSv1.3'): Promise<number[]> => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: ca.certPem, cert: client?.certPem, key: client?.keyPem, maxVersion });
    const statuses: number[] = [];
    try {
      for (let i = 0; i < n; i++) {
        statuses.push(
          await new Promise<number>((resolve, reject) => {
            const req = https.request({ host: '127.0.0.1', port, path: `${EXTENDER_PATH_PREFIX}/filter`, method: 'POST', agent }, (res) => {
              res.resume();
              res.on('end', () => resolve(res.statusCode ?? 0));
            });
            req.on('error', reject);
            req.end('{}');
          }),
        );
      }
    } finally {
      agent.destroy();
    }
    return statuses;
  };

  it('checks the certificate of a TLS 1.3 connection once, and every call under TLS 1.2 (renegotiation)', async () => {
    const peer = sinon.spy(TLSSocket.prototype, 'getPeerCertificate');
    // The server's side of each connection only (the client checks the server's certificate too).
    const serverChecks = () => peer.getCalls().filter((c) => (c.thisValue as TLSSocket).localPort === port).length;
    try {
      expect(await postsOnOneConnection(3, good, 'TLSv1.3')).to.deep.equal([200, 200, 200]);
      expect(serverChecks(), 'TLS 1.3').to.equal(1);
      peer.resetHistory();
      expect(await postsOnOneConnection(3, good, 'TLSv1.2')).to.deep.equal([200, 200, 200]);
      expect(serverChecks(), 'TLS 1.2').to.equal(3);
      // A refusal is kept for the connection too, and still counted per call.
      peer.resetHistory();
      expect(await postsOnOneConnection(2, wrongCn, 'TLSv1.3')).to.deep.equal([403, 403]);
      expect(serverChecks()).to.equal(1);
      expect(await refusals()).to.deep.equal({ wrong_identity: 2 });
    } finally {
      peer.restore();
    }
  });

  it('over HTTP/2, judges the connection once for all its streams', async () => {
    const peer = sinon.spy(TLSSocket.prototype, 'getPeerCertificate');
    const serverChecks = () => peer.getCalls().filter((c) => (c.thisValue as TLSSocket).localPort === port).length;
    const sessions = [await h2Connect(port, { ca: ca.certPem, cert: good.certPem, key: good.keyPem }), await h2Connect(port, { ca: ca.certPem })];
    try {
      const [trusted, anonymous] = sessions;
      const binds = await Promise.all(Array.from({ length: 5 }, () => h2Request(trusted!, `${EXTENDER_PATH_PREFIX}/bind`, '{}')));
      expect(binds.map((r) => [r.status, r.body])).to.deep.equal(Array(5).fill([200, '{"Error":""}']));
      const refusedReplies = await Promise.all(Array.from({ length: 3 }, () => h2Request(anonymous!, `${EXTENDER_PATH_PREFIX}/filter`, '{}')));
      expect(refusedReplies.map((r) => r.status)).to.deep.equal([401, 401, 401]);
      expect(JSON.parse(refusedReplies[0]!.body).Error).to.match(/requires a client certificate/);
      expect((await h2Request(anonymous!, '/mutate', '{}')).body, 'the webhook stays open on the same connection').to.equal('mutated');
      expect(serverChecks()).to.equal(2);
      expect(await refusals()).to.deep.equal({ no_certificate: 3 });
    } finally {
      peer.restore();
      for (const s of sessions) s.destroy();
    }
  });

  it('verifies against the CAs of the last swap: a new CA is trusted at once, a dropped one no longer', async () => {
    const next = createClientCert({ ca: otherCa, commonName: PROXY_SCHEDULER_CLIENT_CN });
    hot.swap(serving, [otherCa.certPem, ca.certPem]);
    expect((await post(`${EXTENDER_PATH_PREFIX}/bind`, next)).status, 'new CA').to.equal(200);
    expect((await post(`${EXTENDER_PATH_PREFIX}/bind`, good)).status, 'previous CA, still listed').to.equal(200);
    hot.swap(serving, [otherCa.certPem]);
    expect((await post(`${EXTENDER_PATH_PREFIX}/bind`, good)).status, 'previous CA, dropped').to.equal(401);
  });
});
