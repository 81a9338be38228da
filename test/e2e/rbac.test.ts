import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { PROVIDER_USER, REPO_ROOT } from '../sandbox/sandbox.js';
import { apply, getJson, kubectl, readyOf, sandbox, uniqueName, waitFor } from './support.js';

type Attributes = { verb: string; resource: string; group?: string; subresource?: string; namespace?: string; name?: string };

/** Whether the provider of `cluster`, with its own credentials, may do something (SelfSubjectAccessReview). */
function providerMay(cluster: string, a: Attributes): Promise<boolean> {
  const body = JSON.stringify({ apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: { resourceAttributes: a } });
  return new Promise((res, rej) => {
    const child = execFile(sandbox.kubectlPath, ['--kubeconfig', join(sandbox.dir, cluster, 'provider.kubeconfig'), 'create', '--validate=false', '-f', '-', '-o', 'json'], (err, stdout, stderr) =>
      err ? rej(new Error(`SelfSubjectAccessReview failed: ${stderr || err.message}`)) : res(JSON.parse(stdout).status?.allowed === true),
    );
    child.stdin!.end(body);
  });
}

const describeAttrs = (a: Attributes) =>
  `${a.verb} ${a.group ? `${a.group}/` : ''}${a.resource}${a.subresource ? `/${a.subresource}` : ''}${a.name ? ` ${a.name}` : ''} in ${a.namespace || 'all namespaces'}`;

interface Binding {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  roleRef: { kind: string; name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
}

describe('least privilege of the provider (exactly the shipped RBAC)', function () {
  this.timeout(120_000);
  const [saNamespace, saName] = PROVIDER_USER.split(':').slice(2);

  it('binds nothing to the provider but what manifests/rbac ships (and its own self-target bindings)', async () => {
    const shipped = parseAllDocuments(await kubectl('c1', 'kustomize', join(REPO_ROOT, 'manifests', 'rbac')))
      .map((d) => d.toJSON() as Binding)
      .filter((o) => o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding')
      .map((b) => `${b.kind} ${b.metadata.namespace ?? ''}/${b.metadata.name}`);
    expect(shipped).to.have.length.greaterThan(0);
    for (const cluster of ['c1', 'c2']) {
      const all = [
        ...(await getJson<{ items: Binding[] }>(cluster, 'clusterrolebindings')).items.map((b) => ({ ...b, kind: 'ClusterRoleBinding' })),
        ...(await getJson<{ items: Binding[] }>(cluster, 'rolebindings', '-A')).items.map((b) => ({ ...b, kind: 'RoleBinding' })),
      ];
      const toProvider = all.filter((b) => (b.subjects ?? []).some((s) => s.kind === 'ServiceAccount' && s.name === saName && s.namespace === saNamespace));
      const found = toProvider.map((b) => `${b.kind} ${b.metadata.namespace ?? ''}/${b.metadata.name}`);
      expect(found.filter((f) => shipped.includes(f)).sort(), `${cluster}: every shipped binding is installed`).to.deep.equal([...shipped].sort());
      for (const b of toProvider.filter((x) => !shipped.includes(`${x.kind} ${x.metadata.namespace ?? ''}/${x.metadata.name}`))) {
        // Only the provider's own binding of the source role for a self target, labelled as such.
        expect(b.roleRef, `${cluster}: unexpected ${b.kind} ${b.metadata.name}`).to.deep.include({ kind: 'ClusterRole', name: 'multicluster-scheduler-source' });
        expect(b.metadata.name).to.match(/^admiralty-self-(cluster-)?target-/);
      }
      // Nor through a group: no binding to all service accounts (of its namespace), but the
      // apiserver's own defaults (same-name system: role and binding, e.g. issuer discovery).
      const isDefault = (b: Binding) => b.metadata.name.startsWith('system:') && b.roleRef.name === b.metadata.name;
      const groups = all.filter(
        (b) => !isDefault(b) && (b.subjects ?? []).some((s) => s.kind === 'Group' && (s.name === 'system:serviceaccounts' || s.name === `system:serviceaccounts:${saNamespace}`)),
      );
      expect(
        groups.map((b) => b.metadata.name),
        `${cluster}: bindings to service-account groups`,
      ).to.deep.equal([]);
    }
  });

  it('refuses the provider what it never needs, and grants what it does', async () => {
    const ns = uniqueName('rbac-plain');
    await kubectl('c1', 'create', 'namespace', ns);
    try {
      const refused: Attributes[] = [
        // Secrets are read by name only (README, Permissions: get cannot be narrowed further).
        { verb: 'list', resource: 'secrets', namespace: 'kube-system' },
        { verb: 'list', resource: 'secrets' },
        { verb: 'watch', resource: 'secrets' },
        { verb: 'list', resource: 'configmaps' },
        { verb: 'create', resource: 'secrets', namespace: ns },
        { verb: 'update', resource: 'secrets', namespace: ns },
        { verb: 'create', resource: 'pods', namespace: ns },
        { verb: 'create', resource: 'pods', subresource: 'exec', namespace: ns },
        { verb: 'get', resource: 'pods', subresource: 'exec', namespace: ns },
        { verb: 'create', resource: 'pods', subresource: 'attach', namespace: ns },
        { verb: 'get', resource: 'pods', subresource: 'log', namespace: ns },
        { verb: 'create', resource: 'serviceaccounts', subresource: 'token', namespace: 'kube-system', name: 'default' },
        { verb: 'update', resource: 'nodes' },
        { verb: 'get', resource: 'nodes', subresource: 'proxy' },
        { verb: 'approve', group: 'certificates.k8s.io', resource: 'signers', name: 'kubernetes.io/kube-apiserver-client' },
        { verb: 'approve', group: 'certificates.k8s.io', resource: 'signers', name: 'kubernetes.io/kube-apiserver-client-kubelet' },
        { verb: 'list', group: 'certificates.k8s.io', resource: 'certificatesigningrequests' },
        { verb: 'bind', group: 'rbac.authorization.k8s.io', resource: 'clusterroles', name: 'cluster-admin' },
        { verb: 'escalate', group: 'rbac.authorization.k8s.io', resource: 'clusterroles', name: 'multicluster-scheduler-source' },
        { verb: 'create', group: 'rbac.authorization.k8s.io', resource: 'clusterroles' },
        { verb: 'impersonate', resource: 'users' },
        { verb: 'impersonate', resource: 'serviceaccounts' },
        { verb: 'delete', resource: 'namespaces' },
        { verb: 'patch', group: 'admissionregistration.k8s.io', resource: 'mutatingwebhookconfigurations', name: 'someone-else' },
        { verb: 'patch', group: 'admissionregistration.k8s.io', resource: 'validatingwebhookconfigurations', name: 'admiralty' },
        { verb: 'update', resource: 'pods', namespace: ns },
        { verb: 'update', resource: 'services', subresource: 'status', namespace: ns },
        { verb: 'update', group: 'multicluster.admiralty.io', resource: 'sources', subresource: 'status', namespace: ns },
      ];
      const granted: Attributes[] = [
        { verb: 'patch', resource: 'nodes', subresource: 'status' },
        { verb: 'patch', resource: 'pods', subresource: 'status', namespace: ns },
        { verb: 'get', resource: 'secrets', namespace: ns },
        { verb: 'create', resource: 'secrets', namespace: 'admiralty' },
        { verb: 'update', group: 'coordination.k8s.io', resource: 'leases', namespace: 'kube-node-lease' },
        { verb: 'approve', group: 'certificates.k8s.io', resource: 'signers', name: 'kubernetes.io/kubelet-serving' },
        { verb: 'bind', group: 'rbac.authorization.k8s.io', resource: 'clusterroles', name: 'multicluster-scheduler-source' },
      ];
      const wrong: string[] = [];
      for (const a of refused) if (await providerMay('c1', a)) wrong.push(`may ${describeAttrs(a)}`);
      for (const a of granted) if (!(await providerMay('c1', a))) wrong.push(`may not ${describeAttrs(a)}`);
      // In a target-only cluster too (same manifests): no source rights on its own.
      for (const a of refused.slice(0, 10)) if (await providerMay('c2', { ...a, namespace: a.namespace === ns ? 'default' : a.namespace })) wrong.push(`c2: may ${describeAttrs(a)}`);
      expect(wrong).to.deep.equal([]);
    } finally {
      await kubectl('c1', 'delete', 'namespace', ns, '--wait=false');
    }
  });

  it('gets the source role everywhere only while a self ClusterTarget exists', async () => {
    const ns = uniqueName('rbac-ct');
    const name = uniqueName('self');
    await kubectl('c1', 'create', 'namespace', ns);
    const mayCreatePods = () => providerMay('c1', { verb: 'create', resource: 'pods', namespace: ns });
    const mayExec = () => providerMay('c1', { verb: 'create', resource: 'pods', subresource: 'exec', namespace: ns });
    try {
      expect(await mayCreatePods(), 'before the ClusterTarget').to.equal(false);
      await apply('c1', `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: ClusterTarget\nmetadata: {name: ${name}}\nspec: {self: true}\n`);
      await waitFor('the self ClusterTarget Ready', 60_000, async () => readyOf(await getJson('c1', 'clustertarget', name)) === 'True');
      expect(await mayCreatePods(), 'with the ClusterTarget').to.equal(true);
      expect(await mayExec()).to.equal(true);
      const crb = await getJson('c1', 'clusterrolebinding', `admiralty-self-cluster-target-${name}`);
      expect(crb.roleRef.name).to.equal('multicluster-scheduler-source');
      expect(crb.subjects).to.deep.equal([{ kind: 'ServiceAccount', name: saName, namespace: saNamespace }]);
      await kubectl('c1', 'delete', 'clustertarget', name);
      await waitFor('the source role taken back', 60_000, async () => !(await mayCreatePods()));
      expect(await mayExec()).to.equal(false);
      expect(await kubectl('c1', 'get', 'clusterrolebindings', '-o', 'name')).not.to.include(`admiralty-self-cluster-target-${name}`);
    } finally {
      await kubectl('c1', 'delete', 'clustertarget', name, '--ignore-not-found');
      await kubectl('c1', 'delete', 'namespace', ns, '--wait=false');
    }
  });

  it('gets it only in the namespace of a self Target, and only while that Target is self', async () => {
    const ns = uniqueName('rbac-t');
    const other = uniqueName('rbac-other');
    await kubectl('c1', 'create', 'namespace', ns);
    await kubectl('c1', 'create', 'namespace', other);
    const may = (n: string) => providerMay('c1', { verb: 'create', resource: 'pods', namespace: n });
    try {
      await apply('c1', `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Target\nmetadata: {name: home, namespace: ${ns}}\nspec: {self: true}\n`);
      await waitFor('the self Target Ready', 60_000, async () => readyOf(await getJson('c1', 'target', 'home', '-n', ns)) === 'True');
      expect(await may(ns)).to.equal(true);
      expect(await may(other)).to.equal(false);
      // No longer self: the rights go, though the Target stays.
      await apply('c1', `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Target\nmetadata: {name: home, namespace: ${ns}}\nspec: {kubeconfigSecret: {name: nowhere}}\n`);
      await waitFor('the source role taken back', 60_000, async () => !(await may(ns)));
      expect(await kubectl('c1', 'get', 'rolebindings', '-n', ns, '-o', 'name')).not.to.include('admiralty-self-target-home');
    } finally {
      await kubectl('c1', 'delete', 'namespace', ns, other, '--wait=false');
    }
  });

  it("keeps a self Target's rights while it uses them, though its binding is deleted first, as deleting a namespace may do", async () => {
    const ns = uniqueName('rbac-del');
    await kubectl('c1', 'create', 'namespace', ns);
    const binding = 'admiralty-self-target-home';
    try {
      await apply('c1', `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Target\nmetadata: {name: home, namespace: ${ns}}\nspec: {self: true}\n`);
      await waitFor('the self Target Ready', 60_000, async () => readyOf(await getJson('c1', 'target', 'home', '-n', ns)) === 'True');
      expect((await getJson('c1', 'rolebinding', binding, '-n', ns)).metadata.finalizers).to.deep.equal(['multicluster.admiralty.io/self-target']);
      // The namespace controller deletes bindings and Targets in no set order: the binding first.
      await kubectl('c1', 'delete', 'rolebinding', binding, '-n', ns, '--wait=false');
      const held = await getJson('c1', 'rolebinding', binding, '-n', ns);
      expect(held.metadata.deletionTimestamp, 'deleted, and held by our finalizer').to.be.a('string');
      expect(await providerMay('c1', { verb: 'list', resource: 'configmaps', namespace: ns }), 'a binding being deleted still grants').to.equal(true);
      // Then the rest of the namespace: our finalizer goes with the Target, nothing stays stuck.
      await kubectl('c1', 'delete', 'namespace', ns, '--timeout=90s');
      expect(await kubectl('c1', 'get', 'namespace', ns, '--ignore-not-found', '-o', 'name')).to.equal('');
    } finally {
      await kubectl('c1', 'delete', 'namespace', ns, '--wait=false', '--ignore-not-found');
    }
  });

  it('has had no request refused so far (audit log of every apiserver)', function () {
    for (const cluster of sandbox.state()!.clusters) {
      const refused = sandbox.providerForbiddenRequests(cluster);
      if (refused === undefined) this.skip(); // a sandbox started before audit logging; the root hook says so at the end too
      expect(refused, `${cluster}: requests of the provider refused with 403`).to.deep.equal([]);
    }
  });
});
