import { expect } from 'chai';
import { apply, getJson, kubectl, kubectlStdin, sandbox, uniqueName, waitFor } from './support.js';

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
