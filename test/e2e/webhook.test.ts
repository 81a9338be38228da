import { expect } from 'chai';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import { join } from 'node:path';
import { metricByLabels } from '../bench/offload-report.js';
import { apply, getJson, kubectl, kubectlStdin, sandbox, uniqueName, waitFor } from './support.js';

const MANIFEST = 'multicluster.admiralty.io/sourcepod-manifest';

function pod(name: string, namespace: string, elect: boolean): string {
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
  namespace: ${namespace}
  labels: {app: ${name}}
${elect ? '  annotations: {multicluster.admiralty.io/elect: ""}\n' : ''}spec:
  containers: [{name: app, image: nginx, resources: {requests: {cpu: 10m, memory: 8Mi}}}]
`;
}

/** The certificate the webhook serves, as the apiserver sees it. */
function servedCertificate(): Promise<X509Certificate> {
  return new Promise((res, rej) => {
    const socket = tls.connect({ host: '127.0.0.1', port: sandbox.ports('c1').webhook, rejectUnauthorized: false }, () => {
      const raw = socket.getPeerCertificate().raw;
      socket.end();
      res(new X509Certificate(raw));
    });
    socket.on('error', rej);
  });
}

async function caBundle(): Promise<X509Certificate> {
  const cfg = await getJson('c1', 'mutatingwebhookconfiguration', 'admiralty');
  return new X509Certificate(Buffer.from(cfg.webhooks[0].clientConfig.caBundle, 'base64'));
}

describe('admission webhook', function () {
  this.timeout(120_000);
  const names: string[] = [];
  after(async () => {
    for (const n of names) await kubectl('c1', 'delete', 'pod', n, '-n', 'default', '--wait=false', '--ignore-not-found');
  });

  it('turns an elected pod in an enabled namespace into a proxy bound to a virtual node', async () => {
    const name = uniqueName('elected');
    names.push(name);
    await apply('c1', pod(name, 'default', true));
    const p = await getJson('c1', 'pod', name, '-n', 'default');
    const saved = JSON.parse(p.metadata.annotations[MANIFEST]);
    expect(saved.metadata.name).to.equal(name);
    expect(saved.spec.nodeSelector).to.equal(undefined); // the original, before mutation
    // Only the scheduling fields the delegate takes (the admitted pod's defaults), not the pod again.
    expect(Object.keys(saved.spec).sort()).to.deep.equal(['schedulerName', 'tolerations']);
    expect(saved.spec.schedulerName).to.equal('default-scheduler');
    expect(p.spec.nodeSelector).to.deep.equal({ 'virtual-kubelet.io/provider': 'admiralty' });
    expect(p.spec.tolerations).to.deep.include({ key: 'virtual-kubelet.io/provider', operator: 'Equal', value: 'admiralty', effect: 'NoSchedule' });
    expect(p.metadata.finalizers).to.include('multicluster.admiralty.io/delegate');
    await waitFor('proxy bound to a virtual node', 60_000, async () => ((await getJson('c1', 'pod', name, '-n', 'default')).spec.nodeName ?? '').startsWith('admiralty-namespace-default-'));
  });

  it('leaves non-elected pods, and elected pods in namespaces not enabled, untouched on the fake nodes', async () => {
    const ns = uniqueName('plain');
    await kubectl('c1', 'create', 'namespace', ns);
    try {
      const plainHere = uniqueName('plain');
      names.push(plainHere);
      await apply('c1', pod(plainHere, 'default', false));
      await apply('c1', pod('elected-elsewhere', ns, true));
      for (const [n, namespace] of [
        [plainHere, 'default'],
        ['elected-elsewhere', ns],
      ] as const) {
        await waitFor(`${n} Running`, 60_000, async () => (await getJson('c1', 'pod', n, '-n', namespace)).status.phase === 'Running');
        const p = await getJson('c1', 'pod', n, '-n', namespace);
        expect(p.metadata.annotations?.[MANIFEST]).to.equal(undefined);
        expect(p.metadata.finalizers).to.equal(undefined);
        expect(p.spec.nodeName).to.match(/^c1-node-[01]$/);
      }
    } finally {
      await kubectl('c1', 'delete', 'namespace', ns, '--wait=false');
    }
  });

  it("keeps a proxy off the virtual nodes of another namespace's Targets", async () => {
    const ns = uniqueName('no-targets');
    await kubectl('c1', 'create', 'namespace', ns);
    await kubectl('c1', 'label', 'namespace', ns, 'multicluster-scheduler=enabled');
    try {
      await apply('c1', pod('lonely', ns, true));
      await waitFor('the proxy reported Unschedulable', 60_000, async () => {
        const p = await getJson('c1', 'pod', 'lonely', '-n', ns);
        return p.status?.conditions?.some((c: any) => c.type === 'PodScheduled' && c.reason === 'Unschedulable') ?? false;
      });
      expect((await getJson('c1', 'pod', 'lonely', '-n', ns)).spec.nodeName).to.equal(undefined);
    } finally {
      // Never bound, so nothing else will release the finalizer: remove it, as `admiralty cleanup` would.
      await kubectl('c1', 'patch', 'pod', 'lonely', '-n', ns, '--type=json', '-p', '[{"op":"remove","path":"/metadata/finalizers"}]').catch(() => undefined);
      await kubectl('c1', 'delete', 'namespace', ns, '--wait=false');
    }
  });

  it('serves a certificate that the caBundle validates, and keeps admitting after a forced rotation with a new CA', async () => {
    const before = await servedCertificate();
    expect(before.verify((await caBundle()).publicKey)).to.equal(true);

    // Lose the CA (as after a leak) and force a rotation: a new CA, a new serving cert, a new caBundle.
    await kubectl('c1', 'delete', 'secret', 'admiralty-webhook-cert', '-n', 'admiralty');
    const pid = Number(readFileSync(join(sandbox.dir, 'pids', 'c1-provider.pid'), 'utf8'));
    process.kill(pid, 'SIGHUP');
    await waitFor('a new certificate served', 30_000, async () => (await servedCertificate()).serialNumber !== before.serialNumber);
    const after = await servedCertificate();
    const bundle = await caBundle();
    expect(after.verify(bundle.publicKey)).to.equal(true);
    expect(before.verify(bundle.publicKey)).to.equal(false);
    // As the README tells operators: the proxy scheduler reads the CA once, at start. Over
    // HTTP/2 it keeps the connection it opened before the rotation until the provider restarts,
    // and only then fails to verify the new CA; restarted here, so later tests can place pods.
    await sandbox.stop('c1', 'proxy-scheduler');
    await sandbox.start('c1', 'proxy-scheduler');

    const name = uniqueName('after-rotation');
    names.push(name);
    await apply('c1', pod(name, 'default', true));
    expect((await getJson('c1', 'pod', name, '-n', 'default')).metadata.annotations[MANIFEST]).to.be.a('string');
  });

  it('rejects an elected pod whose scheduling-constraints annotation is malformed, saying why', async () => {
    const name = uniqueName('malformed');
    const yaml = pod(name, 'default', true).replace(
      'multicluster.admiralty.io/elect: ""',
      'multicluster.admiralty.io/elect: "", multicluster.admiralty.io/proxy-pod-scheduling-constraints: "nodeSelector: [oops"',
    );
    const err = await apply('c1', yaml).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).to.match(/proxy-pod-scheduling-constraints/);
  });
});

/** `admiralty_webhook_request_duration_seconds` of c1's provider: denied reviews in all, and those within 0.25 s. */
async function deniedReviews(): Promise<{ all: number; within250ms: number }> {
  const text = await (await fetch(`http://127.0.0.1:${sandbox.providerPorts('c1', 0).metrics}/metrics`)).text();
  const buckets = metricByLabels(text, 'admiralty_webhook_request_duration_seconds_bucket', ['result', 'le'], ([result, le]) => `${result} ${le}`);
  return { all: buckets['denied +Inf'] ?? 0, within250ms: buckets['denied 0.25'] ?? 0 };
}

describe('admission webhook under hostile pods', function () {
  this.timeout(180_000);
  const names: string[] = [];
  after(async () => {
    for (const n of names) await kubectl('c1', 'delete', 'pod', n, '-n', 'default', '--wait=false', '--ignore-not-found');
  });

  it("denies 6 concurrent elected pods of 6000 distinct tolerations each, naming the field, each within the provider's 0.25 s bucket, while an ordinary elected pod is admitted and bound and the kubelet API answers /healthz", async () => {
    const hostile = (name: string) =>
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: 'default', annotations: { 'multicluster.admiralty.io/elect': '' } },
        spec: {
          containers: [{ name: 'app', image: 'nginx', resources: { requests: { cpu: '10m', memory: '8Mi' } } }],
          tolerations: Array.from({ length: 6000 }, (_, i) => ({ key: `example.com/taint-${i}`, operator: 'Exists', effect: 'NoSchedule' })),
        },
      });
    const before = await deniedReviews();
    const ordinary = uniqueName('beside-hostile');
    names.push(ordinary);
    const healthz = () =>
      new Promise<number>((res, rej) => {
        const socket = tls.connect({ host: '127.0.0.1', port: sandbox.providerPorts('c1', 0).kubelet, rejectUnauthorized: false }, () =>
          socket.end('GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n'),
        );
        let reply = '';
        socket.on('data', (d) => (reply += d));
        socket.on('end', () => res(Number(/^HTTP\/1\.1 (\d+)/.exec(reply)?.[1] ?? 0)));
        socket.on('error', rej);
      });
    const [denials, , health] = await Promise.all([
      Promise.all(Array.from({ length: 6 }, (_, i) => kubectlStdin('c1', hostile(uniqueName(`tolerations-${i}`)), 'create', '-f', '-'))),
      apply('c1', pod(ordinary, 'default', true)),
      Promise.all(Array.from({ length: 6 }, () => healthz())),
    ]);
    for (const d of denials) {
      expect(d.code, d.stdout).to.not.equal(0);
      expect(d.stderr).to.match(/denied the request: .*spec\.tolerations/);
      expect(d.stderr).to.not.match(/deadline|timeout|context canceled/i);
    }
    expect(health).to.deep.equal([200, 200, 200, 200, 200, 200]);
    const after = await deniedReviews();
    expect(after.all - before.all, 'denied reviews counted').to.equal(6);
    expect(after.within250ms - before.within250ms, 'denied reviews answered within 0.25 s by the provider').to.equal(6);
    await waitFor('the ordinary proxy bound to a virtual node', 60_000, async () => ((await getJson('c1', 'pod', ordinary, '-n', 'default')).spec.nodeName ?? '').startsWith('admiralty-'));
  });
});
