import { expect } from 'chai';
import { parse } from 'yaml';
import { admiraltyName } from '../../provider/model/names.js';
import { SOURCE_USER } from '../sandbox/sandbox.js';
import { apply, getJson, kubectl, kubectlStdin, readyOf, uniqueName, waitFor } from './support.js';

/**
 * Switching from Admiralty 0.17 (README, "Migrating from Admiralty"): objects written for it are
 * picked up as they are, and the bindings its source controller leaves behind are replaced by
 * ours only when they are recognizably its own. The objects below are shaped exactly as Admiralty
 * 0.17's CRDs and source controller (`pkg/controllers/source`) make them.
 */
describe('migrating from Admiralty 0.17', function () {
  this.timeout(180_000);

  it('picks up Targets, ClusterTargets, Sources and ClusterSources written for Admiralty, every field of its schema kept and used', async () => {
    const ns = uniqueName('mig');
    const ct = uniqueName('mig');
    await kubectl('c1', 'create', 'namespace', ns);
    await kubectl('c2', 'create', 'namespace', ns);
    try {
      // In c2, as written for Admiralty: a Source (by user name) and a ClusterSource (by
      // ServiceAccount, the same identity as in the other tests: c1's exported one).
      const [saNamespace, saName] = SOURCE_USER.split(':').slice(2) as [string, string];
      const clusterSource = { serviceAccount: { name: saName, namespace: saNamespace } };
      await apply('c2', JSON.stringify({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'Source', metadata: { name: 'c1', namespace: ns }, spec: { userName: SOURCE_USER } }));
      await apply('c2', JSON.stringify({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'ClusterSource', metadata: { name: ct }, spec: clusterSource }));
      const canList = async (...scope: string[]) => (await kubectl('c2', 'auth', 'can-i', 'list', 'pods', ...scope, '--as', SOURCE_USER).catch(() => 'no')).trim() === 'yes';
      await waitFor('the Source and the ClusterSource bound', 30_000, async () => (await canList('-n', ns)) && (await canList('--all-namespaces')));
      expect((await getJson('c2', 'clustersource', ct)).spec).to.deep.equal(clusterSource, 'nothing pruned');

      // In c1, Admiralty 0.17's Target and ClusterTarget schemas, every field set.
      const secret = await getJson('c1', 'secret', 'c2', '-n', 'default');
      const context: string = parse(Buffer.from(secret.data.config, 'base64').toString())['current-context'];
      await apply('c1', JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'c2', namespace: ns }, data: secret.data }));
      const target = { kubeconfigSecret: { name: 'c2', key: 'config', context }, excludedLabelsRegexp: '^topology\\.kubernetes\\.io/region=' };
      const clusterTarget = { self: false, kubeconfigSecret: { namespace: ns, name: 'c2', key: 'config', context }, excludedLabelsRegexp: '^topology\\.kubernetes\\.io/region=' };
      await apply('c1', JSON.stringify({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'Target', metadata: { name: 'c2', namespace: ns }, spec: target }));
      await apply('c1', JSON.stringify({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'ClusterTarget', metadata: { name: ct }, spec: clusterTarget }));
      await waitFor('both Ready', 60_000, async () => readyOf(await getJson('c1', 'target', 'c2', '-n', ns)) === 'True' && readyOf(await getJson('c1', 'clustertarget', ct)) === 'True');
      const [t, c] = [await getJson('c1', 'target', 'c2', '-n', ns), await getJson('c1', 'clustertarget', ct)];
      const { placement: p1, ...tSpec } = t.spec;
      const { placement: p2, ...cSpec } = c.spec;
      expect(tSpec).to.deep.equal(target, 'nothing pruned');
      expect(cSpec).to.deep.equal(clusterTarget, 'nothing pruned');
      expect([p1, p2]).to.deep.equal(
        [
          { weight: 1, priority: 0 },
          { weight: 1, priority: 0 },
        ],
        'our own field, defaulted',
      );
      // c2's nodes share region=eu (the default Target's virtual node shows it); excluded here.
      for (const node of [t.status.virtualNodeName, c.status.virtualNodeName]) {
        expect((await getJson('c1', 'node', node)).metadata.labels).to.not.have.property('topology.kubernetes.io/region');
      }
    } finally {
      // Source side first: the targets go before c2 takes the sources' rights away.
      await kubectl('c1', 'delete', 'clustertarget', ct, '--ignore-not-found', '--wait=true', '--timeout=60s');
      await kubectl('c1', 'delete', 'namespace', ns, '--wait=true', '--timeout=60s');
      await waitFor('their nodes gone', 60_000, async () => !/admiralty-(namespace-mig|cluster-mig)/.test(await kubectl('c1', 'get', 'nodes', '-o', 'name')));
      await kubectl('c2', 'delete', 'clustersource', ct, '--ignore-not-found');
      await kubectl('c2', 'delete', 'namespace', ns, '--wait=false');
    }
  });

  it('refuses a field outside the schema when it is written, naming it, rather than dropping it unsaid', async () => {
    const yaml = 'apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Target\nmetadata: {name: typo, namespace: default}\nspec: {self: true, kubeconfigSecrets: {name: c2}}\n';
    // kubectl's default (--validate=strict, server-side field validation): refused.
    const strict = await kubectlStdin('c1', yaml, 'apply', '--dry-run=server', '-f', '-');
    expect(strict.code).to.not.equal(0);
    expect(strict.stderr).to.include('unknown field "spec.kubeconfigSecrets"');
    // Clients that only warn (client-go's default): the warning names it, and it is not stored.
    const warn = await kubectlStdin('c1', yaml, 'apply', '--dry-run=server', '--validate=warn', '-o', 'json', '-f', '-');
    expect(warn.code).to.equal(0);
    expect(warn.stderr).to.include('unknown field "spec.kubeconfigSecrets"');
    expect(JSON.parse(warn.stdout).spec).to.not.have.property('kubeconfigSecrets');
  });

  it("replaces the bindings Admiralty's source controller left for a Source, and refuses a lookalike owned by another Source", async () => {
    const ns = uniqueName('mig');
    const rb = admiraltyName([{ value: 'admiralty-source', kind: 'constant' }, { value: 'c1' }]);
    const crb = admiraltyName([{ value: 'admiralty-source', kind: 'constant' }, { value: ns }, { value: 'c1' }, { value: 'cluster-summary-viewer', kind: 'constant' }]);
    await kubectl('c2', 'create', 'namespace', ns);
    try {
      // As Admiralty made them (no labels or annotations, a controller reference, its chart's
      // roles, a User subject without apiGroup), but owned by another Source: not to be taken.
      // (A real one: the garbage collector deletes the RoleBinding of an owner that does not exist.)
      await apply('c2', `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Source\nmetadata: {name: c1-earlier, namespace: ${ns}}\nspec: {userName: someone-else}\n`);
      const owner = async (name: string) => [
        { apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'Source', name, uid: (await getJson('c2', 'source', name, '-n', ns)).metadata.uid, controller: true, blockOwnerDeletion: true },
      ];
      const subjects = [{ kind: 'User', name: SOURCE_USER }];
      const create = async (obj: unknown) => {
        const r = await kubectlStdin('c2', JSON.stringify(obj), 'create', '-f', '-');
        expect(r.code, r.stderr).to.equal(0);
      };
      await create({
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: rb, namespace: ns, ownerReferences: await owner('c1-earlier') },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admiralty-source' },
        subjects,
      });
      await create({
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: crb, ownerReferences: await owner('c1-earlier') },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admiralty-cluster-summary-viewer' },
        subjects,
      });
      const before = await getJson('c2', 'clusterrolebinding', crb);

      // The Source as written for Admiralty 0.17.
      await apply('c2', `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Source\nmetadata: {name: c1, namespace: ${ns}}\nspec: {userName: "${SOURCE_USER}"}\n`);
      const events = async (reason: string) => (await getJson('c2', 'events', '-n', ns, '--field-selector', `involvedObject.kind=Source,involvedObject.name=c1,reason=${reason}`)).items;
      await waitFor('a BindingConflict event', 30_000, async () => (await events('BindingConflict')).length > 0);
      expect((await events('BindingConflict'))[0].message).to.match(/exists and is neither ours nor the one Admiralty made for this Source: its owner is not this Source/);
      const after = await getJson('c2', 'clusterrolebinding', crb);
      expect([after.metadata.uid, after.roleRef.name]).to.deep.equal([before.metadata.uid, 'admiralty-cluster-summary-viewer'], 'left alone');
      expect((await kubectl('c2', 'auth', 'can-i', 'list', 'pods', '-n', ns, '--as', SOURCE_USER).catch(() => 'no')).trim()).to.equal('no');

      // Now exactly Admiralty's for this Source: owned by it (metadata is mutable, roleRef is not).
      const patch = JSON.stringify({ metadata: { ownerReferences: await owner('c1') } });
      await kubectl('c2', 'patch', 'rolebinding', rb, '-n', ns, '--type=merge', '-p', patch);
      await kubectl('c2', 'patch', 'clusterrolebinding', crb, '--type=merge', '-p', patch);
      await waitFor('the Source role bound', 60_000, async () => (await kubectl('c2', 'auth', 'can-i', 'list', 'pods', '-n', ns, '--as', SOURCE_USER).catch(() => 'no')).trim() === 'yes');
      await waitFor('ours in place of both', 30_000, async () => {
        const [r, c] = [await getJson('c2', 'rolebinding', rb, '-n', ns), await getJson('c2', 'clusterrolebinding', crb)];
        return r.roleRef.name === 'multicluster-scheduler-source' && c.roleRef.name === 'multicluster-scheduler-cluster-summary-viewer';
      });
      const ours = await getJson('c2', 'clusterrolebinding', crb);
      expect(ours.metadata.labels).to.deep.include({ 'multicluster.admiralty.io/source-name': 'c1', 'multicluster.admiralty.io/source-namespace': ns });
      expect(ours.metadata.ownerReferences, 'no namespaced owner: we delete it ourselves').to.equal(undefined);
      expect((await events('AdoptedAdmiraltyBinding')).map((e: any) => e.message).sort()).to.deep.equal([
        `replacing ClusterRoleBinding ${crb}, left by Admiralty for this Source, with ours`,
        `replacing RoleBinding ${ns}/${rb}, left by Admiralty for this Source, with ours`,
      ]);

      // Unlike Admiralty's, ours goes with the Source.
      await kubectl('c2', 'delete', 'source', 'c1', '-n', ns);
      await waitFor('the ClusterRoleBinding gone', 30_000, async () => !(await kubectl('c2', 'get', 'clusterrolebinding', '-o', 'name')).includes(`/${crb}\n`));
    } finally {
      await kubectl('c2', 'delete', 'sources', '--all', '-n', ns);
      await kubectl('c2', 'delete', 'clusterrolebinding', crb, '--ignore-not-found');
      await kubectl('c2', 'delete', 'namespace', ns, '--wait=false');
    }
  });
});
