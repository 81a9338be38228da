import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { buildKubeconfigSecret, DEFAULT_TOKEN_DURATION_SECONDS, exportKubeconfigCli, parseDurationSeconds } from '../../../../provider/tools/export-kubeconfig.js';
import type { CliIo } from '../../../../provider/tools/cli-io.js';

/** Captures what a command writes. */
function captureIo(env: Record<string, string> = {}): CliIo & { out: () => string; err: () => string } {
  let out = '';
  let err = '';
  return {
    stdout: { write: (s: string) => (out += s) },
    stderr: { write: (s: string) => (err += s) },
    env,
    out: () => out,
    err: () => err,
  };
}

const CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n';

describe('export-kubeconfig', () => {
  describe('buildKubeconfigSecret', () => {
    const base = { secretName: 'c2', secretNamespace: 'default', server: 'https://127.0.0.1:6443', caData: 'Q0E=', token: 'tok', namespace: 'team1', clusterName: 'c2' };

    it('builds a Secret whose config key is a kubeconfig for the token, CA and namespace', () => {
      const secret = buildKubeconfigSecret(base);
      expect(secret).to.deep.include({ apiVersion: 'v1', kind: 'Secret', type: 'Opaque' });
      expect(secret.metadata).to.deep.equal({ name: 'c2', namespace: 'default' });
      expect(Object.keys(secret.stringData!)).to.deep.equal(['config']);

      const kc = new KubeConfig();
      kc.loadFromString(secret.stringData!.config!);
      expect(kc.getCurrentContext()).to.equal('c2');
      expect(kc.getContextObject('c2')?.namespace).to.equal('team1');
      expect(kc.getCurrentCluster()).to.deep.include({ server: 'https://127.0.0.1:6443', caData: 'Q0E=', skipTLSVerify: false });
      expect(kc.getCurrentUser()?.token).to.equal('tok');
    });

    it('writes the raw kubeconfig keys kubectl expects', () => {
      const config = parse(buildKubeconfigSecret(base).stringData!.config!);
      expect(config.clusters[0].cluster).to.deep.equal({ server: 'https://127.0.0.1:6443', 'certificate-authority-data': 'Q0E=' });
      expect(config['current-context']).to.equal('c2');
    });

    it('is deterministic', () => {
      expect(buildKubeconfigSecret(base)).to.deep.equal(buildKubeconfigSecret(base));
    });

    it('skips TLS verification only when asked and no CA is known', () => {
      const noCa = parse(buildKubeconfigSecret({ ...base, caData: undefined, insecureSkipTlsVerify: true }).stringData!.config!);
      expect(noCa.clusters[0].cluster).to.deep.equal({ server: 'https://127.0.0.1:6443', 'insecure-skip-tls-verify': true });
      const withCa = parse(buildKubeconfigSecret({ ...base, insecureSkipTlsVerify: true }).stringData!.config!);
      expect(withCa.clusters[0].cluster).to.not.have.property('insecure-skip-tls-verify');
      const neither = parse(buildKubeconfigSecret({ ...base, caData: undefined }).stringData!.config!);
      expect(neither.clusters[0].cluster).to.deep.equal({ server: 'https://127.0.0.1:6443' });
    });
  });

  describe('parseDurationSeconds', () => {
    const good: [string, number][] = [
      ['8760h', DEFAULT_TOKEN_DURATION_SECONDS],
      ['1h30m', 5400],
      ['1.5h', 5400],
      ['10m', 600],
      ['3600s', 3600],
      ['1h1m1s', 3661],
    ];
    for (const [text, want] of good) it(`${text} -> ${want} s`, () => expect(parseDurationSeconds(text)).to.equal(want));
    for (const bad of ['', '10', '5d', 'h', '-1h', '1h ', 'one hour']) {
      it(`refuses ${JSON.stringify(bad)}`, () => expect(() => parseDurationSeconds(bad)).to.throw(/invalid duration/));
    }
  });

  describe('exportKubeconfigCli', () => {
    let dir: string;
    let server: Server;
    let requests: { method?: string; url?: string; body: any }[];
    let kubeconfig: string;

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'export-kubeconfig-'));
      // A fake API server on loopback: one service account, team1/c1, can get tokens.
      // node's server ignores what a handler returns: `void` says so of the async body.
      server = createServer((req: IncomingMessage, res) => {
        void (async () => {
          let raw = '';
          for await (const chunk of req) raw += chunk;
          const body = raw ? JSON.parse(raw) : undefined;
          requests.push({ method: req.method, url: req.url, body });
          res.setHeader('Content-Type', 'application/json');
          if (req.method === 'POST' && req.url?.startsWith('/api/v1/namespaces/team1/serviceaccounts/c1/token')) {
            const seconds = Math.min(body.spec.expirationSeconds, 86400); // this server caps at a day
            res.end(
              JSON.stringify({ ...body, spec: { ...body.spec, expirationSeconds: seconds }, status: { token: 'minted-token', expirationTimestamp: new Date(Date.UTC(2030, 0, 1)).toISOString() } }),
            );
            return;
          }
          res.statusCode = 404;
          res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404, message: 'serviceaccounts "nope" not found' }));
        })();
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const { port } = server.address() as AddressInfo;
      writeFileSync(join(dir, 'ca.pem'), CA_PEM);
      // client-node refuses plain HTTP unless TLS verification is off; the CA is still exported.
      kubeconfig = join(dir, 'kubeconfig');
      writeFileSync(
        kubeconfig,
        [
          'apiVersion: v1',
          'kind: Config',
          `clusters: [{name: fake, cluster: {server: "http://127.0.0.1:${port}", certificate-authority: ca.pem, insecure-skip-tls-verify: true}}, {name: other, cluster: {server: "http://127.0.0.1:1", insecure-skip-tls-verify: true}}]`,
          'users: [{name: admin, user: {token: admin-token}}]',
          'contexts: [{name: target, context: {cluster: fake, user: admin}}, {name: broken, context: {cluster: other, user: admin}}]',
          'current-context: broken',
          '',
        ].join('\n'),
      );
    });
    beforeEach(() => {
      requests = [];
    });
    after(async () => {
      await new Promise((r) => server.close(r));
      rmSync(dir, { recursive: true, force: true });
    });

    it('requests a token and prints the Secret manifest on stdout', async () => {
      const io = captureIo();
      const code = await exportKubeconfigCli(['--kubeconfig', kubeconfig, '--context', 'target', '-n', 'team1', 'c1', '--as', 'c2', '--secret-namespace', 'src', '--duration', '48h'], io);
      expect(code, io.err()).to.equal(0);
      expect(requests).to.have.length(1);
      expect(requests[0]!.body).to.deep.equal({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { audiences: [], expirationSeconds: 48 * 3600 } });

      const secret = parse(io.out());
      expect(secret.metadata).to.deep.equal({ name: 'c2', namespace: 'src' });
      const kc = new KubeConfig();
      kc.loadFromString(secret.stringData.config);
      expect(kc.getCurrentUser()?.token).to.equal('minted-token');
      expect(kc.getContextObject(kc.getCurrentContext())?.namespace).to.equal('team1');
      // The CA file of the context's cluster (relative to the kubeconfig) is inlined.
      expect(Buffer.from(kc.getCurrentCluster()!.caData!, 'base64').toString()).to.equal(CA_PEM);
      expect(io.err()).to.match(/expires at 2030-01-01T00:00:00.000Z/);
      expect(io.err()).to.match(/capped/);
    });

    it('asks for a year by default and honours --server and --ca-file', async () => {
      const other = join(dir, 'other-ca.pem');
      writeFileSync(other, CA_PEM.replace('fake', 'other'));
      const io = captureIo();
      const code = await exportKubeconfigCli(['--kubeconfig', kubeconfig, '--context', 'target', '-n', 'team1', 'c1', '--as', 'c2', '--server', 'https://target.example:6443', '--ca-file', other], io);
      expect(code, io.err()).to.equal(0);
      expect(requests[0]!.body.spec.expirationSeconds).to.equal(DEFAULT_TOKEN_DURATION_SECONDS);
      const kc = new KubeConfig();
      kc.loadFromString(parse(io.out()).stringData.config);
      expect(kc.getCurrentCluster()!.server).to.equal('https://target.example:6443');
      expect(Buffer.from(kc.getCurrentCluster()!.caData!, 'base64').toString()).to.include('MIIBother');
      expect(parse(io.out()).metadata.namespace).to.equal('default');
    });

    it('finds the kubeconfig through KUBECONFIG', async () => {
      const io = captureIo({ KUBECONFIG: kubeconfig });
      expect(await exportKubeconfigCli(['--context', 'target', '-n', 'team1', 'c1', '--as', 'c2'], io)).to.equal(0);
    });

    it('says to create the Source first when the service account does not exist', async () => {
      const io = captureIo();
      const code = await exportKubeconfigCli(['--kubeconfig', kubeconfig, '--context', 'target', '-n', 'team1', 'nope', '--as', 'c2'], io);
      expect(code).to.equal(1);
      expect(io.out()).to.equal('');
      expect(io.err()).to.match(/service account team1\/nope not found in context target: create the Source first/);
    });

    it('says when the server cannot be reached', async () => {
      const io = captureIo();
      const code = await exportKubeconfigCli(['--kubeconfig', kubeconfig, '-n', 'team1', 'c1', '--as', 'c2'], io);
      expect(code).to.equal(1);
      expect(io.err()).to.match(/cannot reach http:\/\/127\.0\.0\.1:1 \(context broken\)/);
    });

    const usage: [string, string[], RegExp][] = [
      ['no arguments', [], /-n NAMESPACE is required/],
      ['no service account', ['-n', 'x', '--as', 'y'], /SERVICE_ACCOUNT is required/],
      ['two service accounts', ['-n', 'x', 'a', 'b', '--as', 'y'], /one SERVICE_ACCOUNT expected/],
      ['no --as', ['-n', 'x', 'sa'], /--as SECRET_NAME is required/],
      ['a bad duration', ['-n', 'x', 'sa', '--as', 'y', '--duration', '1y'], /--duration: invalid duration/],
      ['a too short duration', ['-n', 'x', 'sa', '--as', 'y', '--duration', '5m'], /at least 10m/],
      ['an unknown flag', ['-n', 'x', 'sa', '--as', 'y', '--frobnicate'], /Unknown option '--frobnicate'/],
    ];
    for (const [why, args, message] of usage) {
      it(`prints the usage and exits 2 on ${why}`, async () => {
        const io = captureIo();
        expect(await exportKubeconfigCli(args, io)).to.equal(2);
        expect(io.err()).to.match(message);
        expect(io.err()).to.include('usage: admiralty export-kubeconfig');
        expect(requests).to.have.length(0);
      });
    }

    it('prints the help on stdout with --help, mentioning that the server may cap the duration', async () => {
      const io = captureIo();
      expect(await exportKubeconfigCli(['--help'], io)).to.equal(0);
      expect(io.out()).to.match(/may cap it/);
    });

    it('says when the kubeconfig cannot be read', async () => {
      const missing = captureIo();
      expect(await exportKubeconfigCli(['--kubeconfig', join(dir, 'missing'), '-n', 'x', 'sa', '--as', 'y'], missing)).to.equal(1);
      expect(missing.err()).to.match(/kubeconfig .*missing does not exist/);

      const garbage = join(dir, 'garbage');
      writeFileSync(garbage, 'clusters: [unclosed');
      const invalid = captureIo();
      expect(await exportKubeconfigCli(['--kubeconfig', garbage, '-n', 'x', 'sa', '--as', 'y'], invalid)).to.equal(1);
      expect(invalid.err()).to.match(/cannot read kubeconfig .*garbage/);

      const unknown = captureIo();
      expect(await exportKubeconfigCli(['--kubeconfig', kubeconfig, '--context', 'nope', '-n', 'x', 'sa', '--as', 'y'], unknown)).to.equal(1);
      expect(unknown.err()).to.match(/context nope not found .*\(contexts: target, broken\)/);
    });
  });
});
