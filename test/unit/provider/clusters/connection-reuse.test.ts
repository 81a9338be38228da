import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sinon from 'sinon';
import type { AddressInfo, Socket } from 'node:net';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { createCA } from '../../../../certs/create-ca.js';
import { createClientCert } from '../../../../certs/create-client-cert.js';
import { createServingCert } from '../../../../certs/create-serving-cert.js';
import { reuseConnections } from '../../../../provider/clusters/connection-reuse.js';
import { DEADLINE_SHARING_MS, withRequestDeadline } from '../../../../provider/clusters/request-deadline.js';
import { startMutualTlsServer, type MutualTlsServer } from '../../../support/mutual-tls.js';

/** client-node's private factory, which reuseConnections replaces. */
type CreateAgent = (cluster: unknown, options: https.AgentOptions) => https.Agent;
const createAgentOf = (kc: KubeConfig) => (kc as unknown as { createAgent: CreateAgent }).createAgent.bind(kc);

describe('reuseConnections', () => {
  const ca = createCA({ commonName: 'test-ca' });
  const serving = createServingCert({ ca, commonName: 'localhost', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
  let server: https.Server;
  let port: number;
  /** TLS connections the server accepted, and those still open. */
  let accepted: number;
  const open = new Set<Socket>();
  /** Milliseconds the server waits before it answers `/api/v1/namespaces`. */
  let answerAfterMs = 0;
  /** The Authorization header of each call, in order. */
  let authorizations: (string | undefined)[] = [];

  before(async () => {
    server = https.createServer({ cert: serving.certPem, key: serving.keyPem }, (req, res) => {
      authorizations.push(req.headers.authorization);
      const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'NamespaceList', apiVersion: 'v1', metadata: {}, items: [] }));
      if (answerAfterMs > 0) setTimeout(answer, answerAfterMs);
      else answer();
    });
    server.on('secureConnection', (s: Socket) => {
      accepted++;
      open.add(s);
      s.on('close', () => open.delete(s));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  beforeEach(() => {
    accepted = 0;
    answerAfterMs = 0;
    authorizations = [];
    for (const s of open) s.destroy();
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  function kubeConfig(extra: { proxyUrl?: string } = {}): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `https://127.0.0.1:${port}`, caData: Buffer.from(ca.certPem).toString('base64'), skipTLSVerify: false, ...extra }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    return kc;
  }

  const waitFor = async (what: () => boolean) => {
    for (let i = 0; i < 200 && !what(); i++) await new Promise((r) => setTimeout(r, 10));
  };

  it('sends successive API calls over one connection', async () => {
    const api = reuseConnections(kubeConfig()).makeApiClient(CoreV1Api);
    for (let i = 0; i < 5; i++) await api.listNamespace();
    expect(accepted).to.equal(1);
  });

  it('without it, client-node opens a connection per call (what this replaces)', async () => {
    const api = kubeConfig().makeApiClient(CoreV1Api);
    for (let i = 0; i < 3; i++) await api.listNamespace();
    expect(accepted).to.equal(3);
  });

  it('opens connections side by side for concurrent calls, and reuses them after', async () => {
    const api = reuseConnections(kubeConfig()).makeApiClient(CoreV1Api);
    answerAfterMs = 20;
    await Promise.all([api.listNamespace(), api.listNamespace(), api.listNamespace()]);
    expect(accepted).to.equal(3);
    await Promise.all([api.listNamespace(), api.listNamespace(), api.listNamespace()]);
    expect(accepted).to.equal(3);
  });

  it('shares an agent between calls with the same TLS options, compared by content', () => {
    const kc = reuseConnections(kubeConfig());
    const createAgent = createAgentOf(kc);
    const cluster = kc.getCurrentCluster();
    const a = createAgent(cluster, { ca: Buffer.from('ca-1'), cert: 'cert', key: 'key' });
    expect(createAgent(cluster, { ca: Buffer.from('ca-1'), cert: 'cert', key: 'key' })).to.equal(a);
    expect(a.options.keepAlive).to.equal(true);
    // A rotated certificate or CA, another server name: other connections.
    expect(createAgent(cluster, { ca: Buffer.from('ca-1'), cert: 'cert-2', key: 'key-2' })).to.not.equal(a);
    expect(createAgent(cluster, { ca: Buffer.from('ca-2'), cert: 'cert', key: 'key' })).to.not.equal(a);
    expect(createAgent(cluster, { ca: Buffer.from('ca-1'), cert: 'cert', key: 'key', servername: 'other' })).to.not.equal(a);
  });

  it("keeps client-node's own agent for a cluster behind a proxy", () => {
    const kc = reuseConnections(kubeConfig({ proxyUrl: 'http://127.0.0.1:1' }));
    const createAgent = createAgentOf(kc);
    const a = createAgent(kc.getCurrentCluster(), {});
    expect(createAgent(kc.getCurrentCluster(), {})).to.not.equal(a);
  });

  it('closes an idle connection after the idle timeout', async () => {
    const api = reuseConnections(kubeConfig(), { idleSocketTimeoutMs: 50 }).makeApiClient(CoreV1Api);
    await api.listNamespace();
    expect(accepted).to.equal(1);
    await waitFor(() => open.size === 0);
    expect(open.size).to.equal(0);
    await api.listNamespace();
    expect(accepted).to.equal(2);
  });

  it('does not cut a call whose answer takes longer than the idle timeout', async () => {
    const api = reuseConnections(kubeConfig(), { idleSocketTimeoutMs: 30 }).makeApiClient(CoreV1Api);
    answerAfterMs = 150;
    const list = await api.listNamespace();
    expect(list.items).to.deep.equal([]);
  });

  it('a call aborted at its deadline closes its connection and leaves the pool usable', async () => {
    const api = withRequestDeadline(reuseConnections(kubeConfig()), 50).makeApiClient(CoreV1Api);
    await api.listNamespace();
    // Past the deadline, which calls close together share (up to DEADLINE_SHARING_MS more).
    answerAfterMs = 50 + DEADLINE_SHARING_MS + 500;
    const err = await api.listNamespace().then(
      () => expect.fail('answered'),
      (e: unknown) => e,
    );
    expect(String(err)).to.match(/abort/i);
    await waitFor(() => open.size === 0);
    expect(open.size, 'connections left open').to.equal(0);
    answerAfterMs = 0;
    await api.listNamespace();
    expect(accepted).to.equal(2);
  });

  describe("the API calls' authentication", () => {
    /** client-node's own per-call work, which the replay skips: decoding the credentials into TLS options and headers. */
    const applyOptionsOf = (kc: KubeConfig) => sinon.spy(kc as unknown as { applyOptions: (o: object) => Promise<void> }, 'applyOptions');

    it('is worked out once for credentials all in the kubeconfig, and set on every call', async () => {
      const kc = reuseConnections(kubeConfig());
      const applyOptions = applyOptionsOf(kc);
      const api = kc.makeApiClient(CoreV1Api);
      for (let i = 0; i < 4; i++) await api.listNamespace();
      expect(applyOptions.callCount).to.equal(1);
      expect(authorizations).to.deep.equal(['Bearer t', 'Bearer t', 'Bearer t', 'Bearer t']);
      expect(accepted, 'the agent is the pooled one').to.equal(1);
    });

    it('is worked out again for another context, and for a kubeconfig loaded anew', async () => {
      const kc = reuseConnections(kubeConfig());
      const cluster = kc.getCurrentCluster()!;
      kc.loadFromOptions({
        clusters: [cluster],
        users: [
          { name: 'u', token: 't' },
          { name: 'v', token: 'other' },
        ],
        contexts: [
          { name: 'x', cluster: 'c', user: 'u' },
          { name: 'y', cluster: 'c', user: 'v' },
        ],
        currentContext: 'x',
      });
      const api = kc.makeApiClient(CoreV1Api);
      await api.listNamespace();
      kc.setCurrentContext('y');
      await api.listNamespace();
      kc.setCurrentContext('x');
      await api.listNamespace();
      kc.loadFromOptions({ clusters: [cluster], users: [{ name: 'u', token: 'renewed' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x' });
      await api.listNamespace();
      expect(authorizations).to.deep.equal(['Bearer t', 'Bearer other', 'Bearer t', 'Bearer renewed']);
    });

    it('is worked out on every call when a credential is a file, so that a rotated one is read', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'admiralty-ca-'));
      try {
        const caFile = join(dir, 'ca.crt');
        writeFileSync(caFile, ca.certPem);
        const kc = new KubeConfig();
        kc.loadFromOptions({
          clusters: [{ name: 'c', server: `https://127.0.0.1:${port}`, caFile, skipTLSVerify: false }],
          users: [{ name: 'u', token: 't' }],
          contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
          currentContext: 'x',
        });
        reuseConnections(kc);
        const applyOptions = applyOptionsOf(kc);
        const api = kc.makeApiClient(CoreV1Api);
        for (let i = 0; i < 3; i++) await api.listNamespace();
        expect(applyOptions.callCount).to.equal(3);
        // A CA file that no longer verifies the server: the next call reads it and fails.
        writeFileSync(caFile, createCA({ commonName: 'other-ca' }).certPem);
        const refused = await api.listNamespace().then(
          () => 'answered',
          (e: unknown) => String(e),
        );
        expect(refused).to.match(/certificate/i);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('goes under withRequestDeadline, never over it', () => {
      expect(() => reuseConnections(withRequestDeadline(kubeConfig(), 50))).to.throw(/before .*withRequestDeadline/);
    });
  });

  describe('one TLS context per agent', () => {
    const client = createClientCert({ ca, commonName: 'alice' });
    let mutual: MutualTlsServer;
    before(async () => {
      // Mutual TLS: the caller must present a certificate of `ca`.
      mutual = await startMutualTlsServer(ca, serving, (cn) => JSON.stringify({ kind: 'NamespaceList', apiVersion: 'v1', metadata: {}, items: [{ metadata: { name: cn } }] }));
    });
    after(() => mutual.close());
    const withClientCert = (caPem: string) => {
      const kc = new KubeConfig();
      const b64 = (pem: string) => Buffer.from(pem).toString('base64');
      kc.loadFromOptions({
        clusters: [{ name: 'c', server: `https://127.0.0.1:${mutual.port}`, caData: b64(caPem), skipTLSVerify: false }],
        users: [{ name: 'u', certData: b64(client.certPem), keyData: b64(client.keyPem) }],
        contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
        currentContext: 'x',
      });
      return reuseConnections(kc);
    };

    it('presents the client certificate and verifies the server against the CA, both from the context', async () => {
      const list = await withClientCert(ca.certPem).makeApiClient(CoreV1Api).listNamespace();
      expect(list.items.map((n) => n.metadata?.name)).to.deep.equal(['alice']);
      const other = createCA({ commonName: 'test-ca' });
      const refused = await withClientCert(other.certPem)
        .makeApiClient(CoreV1Api)
        .listNamespace()
        .then(
          () => 'answered',
          (e: unknown) => String(e),
        );
      expect(refused).to.match(/certificate/i);
    });

    it('keeps the certificates out of the options Node names its pool by', () => {
      const kc = withClientCert(ca.certPem);
      const agent = createAgentOf(kc)(kc.getCurrentCluster(), { ca: Buffer.from(ca.certPem), cert: Buffer.from(client.certPem), key: Buffer.from(client.keyPem) });
      const options = agent.options as https.AgentOptions & { secureContext?: unknown };
      expect(options.secureContext).to.not.equal(undefined);
      expect(options).to.not.have.any.keys('ca', 'cert', 'key');
    });
  });
});
