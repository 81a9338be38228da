import { expect } from 'chai';
import { SOURCE_USER } from '../sandbox/sandbox.js';
import { apply, connectNamespace, disconnectNamespace, electedDeployment, getJson, kubectl, liveProxies, readyOf, running, sandbox, uniqueName, waitFor } from './support.js';

const ELECT = 'multicluster.admiralty.io/elect';
const MANIFEST = 'multicluster.admiralty.io/sourcepod-manifest';
const DELEGATED = 'multicluster.admiralty.io/Delegated';

/** What a pod creator could put in the manifest annotation: root on the target's node. */
const FORGED = JSON.stringify({
  spec: {
    hostPID: true,
    volumes: [{ name: 'root', hostPath: { path: '/' } }],
    containers: [{ name: 'app', image: 'nginx', securityContext: { privileged: true }, volumeMounts: [{ name: 'root', mountPath: '/host' }] }],
  },
});

function pod(name: string, namespace: string, opts: { annotations?: Record<string, string>; labels?: Record<string, string>; nodeName?: string } = {}): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, annotations: opts.annotations ?? { [ELECT]: '' }, labels: opts.labels },
    spec: { nodeName: opts.nodeName, containers: [{ name: 'app', image: 'nginx', resources: { requests: { cpu: '10m', memory: '8Mi' } } }] },
  });
}

async function refusal(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => undefined,
    (e: Error) => e,
  );
  expect(err, 'the apiserver refused the request').to.be.instanceOf(Error);
  return err!.message;
}

describe('tenancy', function () {
  this.timeout(300_000);
  const nsA = uniqueName('tenant-a');
  const nsB = uniqueName('tenant-b');
  let nodes: { c1Node: string; c2Node: string };
  before(async () => {
    nodes = await connectNamespace(nsA);
    await kubectl('c1', 'create', 'namespace', nsB);
  });
  after(async () => {
    // Pods bound to a virtual node without a finalizer of ours: nothing confirms their end.
    await kubectl('c1', 'delete', 'pods', '--all', '-n', nsB, '--grace-period=0', '--force').catch(() => undefined);
    await kubectl('c1', 'delete', 'namespace', nsB, '--wait=false', '--ignore-not-found');
    await disconnectNamespace(nsA);
  });

  it("gives no delegate to a pod of another namespace bound to a Target's virtual node by spec.nodeName", async () => {
    // Created before namespace B opts in, so the webhook never sees it: elected, with a
    // manifest and our label, and bound by its creator to namespace A's self Target, whose
    // credentials (the provider's own) could create pods anywhere in c1.
    const name = 'intruder';
    await apply('c1', pod(name, nsB, { annotations: { [ELECT]: '', [MANIFEST]: FORGED }, labels: { 'multicluster.admiralty.io/has-finalizer': 'true' }, nodeName: nodes.c1Node }));
    await kubectl('c1', 'label', 'namespace', nsB, 'multicluster-scheduler=enabled');
    const delegated = async () => (await getJson('c1', 'pod', name, '-n', nsB)).status?.conditions?.find((c: any) => c.type === DELEGATED);
    await waitFor('Delegated=False TargetNotAllowed on the pod', 60_000, async () => (await delegated())?.reason === 'TargetNotAllowed');
    expect((await delegated()).status).to.equal('False');
    const uid = (await getJson('c1', 'pod', name, '-n', nsB)).metadata.uid;
    expect((await getJson('c1', 'pods', '-n', nsB, '-l', `multicluster.admiralty.io/parent-uid=${uid}`)).items).to.deep.equal([]);
    const events = (await getJson('c1', 'events', '-n', nsB, '--field-selector', `involvedObject.name=${name}`)).items;
    expect(events.map((e: any) => [e.type, e.reason])).to.deep.include(['Warning', 'TargetNotAllowed']);
  });

  it('refuses at admission an elected pod that sets spec.nodeName', async () => {
    const message = await refusal(apply('c1', pod(uniqueName('bound'), nsA, { nodeName: nodes.c1Node })));
    expect(message).to.match(/remove spec\.nodeName/);
  });

  it('refuses at admission an elected pod that brings its own source manifest', async () => {
    const message = await refusal(apply('c1', pod(uniqueName('forged'), nsA, { annotations: { [ELECT]: '', [MANIFEST]: FORGED } })));
    expect(message).to.match(/sourcepod-manifest annotation is written by admiralty only/);
  });

  it('refuses an update that changes, removes or adds the manifest or the election', async () => {
    const name = uniqueName('proxy');
    await apply('c1', pod(name, nsA));
    expect((await getJson('c1', 'pod', name, '-n', nsA)).metadata.annotations[MANIFEST]).to.be.a('string');
    for (const args of [[`${MANIFEST}=${FORGED}`, '--overwrite'], [`${MANIFEST}-`], [`${ELECT}-`]]) {
      const message = await refusal(kubectl('c1', 'annotate', 'pod', name, '-n', nsA, ...args));
      expect(message).to.match(/set when a pod is created and cannot be added, changed or removed/);
    }
    const plain = uniqueName('plain');
    await apply('c1', pod(plain, nsB, { annotations: {} }));
    for (const args of [[`${ELECT}=`], [`${MANIFEST}=${FORGED}`]]) {
      const message = await refusal(kubectl('c1', 'annotate', 'pod', plain, '-n', nsB, ...args));
      expect(message).to.match(/cannot be added, changed or removed/);
    }
    // Other annotations stay the user's.
    await kubectl('c1', 'annotate', 'pod', name, '-n', nsA, 'example.com/note=fine');
  });
});

describe('tenancy: a ClusterTarget with a kubeconfig, authorized by a ClusterSource', function () {
  this.timeout(240_000);
  const ct = uniqueName('ct');
  const namespaces = [uniqueName('ct-a'), uniqueName('ct-b')];

  after(async () => {
    // Source side first: the proxies (and with them their delegates), then the ClusterTarget;
    // c2 takes its rights away only then.
    for (const ns of namespaces) await kubectl('c1', 'delete', 'namespace', ns, '--wait=false', '--ignore-not-found');
    for (const ns of namespaces) await kubectl('c1', 'wait', '--for=delete', `namespace/${ns}`, '--timeout=120s').catch(() => undefined);
    await kubectl('c1', 'delete', 'clustertarget', ct, '--ignore-not-found', '--wait=true', '--timeout=60s');
    await kubectl('c2', 'delete', 'clustersource', ct, '--ignore-not-found');
    for (const ns of namespaces) await kubectl('c2', 'delete', 'namespace', ns, '--wait=false', '--ignore-not-found');
  });

  it('runs the pods of two namespaces in c2 through one ClusterTarget, each delegate in its own namespace there', async () => {
    for (const ns of namespaces) {
      await kubectl('c1', 'create', 'namespace', ns);
      await kubectl('c1', 'label', 'namespace', ns, 'multicluster-scheduler=enabled');
      await kubectl('c2', 'create', 'namespace', ns);
    }
    // In c2: one ClusterSource for c1's identity (the ServiceAccount c1's kubeconfig Secret names) grants it every namespace.
    const [saNamespace, saName] = SOURCE_USER.split(':').slice(2);
    await apply('c2', JSON.stringify({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'ClusterSource', metadata: { name: ct }, spec: { serviceAccount: { name: saName, namespace: saNamespace } } }));
    for (const ns of namespaces) {
      await waitFor(`the ClusterSource bound for ${ns}`, 30_000, async () => (await kubectl('c2', 'auth', 'can-i', 'create', 'pods', '-n', ns, '--as', SOURCE_USER).catch(() => 'no')).trim() === 'yes');
    }
    // In c1: a ClusterTarget that reads c2's kubeconfig from a Secret (not self), no namespaced Target at all.
    await apply('c1', JSON.stringify({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'ClusterTarget', metadata: { name: ct }, spec: { kubeconfigSecret: { namespace: 'default', name: 'c2' } } }));
    let node = '';
    await waitFor('the ClusterTarget Ready', 60_000, async () => {
      const t = await getJson('c1', 'clustertarget', ct);
      node = t.status?.virtualNodeName ?? '';
      return readyOf(t) === 'True' && node !== '';
    });

    for (const ns of namespaces) await apply('c1', electedDeployment('web', ns, 2, '10m'));
    for (const ns of namespaces) {
      // The ClusterTarget's node is the only one these namespaces may use.
      expect(Object.fromEntries(await running(ns, 'web', 2))).to.deep.equal({ [node]: 2 });
      for (const proxy of await liveProxies(ns, 'web')) {
        const delegates = (await getJson('c2', 'pods', '-n', ns, '-l', `multicluster.admiralty.io/parent-uid=${proxy.metadata.uid}`)).items;
        expect(delegates.map((d: any) => [d.metadata.namespace, d.status.phase]), `delegate of ${ns}/${proxy.metadata.name}`).to.deep.equal([[ns, 'Running']]);
      }
    }
  });
});

describe('tenancy: a source without a Source in the target', function () {
  this.timeout(300_000);
  // The refused source's identity in c2 is a ServiceAccount of its own, made for this test: no
  // shipped component acts as it, and the suite's 403 audit (which records the shipped
  // identities only) stays blind to it and strict for them.
  const ct = uniqueName('unauthorized');
  const home = uniqueName('home'); // c2: where that identity has its only Source (which also lets it read the ClusterSummary)
  const ns = uniqueName('refused'); // c1 and c2: where its pods go, no Source for it in c2
  const user = `system:serviceaccount:${home}:${ct}`;

  after(async () => {
    // Source side first (the proxies, with their delegates), then the ClusterTarget; c2 takes its rights away only then.
    await kubectl('c1', 'delete', 'namespace', ns, '--wait=false', '--ignore-not-found');
    await kubectl('c1', 'wait', '--for=delete', `namespace/${ns}`, '--timeout=120s').catch(() => undefined);
    await kubectl('c1', 'delete', 'clustertarget', ct, '--ignore-not-found', '--wait=true', '--timeout=60s');
    await kubectl('c1', 'delete', 'secret', ct, '-n', 'default', '--ignore-not-found');
    for (const n of [ns, home]) await kubectl('c2', 'delete', 'namespace', n, '--wait=false', '--ignore-not-found');
  });

  it('refuses its pods with Delegated=False SourceNotAuthorized, naming what to create where, and writes nothing there', async () => {
    // c2: the identity, authorized in namespace `home` only.
    await kubectl('c2', 'create', 'namespace', home);
    await kubectl('c2', 'create', 'namespace', ns);
    await apply('c2', JSON.stringify({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'Source', metadata: { name: ct, namespace: home }, spec: { serviceAccountName: ct } }));
    await waitFor('the Source bound in c2', 30_000, async () => (await kubectl('c2', 'auth', 'can-i', 'list', 'clustersummaries.multicluster.admiralty.io', '--as', user).catch(() => 'no')).trim() === 'yes');
    expect((await kubectl('c2', 'auth', 'can-i', 'create', 'pods', '-n', ns, '--as', user).catch(() => 'no')).trim()).to.equal('no');
    // c1: a ClusterTarget with its kubeconfig; Ready, since the identity may read c2's ClusterSummary.
    await apply('c1', await sandbox.exportKubeconfig('c2', home, ct, ct));
    await apply('c1', JSON.stringify({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'ClusterTarget', metadata: { name: ct }, spec: { kubeconfigSecret: { namespace: 'default', name: ct } } }));
    await waitFor('the ClusterTarget Ready', 60_000, async () => readyOf(await getJson('c1', 'clustertarget', ct)) === 'True');
    await kubectl('c1', 'create', 'namespace', ns);
    await kubectl('c1', 'label', 'namespace', ns, 'multicluster-scheduler=enabled');
    await apply('c1', JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: ns }, data: { mode: 'prod' } }));
    // Two pods kept to this ClusterTarget's node: one whose delegate needs a copy (refused first), one that needs none.
    const pods = { copy: 'with-copy', delegate: 'plain' };
    for (const [write, name] of Object.entries(pods)) {
      await apply(
        'c1',
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name, namespace: ns, annotations: { [ELECT]: '' } },
          spec: {
            nodeSelector: { 'multicluster.admiralty.io/cluster-target-name': ct },
            containers: [{ name: 'app', image: 'nginx', resources: { requests: { cpu: '10m', memory: '8Mi' } }, envFrom: write === 'copy' ? [{ configMapRef: { name: 'settings' } }] : undefined }],
          },
        }),
      );
    }
    const delegated = async (name: string) => (await getJson('c1', 'pod', name, '-n', ns)).status?.conditions?.find((c: any) => c.type === DELEGATED);
    const advice = (resource: string) =>
      `the cluster of ClusterTarget ${ct} does not authorize this source (user "${user}") to create ${resource} in namespace ${ns}: create a ClusterSource in that cluster with spec.userName "${user}"`;
    for (const [name, resource] of [[pods.copy, 'configmaps'], [pods.delegate, 'pods']]) {
      await waitFor(`Delegated=False SourceNotAuthorized on ${name}`, 60_000, async () => (await delegated(name))?.reason === 'SourceNotAuthorized');
      expect(await delegated(name), name).to.include({ status: 'False', message: advice(resource) });
      expect((await getJson('c1', 'pod', name, '-n', ns)).spec.nodeName, `${name} is not bound`).to.equal(undefined);
    }
    // The copy's refusal is a Warning on the proxy; the delegate's reaches kube-scheduler's FailedScheduling.
    const events = async (name: string) => (await getJson('c1', 'events', '-n', ns, '--field-selector', `involvedObject.name=${name}`)).items;
    expect((await events(pods.copy)).map((e: any) => [e.type, e.reason, e.message])).to.deep.include(['Warning', 'SourceNotAuthorized', advice('configmaps')]);
    await waitFor('the refusal in a FailedScheduling event', 30_000, async () => (await events(pods.delegate)).some((e: any) => e.reason === 'FailedScheduling' && e.message.includes(advice('pods'))));
    // Nothing was written in c2 for them.
    expect((await getJson('c2', 'pods', '-n', ns)).items).to.deep.equal([]);
    expect((await getJson('c2', 'configmaps', '-n', ns)).items.map((c: any) => c.metadata.name)).to.deep.equal(['kube-root-ca.crt']);
  });
});
