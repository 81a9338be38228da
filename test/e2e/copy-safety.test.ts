import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CILIUM_GLOBAL_SERVICE_ANNOTATION,
  DELEGATED_CONDITION,
  GLOBAL_ANNOTATION,
  IS_DELEGATE_ANNOTATION,
  ORIGINAL_SELECTOR_ANNOTATION,
  PARENT_CLUSTER_NAME_LABEL,
  PARENT_NAMESPACE_ANNOTATION,
  PARENT_NAME_ANNOTATION,
  PARENT_UID_LABEL,
} from '../../provider/core/keys.js';
import { Sandbox } from '../sandbox/sandbox.js';
import { apply, connectNamespace, disconnectNamespace, electedDeployment, getJson, kubectl, running, sandbox, uniqueName, waitFor } from './support.js';

const HUB_CLUSTERS = ['c1', 'c2', 'c3'];

/** A cloud load-balancer controller's annotation: it acts on any Service that carries it. */
const LB_ANNOTATION = 'service.beta.kubernetes.io/aws-load-balancer-type';
/** Documentation addresses (RFC 5737): written into objects, never contacted. */
const EXTERNAL_IP = '203.0.113.10';
const SOURCE_RANGE = '198.51.100.0/24';

/** Spec fields that claim an address, a node port or a load balancer: none may be in a copy. */
const CLAIMING_FIELDS = [
  'externalIPs',
  'loadBalancerIP',
  'loadBalancerSourceRanges',
  'loadBalancerClass',
  'externalTrafficPolicy',
  'healthCheckNodePort',
  'allocateLoadBalancerNodePorts',
  'externalName',
];

/** The Warning events of `reason` on Service `name` of `ns` in c1. */
async function serviceEvents(ns: string, name: string, reason: string): Promise<any[]> {
  return (await getJson('c1', 'events', '-n', ns, '--field-selector', `involvedObject.kind=Service,involvedObject.name=${name},reason=${reason}`)).items;
}

/** What a copy in c2 must be, whatever the source asked for: a ClusterIP Service of ours claiming nothing, with the rerouted selector. */
function expectClaimsNothing(copy: any, source: any): void {
  const where = `copy ${copy.metadata.namespace}/${copy.metadata.name} in c2`;
  expect(copy.spec.type, where).to.equal('ClusterIP');
  expect(copy.spec, where).to.not.have.any.keys(...CLAIMING_FIELDS);
  for (const port of copy.spec.ports) expect(port, `${where} port ${port.port}`).to.not.have.property('nodePort');
  expect(copy.spec.selector, where).to.deep.equal({ 'multicluster.admiralty.io/app': 'web' });
  expect(copy.status?.loadBalancer ?? {}, where).to.deep.equal({});
  expect(copy.metadata.annotations, where).to.not.have.property(LB_ANNOTATION);
  expect(copy.metadata.labels, where).to.include({ [PARENT_CLUSTER_NAME_LABEL]: 'c1', [PARENT_UID_LABEL]: source.metadata.uid });
}

/** A Service of type LoadBalancer selecting `app=web`, with everything that claims something in a cluster. */
function loadBalancer(name: string, ns: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: ns, annotations: { [LB_ANNOTATION]: 'nlb' } },
    spec: {
      type: 'LoadBalancer',
      selector: { app: 'web' },
      ports: [{ name: 'http', port: 80, targetPort: 8080 }],
      externalIPs: [EXTERNAL_IP],
      loadBalancerSourceRanges: [SOURCE_RANGE],
      loadBalancerClass: 'example.com/lb',
      externalTrafficPolicy: 'Local',
    },
  });
}

describe('copy safety: what a copy claims in a target, and whose copies a delegate may read', function () {
  this.timeout(300_000);

  describe('Service copies (issue: a copy carried type LoadBalancer, externalIPs and load-balancer annotations into c2)', () => {
    const ns = uniqueName('svc-copy');
    let providerStopped = false;

    before(async () => {
      await connectNamespace(ns);
      // Elected pods delegated to c2 (region eu): a Service that selects them is copied there.
      await apply('c1', electedDeployment('web', ns, 2, '10m', { spec: { nodeSelector: { 'topology.kubernetes.io/region': 'eu' } } }));
      await running(ns, 'web', 2);
      const inC2 = (await getJson('c2', 'pods', '-n', ns, '-l', `${PARENT_CLUSTER_NAME_LABEL}=c1`)).items;
      expect(inC2, 'delegates in c2').to.have.length(2);
    });
    after(async function () {
      this.timeout(120_000);
      if (providerStopped) await sandbox.start('c1', 'provider');
      await disconnectNamespace(ns);
    });

    it('copies a LoadBalancer Service with externalIPs, source ranges and a cloud annotation as a ClusterIP Service without any of them, and says what it left out in one Warning CopyFieldsDropped on the source', async () => {
      await apply('c1', loadBalancer('lb', ns));
      await waitFor('the copy of lb in c2', 60_000, async () => (await kubectl('c2', 'get', 'service', '-n', ns, '-o', 'name')).includes('service/lb'));
      const source = await getJson('c1', 'service', 'lb', '-n', ns);
      // The source keeps what its writer asked for: only its selector is rerouted.
      expect(source.spec).to.include({ type: 'LoadBalancer', externalTrafficPolicy: 'Local' });
      expect(source.spec.externalIPs).to.deep.equal([EXTERNAL_IP]);
      expect(source.metadata.annotations).to.include({ [LB_ANNOTATION]: 'nlb' });
      const copy = await getJson('c2', 'service', 'lb', '-n', ns);
      expectClaimsNothing(copy, source);
      expect(copy.spec.ports.map((p: any) => ({ name: p.name, port: p.port, targetPort: p.targetPort, protocol: p.protocol }))).to.deep.equal([
        { name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' },
      ]);
      expect(copy.metadata.annotations).to.include({ [CILIUM_GLOBAL_SERVICE_ANNOTATION]: 'true', [GLOBAL_ANNOTATION]: 'true', [IS_DELEGATE_ANNOTATION]: '' });

      await waitFor('a CopyFieldsDropped event on lb', 30_000, async () => (await serviceEvents(ns, 'lb', 'CopyFieldsDropped')).length > 0);
      const [event, ...more] = await serviceEvents(ns, 'lb', 'CopyFieldsDropped');
      expect(more, 'further CopyFieldsDropped events').to.deep.equal([]);
      expect(event.type).to.equal('Warning');
      expect(event.involvedObject).to.include({ kind: 'Service', name: 'lb', namespace: ns, uid: source.metadata.uid });
      // Every field the apiserver keeps set on the source and the copy leaves out, in spec key
      // order (allocateLoadBalancerNodePorts and healthCheckNodePort are the apiserver's
      // defaults for a LoadBalancer of policy Local), then the node ports, then the annotation.
      expect(event.message).to.equal(
        `the copies in ${ns}/c2 are ClusterIP Services without: type LoadBalancer, allocateLoadBalancerNodePorts, externalIPs, externalTrafficPolicy, healthCheckNodePort, loadBalancerClass, loadBalancerSourceRanges, ports[].nodePort, annotation ${LB_ANNOTATION}`,
      );

      // Said when copies change, not on every reconcile: a change of the source that leaves
      // the copy as it is (an annotation a copy never carries) is reconciled with no write and
      // no new word. A reconcile is known to have run when the copy takes a change that follows.
      await kubectl('c1', 'annotate', 'service', 'lb', '-n', ns, 'example.com/owner=team-a');
      await kubectl('c1', 'label', 'service', 'lb', '-n', ns, 'tier=front');
      await waitFor('the label on the copy of lb', 30_000, async () => (await getJson('c2', 'service', 'lb', '-n', ns)).metadata.labels?.tier === 'front');
      // The event is posted after the write: wait for it, not for the copy alone.
      await waitFor('a second CopyFieldsDropped event on lb', 30_000, async () => (await serviceEvents(ns, 'lb', 'CopyFieldsDropped')).length >= 2);
      const after = await serviceEvents(ns, 'lb', 'CopyFieldsDropped');
      // The label's rewrite is said, with the new annotation named among the drops; the
      // first event is never repeated (the recorder would bump its count, as it does for a
      // repeat of the same message within ten minutes).
      const byMessage = new Map(after.map((e) => [e.message, e.count]));
      expect(byMessage.get(event.message), 'count of the first event').to.equal(1);
      // (Annotations are named in key order: example.com/… before service.beta.….) Once too:
      // had the annotation's reconcile, which writes nothing, said it, the label's would have
      // bumped its count.
      const second = event.message.replace(`annotation ${LB_ANNOTATION}`, `annotation example.com/owner, annotation ${LB_ANNOTATION}`);
      expect([...byMessage.keys()].filter((m) => m !== event.message)).to.deep.equal([second]);
      expect(byMessage.get(second), 'count of the second event').to.equal(1);
      const relabelled = await getJson('c2', 'service', 'lb', '-n', ns);
      expect(relabelled.metadata.annotations).to.not.have.property('example.com/owner');
      expectClaimsNothing(relabelled, source);
    });

    it("rewrites an older version's copy in c2 (type LoadBalancer, externalIPs, the cloud annotation) as a ClusterIP Service claiming nothing, and deletes an older copy of an ExternalName Service without rerouting or copying it", async () => {
      // An upgrade, as it happens: the older provider had written the copies, the new one
      // starts and finds them. With c1's provider stopped, nothing makes or deletes copies
      // while this test writes the Services in c1 and the older version's copies in c2.
      providerStopped = await sandbox.stop('c1', 'provider');
      expect(providerStopped, "c1's provider was running").to.equal(true);
      await apply('c1', loadBalancer('legacy', ns));
      await apply(
        'c1',
        JSON.stringify({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'ext', namespace: ns }, spec: { type: 'ExternalName', externalName: 'db.example.com', selector: { app: 'web' } } }),
      );
      const legacy = await getJson('c1', 'service', 'legacy', '-n', ns);
      const ext = await getJson('c1', 'service', 'ext', '-n', ns);
      // What the version before allow-listed copies wrote: the rerouted Service's whole spec
      // (cluster IPs and node ports aside), every annotation, and the marks that make it ours
      // (`parent-uid` and `parent-cluster-name` labels, `parent-name`/`parent-namespace`).
      const olderCopy = (svc: any, spec: Record<string, unknown>) =>
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Service',
          metadata: {
            name: svc.metadata.name,
            namespace: ns,
            labels: { [PARENT_UID_LABEL]: svc.metadata.uid, [PARENT_CLUSTER_NAME_LABEL]: 'c1' },
            annotations: {
              ...svc.metadata.annotations,
              [ORIGINAL_SELECTOR_ANNOTATION]: 'app=web',
              [CILIUM_GLOBAL_SERVICE_ANNOTATION]: 'true',
              [GLOBAL_ANNOTATION]: 'true',
              [PARENT_NAME_ANNOTATION]: svc.metadata.name,
              [PARENT_NAMESPACE_ANNOTATION]: ns,
              [IS_DELEGATE_ANNOTATION]: '',
            },
          },
          spec: { ...spec, selector: { 'multicluster.admiralty.io/app': 'web' } },
        });
      const { clusterIP: _ip, clusterIPs: _ips, ipFamilies: _families, healthCheckNodePort: _health, ...legacySpec } = legacy.spec;
      legacySpec.ports = legacySpec.ports.map(({ nodePort: _allocated, ...port }: any) => port);
      await apply('c2', olderCopy(legacy, legacySpec));
      await apply('c2', olderCopy(ext, { type: 'ExternalName', externalName: 'db.example.com' }));
      const before = await getJson('c2', 'service', 'legacy', '-n', ns);
      expect(before.spec.type, "the older version's copy as c2 stored it").to.equal('LoadBalancer');
      expect(before.spec.externalIPs).to.deep.equal([EXTERNAL_IP]);
      expect(before.spec.ports[0].nodePort, 'a node port c2 allocated to it').to.be.a('number');

      await sandbox.start('c1', 'provider');
      providerStopped = false;
      // Rewritten in place, or deleted and made again where c2 refuses the change: absent a moment then.
      await waitFor('the copy of legacy rewritten as ClusterIP', 90_000, async () => (await getJson('c2', 'service', 'legacy', '-n', ns).catch(() => undefined))?.spec.type === 'ClusterIP');
      const rewritten = await getJson('c2', 'service', 'legacy', '-n', ns);
      expectClaimsNothing(rewritten, legacy);
      console.log(`      the older copy was ${rewritten.metadata.uid === before.metadata.uid ? 'rewritten in place' : 'deleted and made again'}`);
      await waitFor('a CopyFieldsDropped event on legacy', 30_000, async () => (await serviceEvents(ns, 'legacy', 'CopyFieldsDropped')).length > 0);
      const [said] = await serviceEvents(ns, 'legacy', 'CopyFieldsDropped');
      expect(said.type).to.equal('Warning');
      expect(said.message).to.match(new RegExp(`^the copies in ${ns}/c2 are ClusterIP Services without: type LoadBalancer, .*externalIPs, .*annotation ${LB_ANNOTATION.replace(/\./g, '\\.')}$`));

      await waitFor('the older copy of ext deleted from c2', 60_000, async () => !(await kubectl('c2', 'get', 'service', '-n', ns, '-o', 'name')).includes('service/ext'));
      // The reconcile that deleted it made no copy; more follow, since every change of a proxy
      // that ext selects wakes its key: one more proxy, Running with its delegate in c2.
      await kubectl('c1', 'scale', 'deployment', 'web', '-n', ns, '--replicas=3');
      await running(ns, 'web', 3);
      expect(await kubectl('c2', 'get', 'service', '-n', ns, '-o', 'name'), 'services in c2').to.not.include('service/ext');
      const extNow = await getJson('c1', 'service', 'ext', '-n', ns);
      expect(extNow.spec.selector, "ext's selector, not rerouted").to.deep.equal({ app: 'web' });
      expect(extNow.metadata.annotations ?? {}).to.not.have.any.keys(ORIGINAL_SELECTOR_ANNOTATION, GLOBAL_ANNOTATION);
    });
  });
  /**
   * Two sources, for real: a sandbox of its own in the `hub` topology (c2 and c3 both send to
   * c1, each with its own provider and cluster name, so each writes its own
   * `parent-cluster-name`), beside the suite's two-cluster one, where c1 is the only source. The
   * copy that c3's pod names is the one c2's provider made for c2's own pod, under the name any
   * tenant can compute (`<name>-<10 hex of sha256("c2/<name>")>`); nothing is written by hand
   * in the target. Costs one sandbox start, as the topologies' tests do.
   */
  describe("a source's pod naming another source's copy (hub: c2 and c3 send to c1)", () => {
    let hub: Sandbox;
    let dir = '';
    const get = async (cluster: string, ...args: string[]) => JSON.parse(await hub.kubectl(cluster, 'get', ...args, '-o', 'json'));
    const pod = (name: string, configMap: string) =>
      `apiVersion: v1\nkind: Pod\nmetadata: {name: ${name}, namespace: default, annotations: {multicluster.admiralty.io/elect: ""}}\nspec:\n  terminationGracePeriodSeconds: 0\n  containers: [{name: c, image: busybox, envFrom: [{configMapRef: {name: ${configMap}}}]}]\n`;
    /** Delegates in c1 made by `source`'s provider. */
    const delegatesOf = async (source: string) => (await get('c1', 'pods', '-n', 'default', '-l', `${PARENT_CLUSTER_NAME_LABEL}=${source}`)).items;

    before(async function () {
      this.timeout(600_000);
      dir = mkdtempSync(join(tmpdir(), 'copy-conflict-sandbox-'));
      hub = new Sandbox(dir);
      await hub.up({ clusters: HUB_CLUSTERS.length, topology: 'hub', log: (l) => console.log(`      hub: ${l}`) });
    });
    after(async function () {
      this.timeout(120_000);
      await hub?.down();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it("refuses with a Warning CopyConflict, and makes no delegate in c1, for a pod of c3 whose envFrom names c2's copy of its ConfigMap (absent from c3); a name absent from both is delegated as it is", async () => {
      await hub.applyYaml('c2', `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: default}\ndata: {secret-of: c2}\n`);
      await hub.applyYaml('c2', pod('reader', 'cfg'));
      await waitFor("c2's delegate of reader in c1", 120_000, async () => (await delegatesOf('c2')).length === 1);
      const [readerDelegate] = await delegatesOf('c2');
      const copyName: string = readerDelegate.spec.containers[0].envFrom[0].configMapRef.name;
      expect(copyName).to.match(/^cfg-[0-9a-f]{10}$/);
      const copy = await get('c1', 'configmap', copyName, '-n', 'default');
      expect(copy.metadata.labels[PARENT_CLUSTER_NAME_LABEL], "the copy's source").to.equal('c2');
      expect(copy.data).to.deep.equal({ 'secret-of': 'c2' });

      // c3 has no ConfigMap of that name: its pod names c2's copy.
      expect(await hub.kubectl('c3', 'get', 'configmaps', '-n', 'default', '-o', 'name')).to.not.include(`configmap/${copyName}`);
      await hub.applyYaml('c3', pod('thief', copyName));
      const conflicts = async () => (await get('c3', 'events', '-n', 'default', '--field-selector', 'involvedObject.name=thief,reason=CopyConflict')).items;
      // Refused at least twice (the event's count grows): the scheduler's retry too.
      await waitFor('CopyConflict said twice on thief', 120_000, async () => (await conflicts()).some((e: any) => (e.count ?? 1) >= 2));
      const said = await conflicts();
      expect(said.map((e: any) => [e.type, e.message])).to.deep.equal([
        ['Warning', `configmap default/${copyName} does not exist here, and configmap default/${copyName} in default/c1 is a copy that belongs to another source: no delegate is made to read it`],
      ]);
      expect(await delegatesOf('c3'), "c3's delegates in c1").to.deep.equal([]);
      const thief = await get('c3', 'pod', 'thief', '-n', 'default');
      expect(thief.status.phase).to.equal('Pending');
      const delegated = thief.status.conditions?.find((c: any) => c.type === DELEGATED_CONDITION);
      expect(delegated, `the ${DELEGATED_CONDITION} condition`).to.include({ status: 'False', reason: 'CopyConflict' });

      // The control: a name that is nobody's copy and absent from c3 is named as it is
      // (CopySourceMissing), and the delegate is made. So the refusal above is for the copy.
      const nobodys = 'cfg-0000000000';
      await hub.applyYaml('c3', pod('waiter', nobodys));
      await waitFor("c3's delegate of waiter in c1", 120_000, async () => (await delegatesOf('c3')).length === 1);
      const [waiterDelegate] = await delegatesOf('c3');
      expect(waiterDelegate.spec.containers[0].envFrom[0].configMapRef.name).to.equal(nobodys);
      const missing = (await get('c3', 'events', '-n', 'default', '--field-selector', 'involvedObject.name=waiter,reason=CopySourceMissing')).items;
      expect(missing.map((e: any) => e.type)).to.deep.equal(['Normal']);
      // Still no delegate of thief, and c2's copy as c2 wrote it.
      expect((await delegatesOf('c3')).map((d: any) => d.metadata.labels[PARENT_UID_LABEL])).to.deep.equal([(await get('c3', 'pod', 'waiter', '-n', 'default')).metadata.uid]);
      expect((await get('c1', 'configmap', copyName, '-n', 'default')).data).to.deep.equal({ 'secret-of': 'c2' });

      // The providers needed no right beyond the shipped ones for any of it.
      const refused = hub.auditedUsers().flatMap((user) => HUB_CLUSTERS.flatMap((c) => (hub.forbiddenRequests(c, user) ?? []).map((r) => `${user} in ${c}: ${r}`)));
      expect(refused).to.deep.equal([]);
    });
  });
});
