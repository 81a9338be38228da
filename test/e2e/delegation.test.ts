import { spawn } from 'node:child_process';
import { expect } from 'chai';
import { PROXY_FINALIZER } from '../../provider/core/keys.js';
import { sourceUser } from '../sandbox/topology.js';
import { apply, connectNamespace, disconnectNamespace, getJson, kubectl, sandbox, uniqueName, waitFor } from './support.js';

const PARENT_UID = 'multicluster.admiralty.io/parent-uid';
const phaseCount = (pods: any[], phase: string) => pods.filter((p) => p.status?.phase === phase).length;

function nginx(ns: string, replicas: number, extraTemplateSpec = ''): string {
  return `apiVersion: apps/v1
kind: Deployment
metadata: {name: nginx, namespace: ${ns}}
spec:
  replicas: ${replicas}
  selector: {matchLabels: {app: nginx}}
  template:
    metadata:
      labels: {app: nginx}
      annotations: {multicluster.admiralty.io/elect: ""}
    spec:
${extraTemplateSpec}      containers:
      - name: nginx
        image: nginx
        resources: {requests: {cpu: 100m, memory: 32Mi}}
`;
}

/** Proxies of a namespace in c1 (pods bound to virtual nodes or carrying our label). */
async function proxies(ns: string, selector = 'app=nginx'): Promise<any[]> {
  return (await getJson('c1', 'pods', '-n', ns, '-l', selector)).items;
}

/** Our delegates of a namespace in one cluster. */
async function delegates(cluster: string, ns: string): Promise<any[]> {
  return (await getJson(cluster, 'pods', '-n', ns, '-l', 'multicluster.admiralty.io/parent-cluster-name=c1')).items;
}

describe('delegation', function () {
  this.timeout(300_000);

  describe("the user guide's NGINX Deployment", () => {
    const ns = uniqueName('nginx');
    let nodes: { c1Node: string; c2Node: string };
    before(async () => {
      nodes = await connectNamespace(ns);
    });
    after(() => disconnectNamespace(ns));

    it('runs 10 proxies on virtual nodes, with their status mirrored and 10 delegates spread over c1 and c2', async () => {
      await apply('c1', nginx(ns, 10));
      await waitFor('10 proxies Running', 120_000, async () => phaseCount(await proxies(ns), 'Running') === 10);
      const ps = await proxies(ns);
      expect(ps).to.have.length(10);
      const all = [...(await delegates('c1', ns)), ...(await delegates('c2', ns))];
      expect(all).to.have.length(10);
      const byParent = new Map(all.map((d) => [d.metadata.labels[PARENT_UID], d]));
      for (const p of ps) {
        expect([nodes.c1Node, nodes.c2Node]).to.include(p.spec.nodeName);
        expect(p.metadata.annotations['multicluster.admiralty.io/sourcepod-manifest']).to.be.a('string');
        const d = byParent.get(p.metadata.uid);
        expect(d, `delegate of ${p.metadata.name}`).to.exist;
        expect(d.spec.containers[0].image).to.equal('nginx');
        expect(d.metadata.labels['multicluster.admiralty.io/app']).to.equal('nginx');
        // Status mirrored from the delegate.
        expect(p.status.podIP).to.equal(d.status.podIP);
        expect(p.status.phase).to.equal(d.status.phase);
        // The delegate runs where the proxy was bound.
        const inC2 = (await delegates('c2', ns)).some((x) => x.metadata.uid === d.metadata.uid);
        expect(inC2).to.equal(p.spec.nodeName === nodes.c2Node);
      }
      expect((await delegates('c1', ns)).length, 'delegates in c1').to.be.greaterThan(0);
      expect((await delegates('c2', ns)).length, 'delegates in c2').to.be.greaterThan(0);
      // The apiserver names a write's field manager after its User-Agent: ours, not `unknown`.
      const managers = (o: any) => (o.metadata.managedFields ?? []).map((m: any) => `${m.manager} ${m.operation}${m.subresource ? ` ${m.subresource}` : ''}`);
      const selector = 'multicluster.admiralty.io/parent-cluster-name=c1';
      for (const c of ['c1', 'c2']) {
        for (const d of (await getJson(c, 'pods', '-n', ns, '-l', selector, '--show-managed-fields')).items) expect(managers(d), `delegate ${d.metadata.name}`).to.include('admiralty-ts Update');
      }
      for (const p of (await getJson('c1', 'pods', '-n', ns, '-l', 'app=nginx', '--show-managed-fields')).items) {
        expect(managers(p), `proxy ${p.metadata.name}`).to.include('admiralty-ts Update status');
      }
    });

    it('moves everything to c2 when the template asks for region eu', async () => {
      await kubectl(
        'c1',
        'patch',
        'deployment',
        'nginx',
        '-n',
        ns,
        '--type=merge',
        '-p',
        JSON.stringify({ spec: { template: { spec: { nodeSelector: { 'topology.kubernetes.io/region': 'eu' } } } } }),
      );
      await kubectl('c1', 'rollout', 'status', 'deployment/nginx', '-n', ns, '--timeout=180s');
      await waitFor('old proxies and delegates gone', 120_000, async () => (await proxies(ns)).length === 10 && (await delegates('c1', ns)).length === 0 && (await delegates('c2', ns)).length === 10);
      for (const p of await proxies(ns)) expect(p.spec.nodeName).to.equal(nodes.c2Node);
      expect(phaseCount(await delegates('c2', ns), 'Running')).to.equal(10);
    });

    it('replaces a proxy whose delegate is deleted in its target (the owner makes a new one)', async () => {
      const [victim] = await delegates('c2', ns);
      const parent = victim.metadata.labels[PARENT_UID];
      await kubectl('c2', 'delete', 'pod', victim.metadata.name, '-n', ns, '--wait=false');
      await waitFor('the old proxy gone and 10 Running again', 120_000, async () => {
        const ps = await proxies(ns);
        return !ps.some((p) => p.metadata.uid === parent) && phaseCount(ps, 'Running') === 10 && ps.length === 10;
      });
      await waitFor('10 delegates again', 60_000, async () => (await delegates('c2', ns)).length === 10);
    });

    it('deletes the delegate first when a proxy is deleted, leaving no finalizer behind, in two writes of the proxy', async () => {
      const [p] = await proxies(ns);
      // Every write of the proxy, as each of c1's pod watchers gets it: its change, grace period and finalizers.
      const watch = spawn(sandbox.kubectlPath, [
        '--kubeconfig',
        sandbox.kubeconfigPath,
        '--context',
        'c1',
        'get',
        'pod',
        p.metadata.name,
        '-n',
        ns,
        '-w',
        '--output-watch-events',
        '-o',
        'jsonpath={.type} {.object.metadata.deletionGracePeriodSeconds} {.object.metadata.finalizers}{"\\n"}',
      ]);
      let seen = '';
      watch.stdout.on('data', (chunk: Buffer) => (seen += chunk.toString()));
      try {
        await waitFor('the watch of the proxy', 10_000, async () => seen.startsWith('ADDED'));
        await kubectl('c1', 'delete', 'pod', p.metadata.name, '-n', ns, '--timeout=60s');
        await waitFor('the proxy gone in the watch', 10_000, async () => seen.includes('DELETED'));
      } finally {
        watch.kill();
      }
      const left = (await delegates('c2', ns)).filter((d) => d.metadata.labels[PARENT_UID] === p.metadata.uid);
      expect(left).to.have.length(0);
      // The user's delete; ours with no grace (no kubelet confirms a proxy's end), while our
      // finalizer still holds it; then the finalizer's removal, which removes the pod at once.
      const ours = JSON.stringify([PROXY_FINALIZER]);
      expect(seen.trim().split('\n').slice(1)).to.deep.equal([`MODIFIED 30 ${ours}`, `MODIFIED 0 ${ours}`, `DELETED 0 ${ours}`]);
    });

    it('reroutes a Service that selects proxies, and replicates it to the targets running delegates', async () => {
      await apply('c1', `apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ${ns}}\nspec:\n  selector: {app: nginx}\n  ports: [{port: 80}]\n`);
      await waitFor('service rerouted', 60_000, async () => (await getJson('c1', 'service', 'web', '-n', ns)).spec.selector['multicluster.admiralty.io/app'] === 'nginx');
      const svc = await getJson('c1', 'service', 'web', '-n', ns);
      expect(svc.metadata.annotations).to.include({ 'io.cilium/global-service': 'true', 'multicluster.admiralty.io/global': 'true', 'multicluster.admiralty.io/original-selector': 'app=nginx' });
      await waitFor('copy in c2', 60_000, async () => (await kubectl('c2', 'get', 'service', '-n', ns, '-o', 'name')).includes('service/web'));
      const copy = await getJson('c2', 'service', 'web', '-n', ns);
      expect(copy.spec.selector).to.deep.equal({ 'multicluster.admiralty.io/app': 'nginx' });
      expect(copy.spec.clusterIP).to.not.equal(svc.spec.clusterIP);
      // The rerouted selector really selects the delegates in c2.
      const eps = await getJson('c2', 'endpointslices', '-n', ns, '-l', 'kubernetes.io/service-name=web');
      await kubectl('c1', 'delete', 'service', 'web', '-n', ns);
      await waitFor('copy deleted with the original', 60_000, async () => !(await kubectl('c2', 'get', 'service', '-n', ns, '-o', 'name')).includes('service/web'));
      expect(eps.items.length).to.be.greaterThan(0);
    });

    it('removes a deleted Target’s virtual node, and no finalizer of ours is left anywhere', async () => {
      await kubectl('c1', 'scale', 'deployment', 'nginx', '-n', ns, '--replicas=0');
      await waitFor('no proxies', 120_000, async () => (await proxies(ns)).length === 0);
      await kubectl('c1', 'delete', 'target', 'c2', '-n', ns);
      await waitFor('virtual node gone', 60_000, async () => !(await kubectl('c1', 'get', 'nodes', '-o', 'name')).includes(nodes.c2Node));
      for (const cluster of ['c1', 'c2']) {
        for (const kind of ['pods', 'services', 'configmaps', 'secrets']) {
          const items = (await getJson(cluster, kind, '-n', ns)).items;
          for (const o of items)
            expect(
              (o.metadata.finalizers ?? []).filter((f: string) => f.startsWith('multicluster.admiralty.io/')),
              `${cluster} ${kind} ${o.metadata.name}`,
            ).to.deep.equal([]);
        }
      }
    });
  });

  describe('follow', () => {
    const ns = uniqueName('follow');
    before(() => connectNamespace(ns));
    after(() => disconnectNamespace(ns));

    it('copies the ConfigMap and Secret a Job uses to c2 before its delegate, completes the Job, and removes the copies after', async () => {
      await kubectl('c1', 'create', 'configmap', 'settings', '-n', ns, '--from-literal=mode=fast');
      await kubectl('c1', 'create', 'secret', 'generic', 'creds', '-n', ns, '--from-literal=token=s3cr3t');
      await apply(
        'c1',
        `apiVersion: batch/v1
kind: Job
metadata: {name: follow, namespace: ${ns}}
spec:
  template:
    metadata: {annotations: {multicluster.admiralty.io/elect: ""}}
    spec:
      nodeSelector: {topology.kubernetes.io/region: eu}
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
        envFrom: [{configMapRef: {name: settings}}, {secretRef: {name: creds}}]
`,
      );
      await waitFor('Job complete in c1', 120_000, async () => ((await getJson('c1', 'job', 'follow', '-n', ns)).status?.succeeded ?? 0) === 1);
      // The delegate names c1's own copies (README, Topologies: copies are named per source).
      const [d] = await delegates('c2', ns);
      const [cmRef, secretRef] = d.spec.containers[0].envFrom;
      expect(cmRef.configMapRef.name).to.match(/^settings-[0-9a-f]{10}$/);
      expect(secretRef.secretRef.name).to.match(/^creds-[0-9a-f]{10}$/);
      const cm = await getJson('c2', 'configmap', cmRef.configMapRef.name, '-n', ns);
      const secret = await getJson('c2', 'secret', secretRef.secretRef.name, '-n', ns);
      expect(cm.data).to.deep.equal({ mode: 'fast' });
      expect(Buffer.from(secret.data.token, 'base64').toString()).to.equal('s3cr3t');
      expect(cm.metadata.labels['multicluster.admiralty.io/parent-cluster-name']).to.equal('c1');
      expect(cm.metadata.annotations['multicluster.admiralty.io/parent-name']).to.equal('settings');
      expect(new Date(d.metadata.creationTimestamp).getTime()).to.be.at.least(new Date(cm.metadata.creationTimestamp).getTime());
      expect(new Date(d.metadata.creationTimestamp).getTime()).to.be.at.least(new Date(secret.metadata.creationTimestamp).getTime());

      await kubectl('c1', 'delete', 'job', 'follow', '-n', ns, '--cascade=foreground', '--timeout=90s');
      await waitFor('copies gone from c2', 90_000, async () => {
        const names = (await kubectl('c2', 'get', 'configmaps,secrets', '-n', ns, '-o', 'name')).split('\n');
        return !names.includes(`configmap/${cmRef.configMapRef.name}`) && !names.includes(`secret/${secretRef.secretRef.name}`);
      });
      // The originals stay.
      expect((await getJson('c1', 'configmap', 'settings', '-n', ns)).data).to.deep.equal({ mode: 'fast' });
    });
  });

  describe('failures, shown on the proxy, and drains', () => {
    const ns = uniqueName('failures');
    let nodes: { c1Node: string; c2Node: string };
    before(async () => {
      nodes = await connectNamespace(ns);
    });
    after(() => disconnectNamespace(ns));
    const bare = (name: string) =>
      `apiVersion: v1\nkind: Pod\nmetadata: {name: ${name}, namespace: ${ns}, annotations: {multicluster.admiralty.io/elect: ""}}\nspec:\n  nodeSelector: {topology.kubernetes.io/region: eu}\n  containers: [{name: c, image: nginx}]\n`;

    it('says on the proxy why the target refused its delegate, and recovers once it accepts', async () => {
      // A quota of zero pods in c2: the target answers 403 to the delegate.
      await apply('c2', `apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: no-pods, namespace: ${ns}}\nspec: {hard: {pods: "0"}}\n`);
      await waitFor('the quota enforced', 30_000, async () => (await getJson('c2', 'resourcequota', 'no-pods', '-n', ns)).status?.hard?.pods === '0');
      await apply('c1', bare('refused'));
      // The extender's bind tried c2 (the only target the pod may use), which refused: the proxy
      // stays unbound, and kube-scheduler says why on it.
      const scheduled = async () => (await getJson('c1', 'pod', 'refused', '-n', ns)).status?.conditions?.find((c: any) => c.type === 'PodScheduled');
      await waitFor('PodScheduled=False on the proxy, with the refusal', 60_000, async () => /exceeded quota: no-pods/.test((await scheduled())?.message ?? ''));
      expect((await scheduled()).status).to.equal('False');
      expect((await scheduled()).message).to.match(/c2 refused to create the delegate/);
      const events = (await getJson('c1', 'events', '-n', ns, '--field-selector', 'involvedObject.name=refused,reason=FailedScheduling')).items;
      expect(events.map((e: any) => e.message).join('\n')).to.match(/exceeded quota: no-pods/);
      expect((await getJson('c1', 'pod', 'refused', '-n', ns)).spec.nodeName).to.equal(undefined);
      expect((await delegates('c2', ns)).filter((d) => d.metadata.annotations['multicluster.admiralty.io/parent-name'] === 'refused')).to.have.length(0);

      await kubectl('c2', 'delete', 'resourcequota', 'no-pods', '-n', ns);
      await waitFor('the proxy Running once the target accepts', 90_000, async () => (await getJson('c1', 'pod', 'refused', '-n', ns)).status?.phase === 'Running');
    });

    it('marks a bare proxy Failed when its delegate is deleted, instead of losing it silently', async () => {
      await apply('c1', bare('lonely'));
      await waitFor('proxy Running', 60_000, async () => (await getJson('c1', 'pod', 'lonely', '-n', ns)).status?.phase === 'Running');
      const uid = (await getJson('c1', 'pod', 'lonely', '-n', ns)).metadata.uid;
      const [d] = (await getJson('c2', 'pods', '-n', ns, '-l', `${PARENT_UID}=${uid}`)).items;
      await kubectl('c2', 'delete', 'pod', d.metadata.name, '-n', ns);
      await waitFor('proxy Failed', 60_000, async () => (await getJson('c1', 'pod', 'lonely', '-n', ns)).status?.phase === 'Failed');
      const p = await getJson('c1', 'pod', 'lonely', '-n', ns);
      expect(p.metadata.uid, 'the same pod, not a replacement').to.equal(uid);
      expect(p.status.reason).to.equal('DelegateDeleted');
      expect(p.status.containerStatuses[0].state.terminated).to.include({ reason: 'DelegateDeleted' });
      // Not re-created behind the user's back.
      expect((await getJson('c2', 'pods', '-n', ns, '-l', `${PARENT_UID}=${uid}`)).items).to.have.length(0);
    });

    it('evicts the proxies of a drained virtual node and deletes their delegates', async () => {
      await apply('c1', nginx(ns, 3, `      nodeSelector: {topology.kubernetes.io/region: eu}\n`));
      await waitFor('3 proxies Running', 90_000, async () => phaseCount(await proxies(ns), 'Running') === 3);
      const before = (await proxies(ns)).map((p) => p.metadata.uid);
      await kubectl('c1', 'drain', nodes.c2Node, '--ignore-daemonsets', '--delete-emptydir-data', '--force', '--timeout=120s');
      // Evicted: gone from c1 (their finalizer released only once the delegates were deleted).
      const left = (await proxies(ns)).filter((p) => before.includes(p.metadata.uid));
      expect(left, 'old proxies left after the drain').to.have.length(0);
      const delegatesLeft = (await delegates('c2', ns)).filter((d) => before.includes(d.metadata.labels[PARENT_UID]));
      expect(delegatesLeft, 'delegates of evicted proxies').to.have.length(0);
      // The cordoned node takes no replacement: they wait, Pending and unbound.
      for (const p of await proxies(ns)) expect(p.spec.nodeName).to.equal(undefined);
      await kubectl('c1', 'uncordon', nodes.c2Node);
      await waitFor('3 proxies Running again', 90_000, async () => phaseCount(await proxies(ns), 'Running') === 3);
    });
  });

  describe("the delegates' events", () => {
    const ns = uniqueName('events');
    before(() => connectNamespace(ns));
    after(() => disconnectNamespace(ns));

    /** Copies of delegate events on a proxy: those we wrote, with their origin annotation. */
    async function copiedEvents(proxy: string): Promise<any[]> {
      const all = (await getJson('c1', 'events', '-n', ns, '--field-selector', `involvedObject.name=${proxy}`)).items;
      return all.filter((e: any) => e.metadata.annotations?.['multicluster.admiralty.io/mirrored-from']);
    }

    /** A Warning about the delegate of proxy `proxy` in c2, as c2's kubelet would write it (kwok pulls no images). */
    async function warnAboutDelegate(proxy: string, reason: string, message: string): Promise<void> {
      const uid = (await getJson('c1', 'pod', proxy, '-n', ns)).metadata.uid;
      let delegate: any;
      await waitFor(`the delegate of ${proxy} scheduled in c2`, 60_000, async () => !!(delegate = (await getJson('c2', 'pods', '-n', ns, '-l', `${PARENT_UID}=${uid}`)).items[0])?.spec?.nodeName);
      await apply(
        'c2',
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Event',
          metadata: { name: `${delegate.metadata.name}.${reason.toLowerCase()}`, namespace: ns },
          involvedObject: { kind: 'Pod', apiVersion: 'v1', name: delegate.metadata.name, namespace: ns, uid: delegate.metadata.uid },
          type: 'Warning',
          reason,
          message,
          source: { component: 'kubelet', host: delegate.spec.nodeName },
          firstTimestamp: new Date().toISOString(),
          lastTimestamp: new Date().toISOString(),
          count: 1,
        }),
      );
    }

    it("shows each delegate's warnings on its proxy, once, across a provider restart, and not its routine events", async () => {
      const pod = (name: string, cpu: string) =>
        `apiVersion: v1\nkind: Pod\nmetadata: {name: ${name}, namespace: ${ns}, annotations: {multicluster.admiralty.io/elect: ""}}\nspec:\n  nodeSelector: {topology.kubernetes.io/region: eu}\n  containers: [{name: c, image: nginx, resources: {requests: {cpu: "${cpu}"}}}]\n`;
      await apply('c1', pod('small', '100m'));
      await warnAboutDelegate('small', 'BackOff', 'Back-off pulling image "nginx"');
      await waitFor("the delegate's warning on the proxy", 60_000, async () => (await copiedEvents('small')).some((e) => e.reason === 'BackOff'));
      const [warning] = (await copiedEvents('small')).filter((e) => e.reason === 'BackOff');
      const smallUid = (await getJson('c1', 'pod', 'small', '-n', ns)).metadata.uid;
      expect(warning.type).to.equal('Warning');
      expect(warning.involvedObject).to.include({ kind: 'Pod', name: 'small', namespace: ns, uid: smallUid });
      expect(warning.message).to.equal(`[${ns}/c2] Back-off pulling image "nginx"`);
      // c2's scheduler said Scheduled about the delegate before the warning was written; the
      // default (--delegate-events=warnings) leaves that routine event in c2.
      const [delegate] = (await getJson('c2', 'pods', '-n', ns, '-l', `${PARENT_UID}=${smallUid}`)).items;
      const inC2 = (await getJson('c2', 'events', '-n', ns, '--field-selector', `involvedObject.name=${delegate.metadata.name}`)).items;
      expect(
        inC2.map((e: any) => e.reason),
        "c2's own events about the delegate",
      ).to.include('Scheduled');
      expect((await copiedEvents('small')).map((e) => e.reason)).to.deep.equal(['BackOff']);

      // Copies have names derived from the original event: a restart copies none twice.
      const copies = async () => copiedEvents('small');
      const before = (await copies()).map((e) => e.metadata.name);
      await sandbox.stop('c1', 'provider');
      await sandbox.start('c1', 'provider');
      await waitFor('the provider delegating again', 60_000, async () => {
        // Created once (an apply would try to put back what the webhook took off the proxy).
        const exists = await kubectl('c1', 'get', 'pod', 'after-restart', '-n', ns, '-o', 'name').catch(() => '');
        if (!exists) await apply('c1', pod('after-restart', '100m')).catch(() => '');
        return (await getJson('c1', 'pod', 'after-restart', '-n', ns).catch(() => undefined))?.spec?.nodeName !== undefined;
      });
      await warnAboutDelegate('after-restart', 'Unhealthy', 'Readiness probe failed');
      await waitFor("the new delegate's warning on its proxy", 60_000, async () => (await copiedEvents('after-restart')).length > 0);
      const after = await copies();
      const origins = after.map((e) => e.metadata.annotations['multicluster.admiralty.io/mirrored-from']);
      expect(new Set(origins).size, `one copy per original event: ${origins.join(', ')}`).to.equal(origins.length);
      expect(after.map((e) => e.metadata.name)).to.include.members(before);
      expect(after.map((e) => e.metadata.name)).to.have.length(before.length);
    });

    it('asks c2 for the events it may keep only: its events watch leaves the routine reasons to the server', async function () {
      if (!sandbox.auditedWatches('c2', sourceUser('c1'))) this.skip(); // a sandbox started before audit logging
      // Each watch of events that c1's provider opened in c2 for this namespace's Target (the
      // default, --delegate-events=warnings), each answered.
      const ofEvents = () => (sandbox.auditedWatches('c2', sourceUser('c1')) ?? []).filter((w) => w.path === `/api/v1/namespaces/${ns}/events`);
      await waitFor("this namespace's Target watching its events in c2", 30_000, async () => ofEvents().length > 0);
      for (const w of ofEvents()) {
        expect(w.fieldSelector.split(','), `${w.at} ${w.path}`).to.include.members(['involvedObject.kind=Pod', 'reason!=Scheduled', 'reason!=Pulled', 'reason!=Started']);
        expect(w.code, `${w.at} ${w.path}: the apiserver takes the selector`).to.equal(200);
      }
    });
  });

  describe('restart safety', () => {
    const ns = uniqueName('restart');
    before(() => connectNamespace(ns));
    after(() => disconnectNamespace(ns));

    it('ends with exactly 100 delegates and 100 Running proxies when the provider is SIGKILLed twice while delegating them', async () => {
      const pods = Array.from(
        { length: 100 },
        (_, i) =>
          `apiVersion: v1\nkind: Pod\nmetadata: {name: p-${i}, namespace: ${ns}, labels: {app: restart}, annotations: {multicluster.admiralty.io/elect: ""}}\nspec:\n  containers: [{name: c, image: nginx}]\n`,
      );
      // The provider serves the webhook too: create while it is up (in production another
      // replica serves admission while the leader restarts), then kill it mid-delegation.
      await apply('c1', pods.join('---\n'));
      await sandbox.stop('c1', 'provider', 'SIGKILL');
      await sandbox.start('c1', 'provider');
      await waitFor('some delegates made by the restarted provider', 60_000, async () => (await delegates('c1', ns)).length + (await delegates('c2', ns)).length > 0);
      await sandbox.stop('c1', 'provider', 'SIGKILL');
      await sandbox.start('c1', 'provider');
      await waitFor('100 proxies Running', 180_000, async () => phaseCount(await proxies(ns, 'app=restart'), 'Running') === 100);
      const ds = [...(await delegates('c1', ns)), ...(await delegates('c2', ns))];
      expect(ds).to.have.length(100);
      expect(new Set(ds.map((d) => d.metadata.labels[PARENT_UID])).size).to.equal(100);
      await kubectl('c1', 'delete', 'pods', '-n', ns, '-l', 'app=restart', '--timeout=120s');
      await waitFor('delegates gone', 60_000, async () => (await delegates('c1', ns)).length + (await delegates('c2', ns)).length === 0);
    });
  });
});
