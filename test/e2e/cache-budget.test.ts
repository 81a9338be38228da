import { CoreV1Api, CustomObjectsApi, type KubernetesListObject, type KubernetesObject, type V1ConfigMap } from '@kubernetes/client-node';
import { expect } from 'chai';
import { apiCallsOverHttp2 } from '../../provider/clusters/api-http2.js';
import { reuseConnections } from '../../provider/clusters/connection-reuse.js';
import { Informer, type ListQuery } from '../../provider/controller/informer.js';
import { realClock } from '../../provider/core/clock.js';
import { silentLogger } from '../../provider/core/logger.js';
import { PARENT_CLUSTER_NAME_LABEL } from '../../provider/core/keys.js';
import { apply, authorizeSource, connectNamespace, disconnectNamespace, getJson, kubeConfigFor, kubectl, kubectlStdin, readyOf, sandbox, uniqueName, waitFor } from './support.js';

/** A KubeConfig of c2 whose API calls go as the provider's do (kept-alive agents, HTTP/2). */
function providerLikeKubeConfig() {
  const kc = kubeConfigFor('c2');
  reuseConnections(kc);
  apiCallsOverHttp2(kc);
  return kc;
}

/** An informer of the provider's, over c2, that records the pages it asks for. */
async function listedInPages<T extends KubernetesObject>(path: string, pageSize: number, list: (q: ListQuery) => Promise<KubernetesListObject<T>>) {
  const pages: ListQuery[] = [];
  const informer = new Informer<T>({
    name: 'paging',
    cluster: 'c2',
    kubeConfig: providerLikeKubeConfig(),
    path,
    pageSize,
    list: (q) => {
      pages.push(q);
      return list(q);
    },
    logger: silentLogger(),
    clock: realClock,
  });
  informer.start();
  try {
    await waitFor(`the informer of ${path} synced`, 30_000, async () => informer.hasSynced());
    return { pages, names: informer.list().map((o) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name}`) };
  } finally {
    informer.stop();
  }
}

describe('Lists in pages, and the cache budget of a target', function () {
  this.timeout(300_000);

  it("lists c2's objects in pages as its apiserver cuts them, typed and custom alike", async () => {
    const ns = uniqueName('pages');
    await kubectl('c2', 'create', 'namespace', ns);
    try {
      for (let i = 0; i < 5; i++) await kubectl('c2', 'create', 'configmap', `cm-${i}`, '-n', ns, '--from-literal=k=v');
      const core = providerLikeKubeConfig().makeApiClient(CoreV1Api);
      const typed = await listedInPages<V1ConfigMap>(`/api/v1/namespaces/${ns}/configmaps`, 2, (q) => core.listNamespacedConfigMap({ namespace: ns, ...q }));
      // kube-root-ca.crt and the five.
      expect(typed.names.sort()).to.deep.equal([`${ns}/cm-0`, `${ns}/cm-1`, `${ns}/cm-2`, `${ns}/cm-3`, `${ns}/cm-4`, `${ns}/kube-root-ca.crt`]);
      expect(typed.pages.map((p) => p.limit)).to.deep.equal([2, 2, 2]);
      expect(typed.pages[0]!._continue).to.equal(undefined);
      expect(typed.pages[1]!._continue).to.be.a('string').and.not.equal('');

      // Lists of custom objects are plain JSON: the token is `metadata.continue` there. A Source
      // of this namespace's makes at least two in c2.
      await authorizeSource(ns);
      const custom = providerLikeKubeConfig().makeApiClient(CustomObjectsApi);
      const listed = await listedInPages<KubernetesObject>(
        '/apis/multicluster.admiralty.io/v1alpha1/sources',
        1,
        (q) => custom.listClusterCustomObject({ group: 'multicluster.admiralty.io', version: 'v1alpha1', plural: 'sources', ...q }) as Promise<KubernetesListObject<KubernetesObject>>,
      );
      // Other tests' namespaces (and their Sources) come and go meanwhile: these two stay.
      expect(listed.names).to.include.members(['default/c1', `${ns}/c1`]);
      expect(listed.pages.length, 'one Source a page').to.be.at.least(listed.names.length);
      expect(listed.pages[1]!._continue).to.be.a('string').and.not.equal('');
    } finally {
      await kubectl('c2', 'delete', 'namespace', ns, '--wait=false');
    }
  });

  it('takes a namespaced Target whose cluster holds more of our objects than the budget out of placement, CacheBudgetExceeded, and back once they are gone', async () => {
    const ns = uniqueName('budget');
    const { c2Node } = await connectNamespace(ns);
    // Each Target has a budget of its own: how many a namespace may have is a ResourceQuota's
    // to say (what the README advises), here the two it has.
    await apply('c1', `apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: targets, namespace: ${ns}}\nspec: {hard: {count/targets.multicluster.admiralty.io: "2"}}\n`);
    await waitFor('the quota counting the Targets', 30_000, async () => (await getJson('c1', 'resourcequota', 'targets', '-n', ns)).status?.used?.['count/targets.multicluster.admiralty.io'] === '2');
    const third = await kubectlStdin('c1', `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Target\nmetadata: {name: c3, namespace: ${ns}}\nspec: {self: true}\n`, 'create', '-f', '-');
    expect(third.code).to.not.equal(0);
    expect(third.stderr).to.match(/exceeded quota: targets/);
    // The provider as shipped, but for a budget of 1 MiB (what one object can pass: etcd keeps up to 1.5 MiB).
    await sandbox.stop('c1', 'provider');
    await sandbox.start('c1', 'provider', { extraArgs: ['--target-cache-budget-mib=1'] });
    try {
      const target = () => getJson('c1', 'target', 'c2', '-n', ns);
      await waitFor(`Target ${ns}/c2 Ready with the small budget`, 60_000, async () => readyOf(await target()) === 'True');

      // The target's server names two "copies" of ours of 600 kB each: whoever can write in the
      // Target's namespace there (its tenant) can, and the label is all it takes. The first fits.
      for (const name of ['forged-1', 'forged-2']) {
        const forged = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: ns, labels: { [PARENT_CLUSTER_NAME_LABEL]: 'c1' } }, data: { big: 'x'.repeat(600_000) } };
        const created = await kubectlStdin('c2', JSON.stringify(forged), 'create', '-f', '-');
        expect(created.code, created.stderr).to.equal(0);
      }

      let condition: any;
      await waitFor(`Target ${ns}/c2 not Ready for its cache budget`, 60_000, async () => {
        condition = (await target()).status?.conditions?.find((c: any) => c.type === 'Ready');
        return condition?.reason === 'CacheBudgetExceeded';
      });
      expect(condition.status).to.equal('False');
      // Refused as the watch sent it, then by each list after the informer's backoff.
      expect(condition.message).to.match(
        /cache budget of 1 MiB \(--target-cache-budget-mib\), (at .*\/forged-[12]|listing \/api\/v1\/namespaces\/[^/]+\/configmaps .*); informer configmap-copies stopped taking them$/,
      );
      const node = await getJson('c1', 'node', c2Node);
      expect(node.status.conditions.find((c: any) => c.type === 'Ready')).to.deep.include({ status: 'False', reason: 'CacheBudgetExceeded' });
      // The other Target of the namespace (its own cluster) has a budget of its own.
      expect(readyOf(await getJson('c1', 'target', 'c1', '-n', ns))).to.equal('True');
      // What the target's caches hold, on /metrics (every 15 s): the first copy, within the budget.
      const held = async () => {
        const text = await (await fetch(`http://127.0.0.1:${sandbox.ports('c1').metrics}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
        const line = text.split('\n').find((l) => l.startsWith(`admiralty_target_cache_bytes{target="${ns}/c2"} `));
        return line === undefined ? undefined : Number(line.split(' ')[1]);
      };
      await waitFor(`admiralty_target_cache_bytes of ${ns}/c2 counting the first copy`, 30_000, async () => ((await held()) ?? 0) > 600_000);
      expect(await held()).to.be.at.most(2 ** 20);

      await kubectl('c2', 'delete', 'configmap', 'forged-1', 'forged-2', '-n', ns);
      // A list after the informer's backoff (at most 30 s) fits again, and the next probe says so.
      await waitFor(`Target ${ns}/c2 Ready again`, 90_000, async () => readyOf(await target()) === 'True');
    } finally {
      await sandbox.stop('c1', 'provider');
      await sandbox.start('c1', 'provider');
      await disconnectNamespace(ns);
    }
  });
});
