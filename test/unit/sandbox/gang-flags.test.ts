import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensurePki } from '../../sandbox/pki.js';
import { Sandbox, type Component, type SandboxState } from '../../sandbox/sandbox.js';

describe('Sandbox gang scheduling opt-in', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandbox-gangs-'));
  // A component's arguments name the sandbox's certificates, which openssl makes once: seconds
  // on a busy machine, so here rather than in the first test.
  before(function () {
    this.timeout(60_000);
    ensurePki(join(dir, 'pki'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));
  const state = (extra: Partial<SandboxState> = {}): SandboxState => ({ basePort: 30000, clusters: ['c1', 'c2'], binDir: dir, kwokModuleDir: dir, provider: true, ...extra });
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
