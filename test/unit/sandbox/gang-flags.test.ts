import { expect } from 'chai';
import { offlineSandbox } from './offline-sandbox.js';
import { Sandbox, type Component, type SandboxState } from '../../sandbox/sandbox.js';

describe('Sandbox gang scheduling opt-in', () => {
  const { dir, state } = offlineSandbox('sandbox-gangs-', { pki: true });
  const gangFlags = (cluster: string, component: Component, s: SandboxState) =>
    new Sandbox(dir).spec(cluster, component, s).args.filter((a) => a.startsWith('--feature-gates=') || a.startsWith('--runtime-config='));

  it('starts no component with a feature gate or an extra API version by default (sandbox up without --gangs)', () => {
    for (const c of ['c1', 'c2']) {
      for (const component of ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'proxy-scheduler'] as const) {
        expect(gangFlags(c, component, state()), `${c} ${component}`).to.deep.equal([]);
      }
    }
  });

  it("with gangs on, serves the alpha API (topology constraints too) in every cluster's apiserver, with the gates in its controller-manager and kube-scheduler, and none in the proxy scheduler", () => {
    const gates = '--feature-gates=GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true';
    for (const c of ['c1', 'c2']) {
      expect(gangFlags(c, 'kube-apiserver', state({ gangs: true }))).to.deep.equal([gates, '--runtime-config=scheduling.k8s.io/v1alpha2=true']);
      expect(gangFlags(c, 'kube-scheduler', state({ gangs: true }))).to.deep.equal([gates]);
      // Its PodGroup protection controller lifts the finalizer of a PodGroup deleted.
      expect(gangFlags(c, 'kube-controller-manager', state({ gangs: true }))).to.deep.equal([gates]);
    }
    // The proxy scheduler keeps the shipped configuration: the extender places a gang's proxies whole.
    expect(gangFlags('c1', 'proxy-scheduler', state({ gangs: true }))).to.deep.equal([]);
  });
});
