import { expect } from 'chai';
import { parse } from 'yaml';
import { SOURCE_USER } from '../sandbox/sandbox.js';
import { apply, connectNamespace, disconnectNamespace, electedDeployment, getJson, kubectl, kubectlStdin, liveProxies, readyOf, running, sandbox, uniqueName, waitFor } from './support.js';

const ELECT = 'multicluster.admiralty.io/elect';
const MANIFEST = 'multicluster.admiralty.io/sourcepod-manifest';
const DELEGATED = 'multicluster.admiralty.io/Delegated';
const LABEL = 'multicluster.admiralty.io/has-finalizer';

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
    await apply('c1', pod(name, nsB, { annotations: { [ELECT]: '', [MANIFEST]: FORGED }, labels: { [LABEL]: 'true' }, nodeName: nodes.c1Node }));
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

  it('refuses an update that changes, removes or adds the manifest or the election, or adds our label', async () => {
    const name = uniqueName('proxy');
    await apply('c1', pod(name, nsA));
    expect((await getJson('c1', 'pod', name, '-n', nsA)).metadata.annotations[MANIFEST]).to.be.a('string');
    for (const args of [[`${MANIFEST}=${FORGED}`, '--overwrite'], [`${MANIFEST}-`], [`${ELECT}-`]]) {
      const message = await refusal(kubectl('c1', 'annotate', 'pod', name, '-n', nsA, ...args));
      expect(message).to.match(/set when a pod is created and cannot be added, changed or removed/);
    }
    expect(await refusal(kubectl('c1', 'label', 'pod', name, '-n', nsA, `${LABEL}=false`, '--overwrite'))).to.match(/cannot be added or changed, only removed/);
    // A pod created with our label but unelected (the webhook never saw it) stays unelected.
    const labelled = uniqueName('labelled');
    await apply('c1', pod(labelled, nsB, { annotations: {}, labels: { [LABEL]: 'true' } }));
    for (const args of [[`${ELECT}=`], [`${MANIFEST}=${FORGED}`]]) {
      const message = await refusal(kubectl('c1', 'annotate', 'pod', labelled, '-n', nsB, ...args));
      expect(message).to.match(/cannot be added, changed or removed/);
    }
    // Our label may go (admiralty cleanup removes it at uninstall), but never come back.
    await kubectl('c1', 'label', 'pod', labelled, '-n', nsB, `${LABEL}-`);
    expect(await refusal(kubectl('c1', 'label', 'pod', labelled, '-n', nsB, `${LABEL}=true`))).to.match(/cannot be added or changed, only removed/);
    // A pod without the label is no business of the policy (nor a proxy to the provider, whose
    // tenancy check requires the label): its annotations are its creator's.
    const plain = uniqueName('plain');
    await apply('c1', pod(plain, nsB, { annotations: {} }));
    await kubectl('c1', 'annotate', 'pod', plain, '-n', nsB, `${ELECT}=`, `${MANIFEST}=${FORGED}`);
    expect(await refusal(kubectl('c1', 'label', 'pod', plain, '-n', nsB, `${LABEL}=true`))).to.match(/cannot be added or changed, only removed/);
    // Other annotations stay the user's.
    await kubectl('c1', 'annotate', 'pod', name, '-n', nsA, 'example.com/note=fine');
  });
});

describe('tenancy: a Binding cannot write what makes a pod a proxy', function () {
  this.timeout(120_000);
  const ns = uniqueName('binding');
  before(async () => {
    await kubectl('c1', 'create', 'namespace', ns);
  });
  after(async () => {
    await kubectl('c1', 'delete', 'pods', '--all', '-n', ns, '--grace-period=0', '--force').catch(() => undefined);
    await kubectl('c1', 'delete', 'namespace', ns, '--wait=false', '--ignore-not-found');
  });

  it('refuses a Binding that carries the election, the manifest or our label, through either resource', async () => {
    // Unelected, and left unscheduled (no scheduler has that name): a Binding is what gives it a node.
    const name = 'unbound';
    await apply('c1', JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: ns }, spec: { schedulerName: 'nobody', containers: [{ name: 'app', image: 'nginx' }] } }));
    const bind = (path: string, metadata: Record<string, unknown>) =>
      kubectlStdin(
        'c1',
        JSON.stringify({ apiVersion: 'v1', kind: 'Binding', metadata: { name, ...metadata }, target: { apiVersion: 'v1', kind: 'Node', name: 'nowhere' } }),
        'create',
        '--raw',
        path,
        '-f',
        '-',
      );
    for (const path of [`/api/v1/namespaces/${ns}/pods/${name}/binding`, `/api/v1/namespaces/${ns}/bindings`]) {
      for (const metadata of [{ annotations: { [ELECT]: '' } }, { annotations: { [MANIFEST]: FORGED } }, { labels: { [LABEL]: 'true' } }]) {
        const refused = await bind(path, metadata);
        expect(refused.code, `${path} with ${JSON.stringify(metadata)}`).not.to.equal(0);
        expect(refused.stderr).to.match(/a Binding cannot carry/);
      }
    }
    const unbound = await getJson('c1', 'pod', name, '-n', ns);
    expect(unbound.spec.nodeName).to.equal(undefined);
    // Anything else still goes through, and reaches the pod: the door the policy shuts is real.
    const bound = await bind(`/api/v1/namespaces/${ns}/pods/${name}/binding`, { annotations: { 'example.com/bound-by': 'test' } });
    expect(bound.code, bound.stderr).to.equal(0);
    const after = await getJson('c1', 'pod', name, '-n', ns);
    expect(after.spec.nodeName).to.equal('nowhere');
    expect(after.metadata.annotations).to.include({ 'example.com/bound-by': 'test' });
    expect(after.metadata.annotations).not.to.have.any.keys(ELECT, MANIFEST);
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
    await apply(
      'c2',
      JSON.stringify({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'ClusterSource', metadata: { name: ct }, spec: { serviceAccount: { name: saName, namespace: saNamespace } } }),
    );
    for (const ns of namespaces) {
      await waitFor(
        `the ClusterSource bound for ${ns}`,
        30_000,
        async () => (await kubectl('c2', 'auth', 'can-i', 'create', 'pods', '-n', ns, '--as', SOURCE_USER).catch(() => 'no')).trim() === 'yes',
      );
    }
    // In c1: a ClusterTarget that reads c2's kubeconfig from a Secret (not self), no namespaced Target at all.
    await apply(
      'c1',
      JSON.stringify({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'ClusterTarget', metadata: { name: ct }, spec: { kubeconfigSecret: { namespace: 'default', name: 'c2' } } }),
    );
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
        expect(
          delegates.map((d: any) => [d.metadata.namespace, d.status.phase]),
          `delegate of ${ns}/${proxy.metadata.name}`,
        ).to.deep.equal([[ns, 'Running']]);
      }
    }
  });
});

describe('tenancy: a ClusterTarget whose identity has a Source in some namespaces of the target only', function () {
  this.timeout(300_000);
  // The identity in c2 is a ServiceAccount of its own, made for this test: no shipped component
  // acts as it, and the suite's 403 audit (which records the shipped identities only) stays
  // strict for them. The provider asks c2 what it may do with SelfSubjectAccessReviews, which
  // never answer 403.
  const ct = uniqueName('partial');
  const home = uniqueName('home'); // c1 and c2: where that identity has a Source from the start
  const ns = uniqueName('later'); // c1 and c2: where it gets one only halfway through
  const user = `system:serviceaccount:${home}:${ct}`;

  after(async () => {
    // Source side first (the proxies, with their delegates), then the ClusterTarget; c2 takes its rights away only then.
    for (const n of [home, ns]) await kubectl('c1', 'delete', 'namespace', n, '--wait=false', '--ignore-not-found');
    for (const n of [home, ns]) await kubectl('c1', 'wait', '--for=delete', `namespace/${n}`, '--timeout=120s').catch(() => undefined);
    await kubectl('c1', 'delete', 'clustertarget', ct, '--ignore-not-found', '--wait=true', '--timeout=60s');
    await kubectl('c1', 'delete', 'secret', ct, '-n', 'default', '--ignore-not-found');
    for (const n of [ns, home]) await kubectl('c2', 'delete', 'namespace', n, '--wait=false', '--ignore-not-found');
  });

  it("places its namespaces' pods, is not offered to another namespace's (FailedScheduling names the Source to create), and places those once the Source exists", async () => {
    // c2: the identity, authorized in namespace `home` only.
    for (const n of [home, ns]) await kubectl('c2', 'create', 'namespace', n);
    await apply('c2', JSON.stringify({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'Source', metadata: { name: ct, namespace: home }, spec: { serviceAccountName: ct } }));
    await waitFor('the Source bound in c2', 30_000, async () => (await kubectl('c2', 'auth', 'can-i', 'create', 'pods', '-n', home, '--as', user).catch(() => 'no')).trim() === 'yes');
    expect((await kubectl('c2', 'auth', 'can-i', 'create', 'pods', '-n', ns, '--as', user).catch(() => 'no')).trim()).to.equal('no');
    // c1: both namespaces opted in (`ns` first: the provider's namespace watch delivers it first), then the ClusterTarget.
    for (const n of [ns, home]) {
      await kubectl('c1', 'create', 'namespace', n);
      await kubectl('c1', 'label', 'namespace', n, 'multicluster-scheduler=enabled');
    }
    await apply('c1', await sandbox.exportKubeconfig('c2', home, ct, ct));
    await apply(
      'c1',
      JSON.stringify({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'ClusterTarget', metadata: { name: ct }, spec: { kubeconfigSecret: { namespace: 'default', name: ct } } }),
    );
    // Ready, and its status says that only `home` of these may use it: the probe has asked c2 about both.
    let node = '';
    await waitFor('the ClusterTarget Ready, placing pods of its Source namespace only', 60_000, async () => {
      const t = await getJson('c1', 'clustertarget', ct);
      const ready = t.status?.conditions?.find((c: any) => c.type === 'Ready');
      node = t.status?.virtualNodeName ?? '';
      return ready?.status === 'True' && ready.reason === 'NoClusterSource' && ready.message.includes(`(user "${user}")`) && ready.message.includes(`offered this target (${home})`) && node !== '';
    });

    // No Target of their own in these namespaces: the ClusterTarget's node is the only one their pods may use.
    await apply('c1', pod('allowed', home));
    await apply('c1', pod('waiting', ns));
    const bound = async (name: string, namespace: string) => (await getJson('c1', 'pod', name, '-n', namespace)).spec.nodeName;
    await waitFor(`${home}/allowed bound to the ClusterTarget's node`, 60_000, async () => (await bound('allowed', home)) === node);

    // The filter keeps `ns`'s pod off the target, saying which Source to create for whom; the
    // bind never tried (no Delegated condition), so nothing was written in c2.
    const advice = `the cluster of ClusterTarget ${ct} does not authorize this source (user "${user}") to create pods in namespace ${ns}: create a Source in namespace ${ns} of that cluster with spec.userName "${user}", or a ClusterSource for every namespace`;
    const events = async () => (await getJson('c1', 'events', '-n', ns, '--field-selector', 'involvedObject.name=waiting')).items;
    await waitFor("the filter's reason in a FailedScheduling event", 60_000, async () => (await events()).some((e: any) => e.reason === 'FailedScheduling' && e.message.includes(advice)));
    const waiting = await getJson('c1', 'pod', 'waiting', '-n', ns);
    expect(waiting.spec.nodeName, 'not bound').to.equal(undefined);
    expect(
      waiting.status?.conditions?.find((c: any) => c.type === DELEGATED),
      'no bind was tried',
    ).to.equal(undefined);
    expect((await getJson('c2', 'pods', '-n', ns)).items).to.deep.equal([]);

    // The operator creates the Source the message names: the pending pod is placed on the next
    // probe and scheduling retry, not after a back-off of minutes.
    const fixedAt = Date.now();
    await apply('c2', JSON.stringify({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'Source', metadata: { name: ct, namespace: ns }, spec: { userName: user } }));
    await waitFor(`${ns}/waiting bound to the ClusterTarget's node`, 60_000, async () => (await bound('waiting', ns)) === node);
    console.log(`      ${ns}/waiting bound ${((Date.now() - fixedAt) / 1000).toFixed(1)} s after its Source was created`);
    const delegates = (await getJson('c2', 'pods', '-n', ns, '-l', `multicluster.admiralty.io/parent-uid=${waiting.metadata.uid}`)).items;
    expect(delegates.map((d: any) => d.metadata.namespace)).to.deep.equal([ns]);
  });
});

describe('tenancy: a Target with a kubeconfig, created before its Source in the target', function () {
  this.timeout(300_000);
  // As above, an identity of its own in c2, so the suite's 403 audit stays strict for the
  // shipped ones: this one is refused (403) until its Source exists.
  const ns = uniqueName('early'); // c1 and c2
  const sa = 'early-source';
  const user = `system:serviceaccount:${ns}:${sa}`;
  const viewer = uniqueName('early-viewer'); // c2: its ClusterRoleBinding to the summary viewer

  after(async () => {
    // Source side first (the proxy, with its delegate, and the Target), then c2.
    await kubectl('c1', 'delete', 'namespace', ns, '--wait=false', '--ignore-not-found');
    await kubectl('c1', 'wait', '--for=delete', `namespace/${ns}`, '--timeout=120s').catch(() => undefined);
    await kubectl('c2', 'delete', 'clusterrolebinding', viewer, '--ignore-not-found');
    await kubectl('c2', 'delete', 'namespace', ns, '--wait=false', '--ignore-not-found');
  });

  it('is not Ready and tries no bind while its identity may not create pods there, names the Source to create, and places the pod within a probe of that Source', async () => {
    // c2: the identity, with no right yet. c1: the namespace opted in, the Secret, the Target.
    await kubectl('c2', 'create', 'namespace', ns);
    await kubectl('c2', 'create', 'serviceaccount', sa, '-n', ns);
    await kubectl('c1', 'create', 'namespace', ns);
    await kubectl('c1', 'label', 'namespace', ns, 'multicluster-scheduler=enabled');
    const secret = parse(await sandbox.exportKubeconfig('c2', ns, sa, 'c2'));
    secret.metadata.namespace = ns; // a Target's Secret is in its namespace
    await apply('c1', JSON.stringify(secret));
    await apply('c1', JSON.stringify({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'Target', metadata: { name: 'c2', namespace: ns }, spec: { kubeconfigSecret: { name: 'c2' } } }));
    const ready = async () => (await getJson('c1', 'target', 'c2', '-n', ns)).status?.conditions?.find((c: any) => c.type === 'Ready');
    await waitFor('the Target Ready=False, TargetForbidden', 60_000, async () => (await ready())?.reason === 'TargetForbidden');
    expect((await ready()).status).to.equal('False');
    // Its only target: the namespace has no other Target, and no ClusterTarget exists here.
    await apply('c1', pod('early', ns));

    // Rights short of a Source: the summary, and reading pods in the namespace (a read-only grant).
    // Such a Target used to be Ready: every bind met a 403, each doubling the pod's back-off.
    await kubectl('c2', 'create', 'clusterrolebinding', viewer, '--clusterrole=multicluster-scheduler-cluster-summary-viewer', `--serviceaccount=${ns}:${sa}`);
    await kubectl('c2', 'create', 'rolebinding', 'read-only', '--clusterrole=view', `--serviceaccount=${ns}:${sa}`, '-n', ns);
    const advice = `the cluster of Target ${ns}/c2 does not authorize this source (user "${user}") to create pods in namespace ${ns}: create a Source in namespace ${ns} of that cluster with spec.userName "${user}"`;
    await waitFor('the Target naming the Source to create', 60_000, async () => {
      const r = await ready();
      return r?.status === 'False' && r.reason === 'TargetForbidden' && r.message.endsWith(advice);
    });
    const early = await getJson('c1', 'pod', 'early', '-n', ns);
    expect(early.spec.nodeName, 'not bound').to.equal(undefined);
    expect(
      early.status?.conditions?.find((c: any) => c.type === DELEGATED),
      'no bind was tried',
    ).to.equal(undefined);
    expect((await getJson('c2', 'pods', '-n', ns)).items).to.deep.equal([]);

    // The operator creates the Source: the next probe makes the Target Ready, and the pod is
    // placed then (the probe, 10 s, then kube-scheduler's retry), not after a back-off.
    const fixedAt = Date.now();
    await apply('c2', JSON.stringify({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'Source', metadata: { name: sa, namespace: ns }, spec: { serviceAccountName: sa } }));
    const node = (await getJson('c1', 'target', 'c2', '-n', ns)).status.virtualNodeName;
    await waitFor(`${ns}/early bound to the Target's node`, 60_000, async () => (await getJson('c1', 'pod', 'early', '-n', ns)).spec.nodeName === node);
    const seconds = (Date.now() - fixedAt) / 1000;
    // How soon is printed, not bounded: "not after a back-off" is what 'no bind was tried' above
    // shows (no 403 could double the pod's back-off), and the wait's deadline is for a bind
    // that never comes.
    console.log(`      ${ns}/early bound ${seconds.toFixed(1)} s after its Source was created`);
    expect(await ready()).to.include({ status: 'True', reason: 'TargetReady' });
    const delegates = (await getJson('c2', 'pods', '-n', ns, '-l', `multicluster.admiralty.io/parent-uid=${early.metadata.uid}`)).items;
    expect(delegates.map((d: any) => d.metadata.namespace)).to.deep.equal([ns]);
  });
});
