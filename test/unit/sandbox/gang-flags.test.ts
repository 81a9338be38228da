import { expect } from 'chai';
import { offlineSandbox } from './offline-sandbox.js';
import { Sandbox, type Component, type SandboxState } from '../../sandbox/sandbox.js';

describe('Sandbox gang scheduling opt-in', () => {
  const { dir, state } = offlineSandbox('sandbox-gangs-', { pki: true });
  const gangFlags = (cluster: string, component: Component, s: SandboxState) =>
    new Sandbox(dir).spec(cluster, component, s).args.filter((a) => a.startsWith('--feature-gates=') || a.startsWith('--runtime-config='));

  it('starts no component with a feature gate or an extra API version by default, as the suite runs', () => {
    for (const c of ['c1', 'c2']) {
      for (const component of ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'proxy-scheduler'] as const) {
        expect(gangFlags(c, component, state()), `${c} ${component}`).to.deep.equal([]);
      }
    }
  });

  it("with gangs on, serves the alpha API in every cluster's apiserver and runs the gang plugin in its kube-scheduler only", () => {
    const gates = '--feature-gates=GenericWorkload=true,GangScheduling=true';
    for (const c of ['c1', 'c2']) {
      expect(gangFlags(c, 'kube-apiserver', state({ gangs: true }))).to.deep.equal([gates, '--runtime-config=scheduling.k8s.io/v1alpha2=true']);
      expect(gangFlags(c, 'kube-scheduler', state({ gangs: true }))).to.deep.equal([gates]);
    }
    // The proxy scheduler keeps the shipped configuration: proxies are still placed one by one.
    expect(gangFlags('c1', 'proxy-scheduler', state({ gangs: true }))).to.deep.equal([]);
  });
});
