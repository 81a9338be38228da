import { expect } from 'chai';
import { apply, connectNamespace, disconnectNamespace, freeCpu, getJson, kubectl, uniqueName, waitFor } from './support.js';

/** An elected pod that mounts claim `claim`; `only` pins it to one target by its target-name label. */
function podWithClaim(name: string, ns: string, claim: string, only?: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns, labels: { app: 'volumes' }, annotations: { 'multicluster.admiralty.io/elect': '' } },
    spec: {
      ...(only ? { nodeSelector: { 'multicluster.admiralty.io/target-name': only } } : {}),
      containers: [{ name: 'c', image: 'busybox', resources: { requests: { cpu: '100m' } }, volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
      volumes: [{ name: 'data', persistentVolumeClaim: { claimName: claim } }],
    },
  });
}

function claim(name: string, ns: string, storageClassName: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name, namespace: ns },
    spec: { accessModes: ['ReadWriteOnce'], storageClassName, resources: { requests: { storage: '1Gi' } } },
  });
}

/** A local PersistentVolume on one node (the kind a local-volume provisioner or a zonal disk makes: usable on that node only). */
function localVolume(name: string, storageClassName: string, node: string, extra: { claimRef?: object; provisionedBy?: string } = {}): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name, ...(extra.provisionedBy ? { annotations: { 'pv.kubernetes.io/provisioned-by': extra.provisionedBy } } : {}) },
    spec: {
      capacity: { storage: '1Gi' },
      accessModes: ['ReadWriteOnce'],
      persistentVolumeReclaimPolicy: 'Delete',
      storageClassName,
      local: { path: '/mnt/data' },
      nodeAffinity: { required: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [node] }] }] } },
      ...(extra.claimRef ? { claimRef: extra.claimRef } : {}),
    },
  });
}

/**
 * A proxy's PersistentVolumeClaims and ResourceClaims are its target's: the proxy scheduler leaves
 * them alone (its volume and DRA plugins are off) and the target's scheduler binds and allocates
 * them when it places the delegate. c2's StorageClasses, volumes, device classes and devices are
 * made here, as an operator (or a provisioner, or a device driver) would.
 */
describe('volumes', function () {
  this.timeout(180_000);
  let ns: string;
  let nodes: { c1Node: string; c2Node: string };
  /** Cluster-scoped objects made in c2 by the test, deleted after it. */
  let made: string[];

  beforeEach(async () => {
    ns = uniqueName('vol');
    nodes = await connectNamespace(ns);
    made = [];
  });

  afterEach(async () => {
    await kubectl('c1', 'delete', 'pods', '-n', ns, '--all', '--wait=false');
    await disconnectNamespace(ns);
    if (made.length) await kubectl('c2', 'delete', ...made, '--ignore-not-found', '--wait=false');
  });

  /**
   * In c2, a StorageClass of local volumes (bound on first use, provisioned by nobody) and one
   * such volume, `pv`, on c2's node number `index` (by name). Both are deleted after the test.
   */
  const localVolumeOnC2 = async (index: number, pv: string): Promise<{ sc: string; node: string }> => {
    const sc = `${ns}-local`;
    const node = [...(await freeCpu('c2')).keys()].sort()[index];
    await apply('c2', `apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: ${sc}}\nprovisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: WaitForFirstConsumer\n`);
    await apply('c2', localVolume(pv, sc, node!));
    made.push(`storageclass/${sc}`, `pv/${pv}`);
    return { sc, node: node! };
  };

  /** Events of one pod in c1, their messages joined. */
  const eventsOf = async (pod: string) => (await getJson('c1', 'events', '-n', ns, '--field-selector', `involvedObject.name=${pod}`)).items.map((e: any) => `${e.reason}: ${e.message}`).join('\n');

  it("runs a pod whose claim only c2 has, on the node of c2 that the claim's local volume is on", async () => {
    const { sc, node } = await localVolumeOnC2(1, `${ns}-data`);
    await apply('c2', claim('data', ns, sc));
    // Not pinned: c1 has no such claim (it is the source, and a target too), c2 has.
    await apply('c1', podWithClaim('db', ns, 'data'));
    await waitFor('the pod Running', 90_000, async () => (await getJson('c1', 'pod', 'db', '-n', ns)).status.phase === 'Running');
    const proxy = await getJson('c1', 'pod', 'db', '-n', ns);
    expect(proxy.spec.nodeName).to.equal(nodes.c2Node);
    const [delegate] = (await getJson('c2', 'pods', '-n', ns, '-l', 'multicluster.admiralty.io/parent-cluster-name=c1')).items;
    expect(delegate.spec.nodeName, "on the volume's node").to.equal(node);
    expect(delegate.spec.volumes).to.deep.include({ name: 'data', persistentVolumeClaim: { claimName: 'data' } });
    expect((await getJson('c2', 'pvc', 'data', '-n', ns)).status.phase).to.equal('Bound');
    // The proxy scheduler never looked for the claim in c1: no event of it says it is missing there
    // unqualified (a try of target c1 is refused by c1's own scheduler, and says so, per target).
    expect(await eventsOf('db')).to.not.match(/^FailedScheduling: 0\/\d+ nodes are available: persistentvolumeclaim/m);
    expect((await getJson('c1', 'pvc', '-n', ns)).items, 'no claim made in the source').to.deep.equal([]);
  });

  it("runs a pod with a generic ephemeral volume on the claim c2 makes for its delegate; the source's claim for the proxy binds nothing", async () => {
    const { sc, node } = await localVolumeOnC2(0, `${ns}-scratch`);
    const pod = JSON.parse(podWithClaim('scratch', ns, 'unused', 'c2'));
    pod.spec.volumes = [{ name: 'data', ephemeral: { volumeClaimTemplate: { spec: { accessModes: ['ReadWriteOnce'], storageClassName: sc, resources: { requests: { storage: '1Gi' } } } } } }];
    await apply('c1', JSON.stringify(pod));
    await waitFor('the pod Running', 90_000, async () => (await getJson('c1', 'pod', 'scratch', '-n', ns)).status.phase === 'Running');
    const [delegate] = (await getJson('c2', 'pods', '-n', ns, '-l', 'multicluster.admiralty.io/parent-cluster-name=c1')).items;
    expect(delegate.spec.nodeName).to.equal(node);
    // c2's ephemeral-volume controller named the claim after the delegate, and c2 bound it.
    const c2Claim = await getJson('c2', 'pvc', `${delegate.metadata.name}-data`, '-n', ns);
    expect(c2Claim.status.phase).to.equal('Bound');
    expect(c2Claim.metadata.ownerReferences.map((o: any) => o.uid)).to.deep.equal([delegate.metadata.uid]);
    // c1's, for the proxy, is left to wait (c1 has no such class): nothing was bound to a virtual node.
    const c1Claim = await getJson('c1', 'pvc', 'scratch-data', '-n', ns);
    expect(c1Claim.status.phase).to.equal('Pending');
    expect(c1Claim.metadata.annotations?.['volume.kubernetes.io/selected-node']).to.equal(undefined);
  });

  it("runs a pod that asks for a device (DRA) from a claim template only c2 has, on the node with the device; kept to c1, it gets c1's words", async () => {
    const driver = `gpu-${ns}.e2e.admiralty.io`;
    const node = [...(await freeCpu('c2')).keys()].sort()[1];
    // The test plays the device driver: the class, and two devices published on one node.
    await apply(
      'c2',
      JSON.stringify({ apiVersion: 'resource.k8s.io/v1', kind: 'DeviceClass', metadata: { name: driver }, spec: { selectors: [{ cel: { expression: `device.driver == "${driver}"` } }] } }),
    );
    await apply(
      'c2',
      JSON.stringify({
        apiVersion: 'resource.k8s.io/v1',
        kind: 'ResourceSlice',
        metadata: { name: `${ns}-gpu` },
        spec: { driver, nodeName: node, pool: { name: node, generation: 1, resourceSliceCount: 1 }, devices: [{ name: 'gpu-0' }, { name: 'gpu-1' }] },
      }),
    );
    made.push(`deviceclass/${driver}`, `resourceslice/${ns}-gpu`);
    await apply(
      'c2',
      JSON.stringify({
        apiVersion: 'resource.k8s.io/v1',
        kind: 'ResourceClaimTemplate',
        metadata: { name: 'gpu', namespace: ns },
        spec: { spec: { devices: { requests: [{ name: 'gpu', exactly: { deviceClassName: driver } }] } } },
      }),
    );
    const gpuPod = (name: string, only?: string) => {
      const pod = JSON.parse(podWithClaim(name, ns, 'unused', only));
      delete pod.spec.volumes;
      pod.spec.containers[0] = { name: 'c', image: 'busybox', resources: { requests: { cpu: '100m' }, claims: [{ name: 'gpu' }] } };
      pod.spec.resourceClaims = [{ name: 'gpu', resourceClaimTemplateName: 'gpu' }];
      return JSON.stringify(pod);
    };
    await apply('c1', gpuPod('gpu'));
    await apply('c1', gpuPod('gpu-in-c1', 'c1'));
    await waitFor('the pod Running', 90_000, async () => (await getJson('c1', 'pod', 'gpu', '-n', ns)).status.phase === 'Running');
    expect((await getJson('c1', 'pod', 'gpu', '-n', ns)).spec.nodeName).to.equal(nodes.c2Node);
    const [delegate] = (await getJson('c2', 'pods', '-n', ns, '-l', 'multicluster.admiralty.io/parent-cluster-name=c1')).items;
    expect(delegate.spec.nodeName, "on the device's node").to.equal(node);
    const [claimed] = (await getJson('c2', 'resourceclaims', '-n', ns)).items;
    expect(claimed.status.allocation.devices.results.map((r: any) => r.driver)).to.deep.equal([driver]);
    expect(claimed.status.reservedFor.map((r: any) => r.uid)).to.deep.equal([delegate.metadata.uid]);
    // c1 has no such template: its claim controller says so on the delegate, and the bind says it
    // at once (the delegate never reaches c1's scheduler's queue, so no other word would come).
    let events = '';
    await waitFor("the pod kept to c1 refused with c1's words", 60_000, async () => {
      events = await eventsOf('gpu-in-c1');
      return /FailedScheduling: [\w-]+\/c1: PodResourceClaim gpu: resource claim template "gpu"/.test(events);
    });
    expect(events).to.not.match(/did not place the delegate/);
    expect((await getJson('c1', 'pod', 'gpu-in-c1', '-n', ns)).spec.nodeName).to.equal(undefined);
  });

  it('keeps a pod whose claim no target has unbound, and its events name the claim, per target', async () => {
    await apply('c1', podWithClaim('lost', ns, 'nowhere'));
    let events = '';
    await waitFor('FailedScheduling naming the claim for both targets', 90_000, async () => {
      events = await eventsOf('lost');
      return [/\/c1: .*persistentvolumeclaim "nowhere" not found/, /\/c2: .*persistentvolumeclaim "nowhere" not found/].every((r) => r.test(events));
    });
    const proxy = await getJson('c1', 'pod', 'lost', '-n', ns);
    expect(proxy.spec.nodeName, events).to.equal(undefined);
    // Each refused delegate is deleted: none is left on a node (one may be in the middle of a retry).
    expect((await getJson('c2', 'pods', '-n', ns)).items.filter((p: any) => p.spec.nodeName)).to.deep.equal([]);
  });

  it('binds a pod whose volume takes longer than the placement timeout to provision, once c2 has nominated a node, and runs it when the volume is there', async () => {
    // A WaitForFirstConsumer class whose provisioner is this test: c2's scheduler picks a node,
    // nominates it on the delegate, writes it on the claim, then waits (PreBind) for a volume.
    const sc = `${ns}-slow`;
    const provisioner = 'e2e.admiralty.io/slow';
    await apply('c2', `apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: ${sc}}\nprovisioner: ${provisioner}\nvolumeBindingMode: WaitForFirstConsumer\n`);
    made.push(`storageclass/${sc}`, `pv/${ns}-slow`);
    await apply('c2', claim('slow', ns, sc));
    await apply('c1', podWithClaim('slow', ns, 'slow', 'c2'));
    let selected = '';
    await waitFor('c2 choosing a node for the claim', 60_000, async () => {
      selected = (await getJson('c2', 'pvc', 'slow', '-n', ns)).metadata.annotations?.['volume.kubernetes.io/selected-node'] ?? '';
      return selected !== '';
    });
    const chosenAt = Date.now();
    // Bound while the volume is still missing: the target nominated the node, and the wait is
    // the target's, as it would be for the same pod created there directly.
    await waitFor('the proxy bound', 15_000, async () => (await getJson('c1', 'pod', 'slow', '-n', ns)).spec.nodeName === nodes.c2Node);
    const [waiting] = (await getJson('c2', 'pods', '-n', ns, '-l', 'multicluster.admiralty.io/parent-cluster-name=c1')).items;
    expect(waiting.spec.nodeName, 'the delegate not bound yet').to.equal(undefined);
    expect(waiting.status.nominatedNodeName).to.equal(selected);
    // Past the placement timeout (20 s) with the volume still missing: nothing gives the pod up.
    await new Promise((r) => setTimeout(r, Math.max(0, chosenAt + 22_000 - Date.now())));
    const claimNow = await getJson('c2', 'pvc', 'slow', '-n', ns);
    expect(claimNow.status.phase).to.equal('Pending');
    // The provisioner's work: a volume on the selected node, bound to the claim.
    await apply(
      'c2',
      localVolume(`${ns}-slow`, sc, selected, { provisionedBy: provisioner, claimRef: { apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace: ns, name: 'slow', uid: claimNow.metadata.uid } }),
    );
    await waitFor('the pod Running', 90_000, async () => (await getJson('c1', 'pod', 'slow', '-n', ns)).status.phase === 'Running');
    const [running] = (await getJson('c2', 'pods', '-n', ns, '-l', 'multicluster.admiralty.io/parent-cluster-name=c1')).items;
    expect(running.metadata.uid, 'the first delegate, never refused and made again').to.equal(waiting.metadata.uid);
    expect(running.spec.nodeName).to.equal(selected);
    expect(await eventsOf('slow')).to.not.match(/did not place the delegate/);
  });
});
