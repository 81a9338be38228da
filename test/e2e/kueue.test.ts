import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { kueueCli } from '../../provider/tools/kueue.js';
import { apply, connectNamespace, disconnectNamespace, getJson, kubectl, kubectlStdin, sandbox, uniqueName, waitFor } from './support.js';

/**
 * Kueue in c1 (issue 56), as the sandbox runs it with `up --kueue` (SANDBOX_KUEUE=1): a Job
 * labelled with a LocalQueue is suspended by Kueue's webhook when created, then admitted within
 * its ClusterQueue's quota and run, or left suspended with the reason in its Workload.
 */
describe('Kueue in c1 (sandbox up --kueue)', function () {
  const ns = uniqueName('kueue');
  // Cluster-scoped, so named after the namespace: runs never share them.
  const flavor = `${ns}-flavor`;
  const clusterQueue = `${ns}-cq`;

  before(async function () {
    if (sandbox.state()?.kueueBinDir === undefined) {
      console.log('    skipped: this sandbox runs no Kueue; start it with `sandbox up --kueue`, or run the suite with SANDBOX_KUEUE=1');
      this.skip();
    }
    await kubectl('c1', 'create', 'namespace', ns);
    await apply(
      'c1',
      `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: ${flavor}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: ${clusterQueue}}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ${ns}}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: ${flavor}, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: queue, namespace: ${ns}}
spec: {clusterQueue: ${clusterQueue}}
`,
    );
  });

  after(async () => {
    if (sandbox.state()?.kueueBinDir === undefined) return;
    await kubectl('c1', 'delete', 'namespace', ns, '--wait=false', '--ignore-not-found');
    await kubectl('c1', 'delete', 'clusterqueue', clusterQueue, '--wait=false', '--ignore-not-found');
    await kubectl('c1', 'delete', 'resourceflavor', flavor, '--wait=false', '--ignore-not-found');
  });

  /** Creates a queued Job of one pod asking for `cpu`; resolves with the Job as the apiserver stored it. */
  async function createJob(name: string, cpu: string): Promise<any> {
    const job = {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name, namespace: ns, labels: { 'kueue.x-k8s.io/queue-name': 'queue' } },
      spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'busybox', resources: { requests: { cpu } } }] } } },
    };
    const r = await kubectlStdin('c1', JSON.stringify(job), 'create', '-f', '-', '-o', 'json');
    expect(r.code, r.stderr).to.equal(0);
    return JSON.parse(r.stdout);
  }

  /** The Workload Kueue made for a Job, once there is one. */
  async function workloadOf(job: any): Promise<any> {
    const list = await getJson('c1', 'workloads.kueue.x-k8s.io', '-n', ns);
    return list.items.find((w: any) => w.metadata.ownerReferences?.some((o: any) => o.uid === job.metadata.uid));
  }

  const condition = (obj: any, type: string): any => obj?.status?.conditions?.find((c: any) => c.type === type);

  it('suspends a queued Job that fits the quota, admits it to its ClusterQueue and runs it to completion', async () => {
    const job = await createJob('fits', '2');
    expect(job.spec.suspend, 'suspended by the webhook on creation').to.equal(true);
    let workload: any;
    await waitFor('its Workload admitted', 30_000, async () => {
      workload = await workloadOf(job);
      return condition(workload, 'Admitted')?.status === 'True';
    });
    expect(workload.status.admission.clusterQueue).to.equal(clusterQueue);
    await waitFor('the Job complete', 30_000, async () => condition(await getJson('c1', 'job', 'fits', '-n', ns), 'Complete')?.status === 'True');
  });

  it('leaves a Job over the quota suspended, its Workload saying that the quota is short', async () => {
    const job = await createJob('too-big', '5');
    let reserved: any;
    await waitFor('its Workload refused a quota reservation', 30_000, async () => {
      reserved = condition(await workloadOf(job), 'QuotaReserved');
      return reserved?.status === 'False';
    });
    expect(reserved.reason).to.equal('Pending');
    expect(reserved.message).to.match(new RegExp(`insufficient quota for cpu in flavor ${flavor}.*> maximum capacity \\(4\\)`));
    const now = await getJson('c1', 'job', 'too-big', '-n', ns);
    expect(now.spec.suspend).to.equal(true);
    expect(now.status.active ?? 0).to.equal(0);
    expect((await getJson('c1', 'pods', '-n', ns, '-l', `batch.kubernetes.io/job-name=too-big`)).items).to.deep.equal([]);
  });
});

/** Runs `admiralty kueue …` in-process against the sandbox's c1 and keeps what it wrote. */
async function kueue(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) }, env: {} };
  const code = await kueueCli([...args, '--kubeconfig', sandbox.kubeconfigPath, '--context', 'c1'], io);
  return { code, stdout, stderr };
}

/**
 * `admiralty kueue setup` (issue 56) against c1, whose namespace has Targets c1 (self) and c2:
 * one flavor per Target, c2's first, each with 2 cpu of quota, and a LocalQueue. A Kueue-managed
 * elected Job goes where its flavor says, whole; the next overflows to the next flavor.
 */
describe('admiralty kueue setup: Kueue admits elected Jobs to one flavor per target, in order', function () {
  const ns = uniqueName('kueue-setup');
  const clusterQueue = `${ns}-cq`;
  let nodes: { c1Node: string; c2Node: string };
  // Each flavor is named as its target's virtual node.
  const flavorOf = (target: 'c1' | 'c2') => (target === 'c1' ? nodes.c1Node : nodes.c2Node);
  const setupArgs = ['setup', '-n', ns, '--targets', 'c2,c1', '--quota', 'cpu=2', '--cluster-queue', clusterQueue, '--local-queue', `${ns}/queue`];

  before(async function () {
    if (sandbox.state()?.kueueBinDir === undefined) {
      console.log('    skipped: this sandbox runs no Kueue; start it with `sandbox up --kueue`, or run the suite with SANDBOX_KUEUE=1');
      this.skip();
    }
    nodes = await connectNamespace(ns);
  });

  after(async () => {
    if (sandbox.state()?.kueueBinDir === undefined) return;
    await disconnectNamespace(ns);
    await kubectl('c1', 'delete', 'clusterqueue', clusterQueue, '--wait=false', '--ignore-not-found');
    if (nodes) await kubectl('c1', 'delete', 'resourceflavor', flavorOf('c1'), flavorOf('c2'), '--wait=false', '--ignore-not-found');
  });

  /**
   * A Job of `pods` elected pods asking for `cpu` each, queued in the LocalQueue. Kwok ends a
   * delegate of a Job pod at once (the sandbox's stage selects `multicluster.admiralty.io/job-name`):
   * keeping the Job's name labels unprefixed keeps its delegates Running, so it holds its quota.
   */
  async function createJob(name: string, pods: number, cpu: string): Promise<any> {
    const job = {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name, namespace: ns, labels: { 'kueue.x-k8s.io/queue-name': 'queue' } },
      spec: {
        parallelism: pods,
        completions: pods,
        template: {
          metadata: { labels: { app: name }, annotations: { 'multicluster.admiralty.io/elect': '', 'multicluster.admiralty.io/no-prefix-label-regexp': 'job-name=' } },
          spec: { restartPolicy: 'Never', terminationGracePeriodSeconds: 0, containers: [{ name: 'main', image: 'busybox', resources: { requests: { cpu } } }] },
        },
      },
    };
    const r = await kubectlStdin('c1', JSON.stringify(job), 'create', '-f', '-', '-o', 'json');
    expect(r.code, r.stderr).to.equal(0);
    return JSON.parse(r.stdout);
  }

  const condition = (obj: any, type: string): any => obj?.status?.conditions?.find((c: any) => c.type === type);

  async function workloadOf(job: any): Promise<any> {
    const list = await getJson('c1', 'workloads.kueue.x-k8s.io', '-n', ns);
    return list.items.find((w: any) => w.metadata.ownerReferences?.some((o: any) => o.uid === job.metadata.uid));
  }

  /** Waits for the Job's Workload to be admitted and returns the flavor of its cpu. */
  async function admittedFlavor(job: any): Promise<string> {
    let workload: any;
    await waitFor(`Job ${job.metadata.name}'s Workload admitted`, 60_000, async () => condition((workload = await workloadOf(job)), 'Admitted')?.status === 'True');
    return workload.status.admission.podSetAssignments[0].flavors.cpu;
  }

  /** Waits until `count` pods of the Job run in c1 (their delegates' phase, mirrored), and returns the virtual nodes they are bound to. */
  async function runningOn(name: string, count: number): Promise<string[]> {
    let pods: any[] = [];
    await waitFor(`${count} pods of Job ${name} Running`, 90_000, async () => {
      pods = (await getJson('c1', 'pods', '-n', ns, '-l', `app=${name}`)).items;
      return pods.length === count && pods.every((p) => p.status.phase === 'Running');
    });
    return pods.map((p) => p.spec.nodeName);
  }

  it("prints a ResourceFlavor per Target whose nodeLabels its virtual node has and whose tolerations tolerate that node's taints, then a ClusterQueue listing c2's flavor before c1's", async () => {
    const { code, stdout, stderr } = await kueue(...setupArgs);
    expect(code, stderr).to.equal(0);
    const objects = parseAllDocuments(stdout).map((d) => d.toJS());
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`)).to.deep.equal([
      `ResourceFlavor/${flavorOf('c2')}`,
      `ResourceFlavor/${flavorOf('c1')}`,
      `ClusterQueue/${clusterQueue}`,
      'LocalQueue/queue',
    ]);
    for (const [flavor, node] of [
      [objects[0], nodes.c2Node],
      [objects[1], nodes.c1Node],
    ] as const) {
      const n = await getJson('c1', 'node', node);
      expect(n.metadata.labels, node).to.include(flavor.spec.nodeLabels);
      for (const taint of n.spec.taints) expect(flavor.spec.tolerations, node).to.deep.include({ key: taint.key, operator: 'Equal', value: taint.value, effect: taint.effect });
    }
    expect(objects[2].spec.resourceGroups[0].flavors.map((f: any) => f.name)).to.deep.equal([flavorOf('c2'), flavorOf('c1')]);
  });

  it('refuses, with exit 1 and nothing on stdout, a target the namespace does not have and a namespace without Targets', async () => {
    const unknown = await kueue('setup', '-n', ns, '--targets', 'c2,c3', '--quota', 'cpu=2');
    expect([unknown.code, unknown.stdout]).to.deep.equal([1, '']);
    expect(unknown.stderr).to.contain(`unknown target "c3" (known: ${ns}/c1, ${ns}/c2)`);
    const empty = await kueue('setup', '-n', `${ns}-none`, '--quota', 'cpu=2');
    expect([empty.code, empty.stdout]).to.deep.equal([1, '']);
    expect(empty.stderr).to.contain(`no Target in namespace ${ns}-none nor ClusterTarget to make flavors of`);
  });

  it('applies them server-side as field manager admiralty-kueue-setup, and the ClusterQueue becomes Active', async () => {
    const { code, stdout, stderr } = await kueue(...setupArgs, '--apply');
    expect(code, stderr).to.equal(0);
    expect(stdout)
      .to.contain(`ResourceFlavor ${flavorOf('c2')} applied`)
      .and.contain(`ClusterQueue ${clusterQueue} applied`)
      .and.contain(`LocalQueue ${ns}/queue applied`);
    const cq = await getJson('c1', 'clusterqueue', clusterQueue, '--show-managed-fields');
    expect(cq.metadata.managedFields.map((f: any) => f.manager)).to.include('admiralty-kueue-setup');
    await waitFor(`ClusterQueue ${clusterQueue} Active`, 30_000, async () => condition(await getJson('c1', 'clusterqueue', clusterQueue), 'Active')?.status === 'True');
  });

  it("admits an elected Job that fits c2's quota to c2's flavor, and runs all its pods in c2", async () => {
    const job = await createJob('first', 4, '500m');
    expect(await admittedFlavor(job)).to.equal(flavorOf('c2'));
    expect(await runningOn('first', 4)).to.deep.equal(Array(4).fill(nodes.c2Node));
    const delegates = (await getJson('c2', 'pods', '-n', ns, '-l', 'job-name=first')).items;
    expect(delegates.map((d: any) => d.status.phase)).to.deep.equal(Array(4).fill('Running'));
  });

  it("admits the next Job to c1's flavor while the first holds c2's quota, and runs all its pods in c1", async () => {
    const job = await createJob('second', 2, '500m');
    expect(await admittedFlavor(job)).to.equal(flavorOf('c1'));
    expect(await runningOn('second', 2)).to.deep.equal(Array(2).fill(nodes.c1Node));
  });

  it('leaves a Job that fits neither flavor suspended, with no pod, its Workload saying so', async () => {
    const job = await createJob('third', 1, '2');
    let reserved: any;
    await waitFor("the third Job's Workload refused a quota reservation", 30_000, async () => (reserved = condition(await workloadOf(job), 'QuotaReserved'))?.status === 'False');
    expect(reserved.message).to.contain(flavorOf('c2')).and.contain(flavorOf('c1'));
    expect((await getJson('c1', 'job', 'third', '-n', ns)).spec.suspend).to.equal(true);
    expect((await getJson('c1', 'pods', '-n', ns, '-l', 'app=third')).items).to.deep.equal([]);
  });
});
