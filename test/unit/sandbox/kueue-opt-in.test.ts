import { expect } from 'chai';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { kueueCrd, kueueWebhookConfigurations } from '../../sandbox/kueue.js';
import { offlineSandbox } from './offline-sandbox.js';
import { CLUSTER_COMPONENTS, Sandbox, type SandboxState } from '../../sandbox/sandbox.js';

describe('Sandbox Kueue opt-in', () => {
  const { dir, state } = offlineSandbox('sandbox-kueue-', { pki: true });
  const withKueue = (extra: Partial<SandboxState> = {}) => state({ kueueBinDir: join(dir, 'kueue-bin'), ...extra });
  /** The components `status` lists for a sandbox in this state. */
  const listed = (s: SandboxState) => {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'state.json'), JSON.stringify(s));
    return new Sandbox(dir)
      .status()
      .filter((l) => /^c\d/.test(l))
      .map((l) => l.split(/\s+/).slice(0, 2).join(' '));
  };

  it('runs no Kueue by default, as the suite runs', () => {
    expect(listed(state()).filter((l) => l.endsWith(' kueue'))).to.deep.equal([]);
  });

  it('with Kueue on, runs it in c1 only, and changes no other component', () => {
    expect(listed(withKueue()).filter((l) => l.endsWith(' kueue'))).to.deep.equal(['c1 kueue']);
    const sandbox = new Sandbox(dir);
    for (const c of ['c1', 'c2']) {
      for (const component of CLUSTER_COMPONENTS.filter((x) => x !== 'kueue')) {
        expect(sandbox.specs(c, component, withKueue()), `${c} ${component}`).to.deep.equal(sandbox.specs(c, component, state()));
      }
    }
  });

  it("takes three ports after every other port of the sandbox, metrics-server's and the provider replicas' included", () => {
    const sandbox = new Sandbox(dir);
    for (const providerReplicas of [1, 3]) {
      const s = withKueue({ providerReplicas });
      const highest = Math.max(sandbox.metricsServerPort('c2', s), sandbox.providerPorts('c1', providerReplicas - 1, s).metrics);
      expect(sandbox.kueuePorts(s), `${providerReplicas} replica(s)`).to.deep.equal({ webhook: highest + 1, metrics: highest + 2, health: highest + 3 });
    }
  });

  it("keeps Kueue's webhooks for its own kinds and batch Jobs, as its install names them, on the sandbox's port", () => {
    const manifests = `---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: mclusterqueue.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-kueue-x-k8s-io-v1beta2-clusterqueue}}
  rules: [{apiGroups: [kueue.x-k8s.io], apiVersions: [v1beta2], operations: [CREATE], resources: [clusterqueues]}]
- name: mjob.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-batch-v1-job}}
  rules: [{apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs]}]
- name: mpod.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
`;
    const [config, ...rest] = parseAllDocuments(kueueWebhookConfigurations(manifests, 31000)).map((d) => d.toJS() as any);
    expect(rest).to.deep.equal([]);
    expect(config.metadata.name).to.equal('kueue-mutating-webhook-configuration');
    expect(config.webhooks.map((w: any) => [w.name, w.clientConfig])).to.deep.equal([
      ['mclusterqueue.kb.io', { service: { namespace: 'kueue-system', name: 'kueue-webhook-service', path: '/mutate-kueue-x-k8s-io-v1beta2-clusterqueue', port: 31000 } }],
      ['mjob.kb.io', { service: { namespace: 'kueue-system', name: 'kueue-webhook-service', path: '/mutate-batch-v1-job', port: 31000 } }],
    ]);
  });

  it('turns on the conversion webhook of the CRDs that have one in its install, and of no other', () => {
    const crd = (name: string) => `apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: ${name}}\nspec: {group: kueue.x-k8s.io}\n`;
    const workloads = parse(kueueCrd(crd('workloads.kueue.x-k8s.io'), 31000));
    expect(workloads.spec.conversion).to.deep.equal({
      strategy: 'Webhook',
      webhook: { clientConfig: { service: { namespace: 'kueue-system', name: 'kueue-webhook-service', path: '/convert', port: 31000 } }, conversionReviewVersions: ['v1'] },
    });
    expect(parse(kueueCrd(crd('resourceflavors.kueue.x-k8s.io'), 31000)).spec.conversion).to.equal(undefined);
  });
});
