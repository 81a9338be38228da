import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox } from '../sandbox/sandbox.js';
import type { Topology } from '../sandbox/topology.js';
import { electedDeployment, sandbox as suiteSandbox, waitFor } from './support.js';

const CLUSTERS = ['c1', 'c2', 'c3'];
const PARENT_UID = 'multicluster.admiralty.io/parent-uid';
const PARENT_CLUSTER = 'multicluster.admiralty.io/parent-cluster-name';
const MANIFEST = 'multicluster.admiralty.io/sourcepod-manifest';

/**
 * Starts a 3-cluster sandbox of `topology` of its own, beside the suite's (another folder, so
 * other ports), for the `describe` block it is called in, and stops it at the end.
 */
function ownSandbox(topology: Topology): { sb: () => Sandbox } {
  let sb: Sandbox;
  let dir: string;
  before(async function () {
    this.timeout(600_000);
    dir = mkdtempSync(join(tmpdir(), `${topology}-sandbox-`));
    sb = new Sandbox(dir);
    await sb.up({ clusters: CLUSTERS.length, topology, log: (l) => console.log(`      ${topology}: ${l}`) });
  });
  after(async function () {
    this.timeout(120_000);
    await sb?.down();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  return { sb: () => sb };
}

async function pods(sb: Sandbox, cluster: string, selector: string): Promise<any[]> {
  return JSON.parse(await sb.kubectl(cluster, 'get', 'pods', '-n', 'default', '-l', selector, '-o', 'json')).items;
}

/** Every pod of namespace default in every cluster, with its cluster. */
async function allPods(sb: Sandbox): Promise<{ cluster: string; pod: any }[]> {
  const per = await Promise.all(CLUSTERS.map(async (cluster) => (await pods(sb, cluster, '')).map((pod) => ({ cluster, pod }))));
  return per.flat();
}

/** Spread over the virtual nodes by target name, one replica each: the stock proxy scheduler makes it exact. */
const ONE_PER_TARGET = (app: string) => ({
  'multicluster.admiralty.io/proxy-pod-scheduling-constraints': JSON.stringify({
    topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'multicluster.admiralty.io/target-name', whenUnsatisfiable: 'DoNotSchedule', labelSelector: { matchLabels: { app } } }],
  }),
});

/** The refusals (403) of any audited identity in any cluster of `sb`: the shipped RBAC must be enough in every topology. */
function refusals(sb: Sandbox): string[] {
  return sb.auditedUsers().flatMap((user) => CLUSTERS.flatMap((c) => (sb.forbiddenRequests(c, user) ?? []).map((r) => `${user} in ${c}: ${r}`)));
}

describe('federation topologies', function () {
  describe('mesh of 3 clusters (every cluster a source and a target of every cluster)', () => {
    const { sb } = ownSandbox('mesh');

    it('spreads an elected Deployment of each cluster over all three; one delegate per proxy, no delegate a proxy; deletion leaves nothing', async function () {
      this.timeout(300_000);
      const s = sb();
      for (const c of CLUSTERS) await s.applyYaml(c, electedDeployment(`spread-${c}`, 'default', 3, '100m', { annotations: ONE_PER_TARGET(`spread-${c}`) }));
      for (const c of CLUSTERS) {
        await waitFor(`3 proxies of spread-${c} Running in ${c}`, 120_000, async () => (await pods(s, c, `app=spread-${c}`)).filter((p) => p.status.phase === 'Running').length === 3);
        const proxies = await pods(s, c, `app=spread-${c}`);
        expect(proxies.map((p) => p.spec.nodeName).sort(), `${c}'s proxies`).to.deep.equal(CLUSTERS.map((t) => `admiralty-namespace-default-${t}`));
      }
      const everything = await allPods(s);
      const proxies = everything.filter(({ pod }) => pod.metadata.annotations?.[MANIFEST] !== undefined);
      const delegates = everything.filter(({ pod }) => pod.metadata.labels?.[PARENT_UID] !== undefined);
      expect(proxies).to.have.length(9);
      expect(delegates).to.have.length(9);
      for (const { cluster, pod } of proxies) {
        const mine = delegates.filter((d) => d.pod.metadata.labels[PARENT_UID] === pod.metadata.uid);
        expect(mine, `delegates of ${cluster}'s ${pod.metadata.name}`).to.have.length(1);
        expect(mine[0]!.cluster).to.equal(pod.spec.nodeName.replace('admiralty-namespace-default-', ''));
        expect(mine[0]!.pod.metadata.labels[PARENT_CLUSTER]).to.equal(cluster);
      }
      for (const { cluster, pod } of delegates) {
        expect(pod.metadata.annotations ?? {}, `${cluster}'s delegate ${pod.metadata.name}`).to.not.have.any.keys('multicluster.admiralty.io/elect', MANIFEST);
        expect(pod.spec.nodeName, `${cluster}'s delegate ${pod.metadata.name}`).to.match(new RegExp(`^${cluster}-node-`));
      }

      for (const c of CLUSTERS) await s.kubectl(c, 'delete', 'deployment', `spread-${c}`, '-n', 'default', '--wait=false');
      await waitFor('no pod left in any cluster', 120_000, async () => (await allPods(s)).length === 0);
      expect(refusals(s)).to.deep.equal([]);
    });
  });

  describe('hub of 3 clusters (c2 and c3 send to c1)', () => {
    const { sb } = ownSandbox('hub');

    it('runs Deployments of the same name and namespace from c2 and c3 in c1 with separate delegates and separate copies of their same-name ConfigMaps; deleting one leaves the other', async function () {
      this.timeout(300_000);
      const s = sb();
      const sources = ['c2', 'c3'] as const;
      for (const c of sources) {
        await s.applyYaml(c, `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: default}\ndata: {from: ${c}}\n`);
        await s.applyYaml(c, electedDeployment('web', 'default', 2, '100m', { spec: { containers: [{ name: 'c', image: 'busybox', envFrom: [{ configMapRef: { name: 'cfg' } }] }] } }));
      }
      const delegatesOf = async (source: string) => (await pods(s, 'c1', `${PARENT_CLUSTER}=${source}`)).filter((p) => !p.metadata.deletionTimestamp);
      for (const c of sources) {
        await waitFor(`2 delegates of ${c} Running in c1`, 120_000, async () => (await delegatesOf(c)).filter((p) => p.status.phase === 'Running').length === 2);
        await waitFor(`2 proxies of web Running in ${c}`, 60_000, async () => (await pods(s, c, 'app=web')).filter((p) => p.status.phase === 'Running').length === 2);
      }
      const delegates = { c2: await delegatesOf('c2'), c3: await delegatesOf('c3') };
      const names = [...delegates.c2, ...delegates.c3].map((p) => p.metadata.name);
      expect(new Set(names).size, names.join(', ')).to.equal(4);
      // Each source sees its own delegates only: their parents are its own proxies.
      for (const source of sources) {
        const uids = (await pods(s, source, 'app=web')).map((p) => p.metadata.uid).sort();
        expect(delegates[source].map((d) => d.metadata.labels[PARENT_UID]).sort(), source).to.deep.equal(uids);
      }
      // Each source's delegates read its own copy of cfg, made from its own data (README, Topologies).
      const copyNames: Record<string, string> = {};
      for (const source of sources) {
        const named = new Set(delegates[source].map((d) => d.spec.containers[0].envFrom[0].configMapRef.name));
        expect(named.size, `${source}'s delegates name one copy`).to.equal(1);
        copyNames[source] = [...named][0];
        expect(copyNames[source]).to.match(/^cfg-[0-9a-f]{10}$/);
        const copy = JSON.parse(await s.kubectl('c1', 'get', 'configmap', copyNames[source]!, '-n', 'default', '-o', 'json'));
        expect(copy.data, `${source}'s copy`).to.deep.equal({ from: source });
        expect(copy.metadata.labels[PARENT_CLUSTER]).to.equal(source);
      }
      expect(copyNames.c2).to.not.equal(copyNames.c3);
      for (const source of sources) {
        const conflicts = JSON.parse(await s.kubectl(source, 'get', 'events', '-n', 'default', '--field-selector', 'reason=CopyConflict', '-o', 'json')).items;
        expect(conflicts, `CopyConflict events in ${source}`).to.deep.equal([]);
      }
      const configMapsInC1 = async () => (await s.kubectl('c1', 'get', 'configmaps', '-n', 'default', '-o', 'name')).split('\n');

      await s.kubectl('c3', 'delete', 'deployment', 'web', '-n', 'default', '--wait=false');
      await waitFor("c3's delegates gone from c1", 120_000, async () => (await pods(s, 'c1', `${PARENT_CLUSTER}=c3`)).length === 0);
      await waitFor("c3's copy gone from c1", 60_000, async () => !(await configMapsInC1()).includes(`configmap/${copyNames.c3}`));
      const left = await delegatesOf('c2');
      expect(left.map((p) => `${p.metadata.name} ${p.status.phase}`).sort()).to.deep.equal(delegates.c2.map((p) => `${p.metadata.name} Running`).sort());
      const kept = JSON.parse(await s.kubectl('c1', 'get', 'configmap', copyNames.c2!, '-n', 'default', '-o', 'json'));
      expect(kept.data).to.deep.equal({ from: 'c2' });
      expect(kept.metadata.labels[PARENT_CLUSTER]).to.equal('c2');

      await s.kubectl('c2', 'delete', 'deployment', 'web', '-n', 'default', '--wait=false');
      await waitFor('no pod left in any cluster', 120_000, async () => (await allPods(s)).length === 0);
      await waitFor("c2's copy gone from c1", 60_000, async () => !(await configMapsInC1()).includes(`configmap/${copyNames.c2}`));
      for (const c of sources) await s.kubectl(c, 'delete', 'configmap', 'cfg', '-n', 'default');
      expect(refusals(s)).to.deep.equal([]);
    });
  });

  it("leaves the suite's sandbox alone", () => {
    expect(suiteSandbox.isUp()).to.equal(true);
  });
});
