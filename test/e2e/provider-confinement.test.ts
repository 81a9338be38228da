import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { createCsr } from '../../certs/create-csr.js';
import { PROVIDER_USER, REPO_ROOT } from '../sandbox/sandbox.js';
import { apply, getJson, kubectl, sandbox, uniqueName, waitFor } from './support.js';

/**
 * The ValidatingAdmissionPolicies of manifests/policy/provider-confinement.yaml, against the
 * provider's own credentials (its ServiceAccount token, as the sandbox's provider runs): what RBAC
 * grants it cluster-wide is refused outside what it owns. Every probe of a write the provider
 * must not make is a dry run (`?dryRun=All`): admission judges it, nothing changes, and the
 * suite's final audit check leaves dry runs out, as the provider never makes one.
 */
describe('provider confinement (admission policies where RBAC cannot narrow)', function () {
  this.timeout(120_000);
  const POLICIES = ['admiralty-provider-bindings', 'admiralty-provider-node-leases', 'admiralty-provider-nodes', 'admiralty-provider-csrs'];

  /** kubectl with the provider's kubeconfig of c1; never throws. */
  const asProvider = (args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((res) => {
      const child = execFile(sandbox.kubectlPath, ['--kubeconfig', join(sandbox.dir, 'c1', 'provider.kubeconfig'), ...args], (err, stdout, stderr) =>
        res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
      child.stdin!.end(stdin ?? '');
    });
  const refusedBy = (policy: string, out: { code: number; stderr: string }) => {
    expect(out.code, 'refused').to.not.equal(0);
    expect(out.stderr).to.contain('(Forbidden)').and.contain(`ValidatingAdmissionPolicy '${policy}' with binding '${policy}' denied request`);
  };
  const allowed = (out: { code: number; stdout: string; stderr: string }) => expect(out.code, out.stderr).to.equal(0);
  const dryRun = (path: string) => `${path}?dryRun=All`;

  /** A CSR for the kubelet-serving signer, as the provider files its own, for node `nodeName`. */
  const csrYaml = (name: string, nodeName: string) => {
    const { csrPem } = createCsr({ commonName: `system:node:${nodeName}`, organization: 'system:nodes', ipAddresses: ['127.0.0.1'], dnsNames: [] });
    return JSON.stringify({
      apiVersion: 'certificates.k8s.io/v1',
      kind: 'CertificateSigningRequest',
      metadata: { name },
      spec: { request: Buffer.from(csrPem).toString('base64'), signerName: 'kubernetes.io/kubelet-serving', usages: ['digital signature', 'key encipherment', 'server auth'] },
    });
  };
  /** The provider's approval of CSR `name` (read as admin), as its serving-certificate flow writes it, dry run. */
  const approveAsProvider = async (name: string) => {
    const csr = await getJson('c1', 'csr', name);
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    csr.status = {
      ...csr.status,
      conditions: [...(csr.status?.conditions ?? []), { type: 'Approved', status: 'True', reason: 'AdmiraltyAutoApproved', message: 'e2e', lastUpdateTime: now, lastTransitionTime: now }],
    };
    return asProvider(['replace', '--raw', dryRun(`/apis/certificates.k8s.io/v1/certificatesigningrequests/${name}/approval`), '-f', '-'], JSON.stringify(csr));
  };

  const cleanups: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  });

  it('runs the sandbox with the shipped policies, bound with Deny and Audit', async () => {
    const shipped = parseAllDocuments(await kubectl('c1', 'kustomize', join(REPO_ROOT, 'manifests', 'policy')))
      .map((d) => d.toJSON() as { kind: string; metadata: { name: string } })
      .filter((o) => o.kind === 'ValidatingAdmissionPolicyBinding')
      .map((o) => o.metadata.name);
    expect(shipped).to.include.members(POLICIES);
    for (const name of POLICIES) {
      const binding = await getJson('c1', 'validatingadmissionpolicybinding', name);
      expect(binding.spec, name).to.deep.include({ policyName: name, validationActions: ['Deny', 'Audit'] });
      const policy = await getJson('c1', 'validatingadmissionpolicy', name);
      expect(policy.spec.matchConditions[0].expression, name).to.equal(`request.userInfo.username == '${PROVIDER_USER}'`);
      expect(policy.status?.typeChecking?.expressionWarnings ?? [], `${name}: CEL type-checks`).to.deep.equal([]);
    }
  });

  it('refuses the provider deleting clusterrolebinding/cluster-admin, by the bindings policy, and allows a dry-run delete of its own self-target binding', async () => {
    refusedBy('admiralty-provider-bindings', await asProvider(['delete', '--raw', dryRun('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-admin')]));
    const own = (await getJson<{ items: { metadata: { name: string; namespace: string } }[] }>('c1', 'rolebindings', '-A')).items.find((b) => b.metadata.name.startsWith('admiralty-self-target-'));
    expect(own, 'a self target of the sandbox has its binding').to.not.equal(undefined);
    allowed(await asProvider(['delete', '--raw', dryRun(`/apis/rbac.authorization.k8s.io/v1/namespaces/${own!.metadata.namespace}/rolebindings/${own!.metadata.name}`)]));
  });

  it('refuses the provider deleting, or labelling as its own, a binding that only has the name of one of its own', async () => {
    const ns = uniqueName('confine');
    await kubectl('c1', 'create', 'namespace', ns);
    cleanups.push(() => kubectl('c1', 'delete', 'namespace', ns, '--wait=false'));
    const name = 'admiralty-source-not-ours';
    await apply(
      'c1',
      `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ${name}, namespace: ${ns}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: multicluster-scheduler-source}
subjects: [{kind: ServiceAccount, name: default, namespace: ${ns}}]
`,
    );
    refusedBy('admiralty-provider-bindings', await asProvider(['delete', '--raw', dryRun(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings/${name}`)]));
    const label = JSON.stringify([{ op: 'add', path: '/metadata/labels', value: { 'multicluster.admiralty.io/source-name': 'x', 'multicluster.admiralty.io/source-namespace': ns } }]);
    refusedBy('admiralty-provider-bindings', await asProvider(['patch', 'rolebinding', name, '-n', ns, '--type=json', '-p', label, '--dry-run=server']));
  });

  it("refuses the provider deleting the Lease, or writing the labels, of a real (kwok) node, and allows a dry-run delete of its virtual node's Lease", async () => {
    const nodes = (await getJson<{ items: { metadata: { name: string; labels?: Record<string, string> } }[] }>('c1', 'nodes')).items;
    const real = nodes.find((n) => n.metadata.labels?.['virtual-kubelet.io/provider'] !== 'admiralty')!.metadata.name;
    const virtual = nodes.find((n) => n.metadata.labels?.['virtual-kubelet.io/provider'] === 'admiralty')!.metadata.name;
    refusedBy('admiralty-provider-node-leases', await asProvider(['delete', '--raw', dryRun(`/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${real}`)]));
    allowed(await asProvider(['delete', '--raw', dryRun(`/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${virtual}`)]));
    const patch = JSON.stringify({ metadata: { labels: { 'e2e-confinement': 'x' } } });
    refusedBy('admiralty-provider-nodes', await asProvider(['patch', 'node', real, '--type=merge', '-p', patch, '--dry-run=server']));
    allowed(await asProvider(['patch', 'node', virtual, '--type=merge', '-p', patch, '--dry-run=server']));
  });

  it('refuses the provider approving, or deleting, a kubelet-serving CSR for another node name that it did not file, even under its own name prefix', async () => {
    const name = uniqueName('admiralty-kubelet-serving-e2e-other');
    const real = (await getJson<{ items: { metadata: { name: string; labels?: Record<string, string> } }[] }>('c1', 'nodes')).items.find(
      (n) => n.metadata.labels?.['virtual-kubelet.io/provider'] !== 'admiralty',
    )!.metadata.name;
    await apply('c1', csrYaml(name, real));
    cleanups.push(() => kubectl('c1', 'delete', 'csr', name, '--ignore-not-found'));
    refusedBy('admiralty-provider-csrs', await approveAsProvider(name));
    refusedBy('admiralty-provider-csrs', await asProvider(['delete', '--raw', dryRun(`/apis/certificates.k8s.io/v1/certificatesigningrequests/${name}`)]));
    expect((await getJson('c1', 'csr', name)).status?.conditions ?? []).to.deep.equal([]);
  });

  it('allows the provider filing, approving (dry run) and deleting its own kubelet-serving CSR, and refuses one named otherwise', async () => {
    const name = uniqueName('admiralty-kubelet-serving-e2e-own');
    allowed(await asProvider(['create', '-f', '-'], csrYaml(name, 'admiralty-e2e')));
    cleanups.push(() => kubectl('c1', 'delete', 'csr', name, '--ignore-not-found'));
    expect((await getJson('c1', 'csr', name)).spec.username).to.equal(PROVIDER_USER);
    allowed(await approveAsProvider(name));
    allowed(await asProvider(['delete', 'csr', name]));
    refusedBy(
      'admiralty-provider-csrs',
      await asProvider(['create', '--raw', dryRun('/apis/certificates.k8s.io/v1/certificatesigningrequests'), '-f', '-'], csrYaml(uniqueName('e2e-serving'), 'admiralty-e2e')),
    );
  });

  it("finds the policies' refusals of the provider in the audit log, as the suite's final check does, where only dry runs are left out", async () => {
    const byPolicy = () => {
      const refused = sandbox.forbiddenRequests('c1', PROVIDER_USER, { includeDryRuns: true }) ?? [];
      return POLICIES.filter((p) => refused.some((r) => r.endsWith(`(ValidatingAdmissionPolicy ${p})`)));
    };
    await waitFor('a refusal of each policy in the audit log', 30_000, () => byPolicy().length === POLICIES.length);
    expect(sandbox.forbiddenRequests('c1', PROVIDER_USER, { includeDryRuns: true })).to.include('delete clusterrolebindings cluster-admin (ValidatingAdmissionPolicy admiralty-provider-bindings)');
    expect(sandbox.forbiddenRequests('c1', PROVIDER_USER)!.filter((r) => r.includes('(ValidatingAdmissionPolicy '))).to.deep.equal([]);
  });
});
