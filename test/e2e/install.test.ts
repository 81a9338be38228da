import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../sandbox/sandbox.js';
import { kubectl, sandbox } from './support.js';

const execFileAsync = promisify(execFile);

/** Value of one sample of a Prometheus text exposition, or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_]+)(\{[^}]*\})? (.+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const ls = m[2] ?? '';
    if (Object.entries(labels).every(([k, v]) => ls.includes(`${k}="${v}"`))) return Number(m[3]);
  }
  return undefined;
}

describe('install and observability', function () {
  this.timeout(60_000);

  it('applies the whole of manifests/ to a real apiserver (server-side dry run)', async () => {
    const out = await kubectl('c1', 'apply', '--dry-run=server', '-k', join(REPO_ROOT, 'manifests'));
    for (const obj of [
      'customresourcedefinition.apiextensions.k8s.io/targets.multicluster.admiralty.io',
      'deployment.apps/admiralty',
      'deployment.apps/admiralty-proxy-scheduler',
      'mutatingwebhookconfiguration.admissionregistration.k8s.io/admiralty',
      'clusterrole.rbac.authorization.k8s.io/multicluster-scheduler-source',
    ]) {
      expect(out).to.include(obj);
    }
  });

  it('runs the provider as the shipped ServiceAccount, not as cluster-admin', async () => {
    const kubeconfig = join(sandbox.dir, 'c1', 'provider.kubeconfig');
    const { stdout } = await execFileAsync(sandbox.kubectlPath, ['--kubeconfig', kubeconfig, 'auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}']);
    expect(stdout).to.equal('system:serviceaccount:admiralty:admiralty');
    const pid = Number(readFileSync(join(sandbox.dir, 'pids', 'c1-provider.pid'), 'utf8'));
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).to.include(`--kubeconfig=${kubeconfig}`);
    // Least privilege: what it needs, and not more.
    const can = async (...a: string[]) => (await execFileAsync(sandbox.kubectlPath, ['--kubeconfig', kubeconfig, 'auth', 'can-i', ...a]).catch((e) => e)).stdout.trim();
    expect(await can('delete', 'namespaces')).to.equal('no');
    expect(await can('create', 'clusterroles')).to.equal('no');
    expect(await can('patch', 'nodes/status')).to.equal('yes');
  });

  it('exposes metrics with non-zero values on /metrics, and answers /healthz and /readyz', async () => {
    // One admission review, so the webhook histogram has a sample whatever ran before
    // (dry-run requests reach webhooks with sideEffects None).
    await kubectl('c1', 'run', 'metrics-probe', '--image=nginx', '--annotations=multicluster.admiralty.io/elect=', '--dry-run=server');
    const base = `http://127.0.0.1:${sandbox.ports('c1').metrics}`;
    expect((await fetch(`${base}/healthz`)).status).to.equal(200);
    expect((await fetch(`${base}/readyz`)).status).to.equal(200);
    const text = await (await fetch(`${base}/metrics`)).text();
    expect(sample(text, 'admiralty_controller_reconcile_total', { controller: 'targets', result: 'success' })).to.be.greaterThan(0);
    expect(sample(text, 'admiralty_target_ready', { target: 'Target/default/c2' })).to.equal(1);
    expect(sample(text, 'admiralty_workqueue_adds_total', { controller: 'targets' })).to.be.greaterThan(0);
    expect(sample(text, 'admiralty_certificate_expiry_timestamp_seconds', { certificate: 'webhook' })).to.be.greaterThan(Date.now() / 1000);
    expect(sample(text, 'admiralty_certificate_expiry_timestamp_seconds', { certificate: 'kubelet' })).to.be.greaterThan(Date.now() / 1000);
    expect(sample(text, 'admiralty_webhook_request_duration_seconds_count')).to.be.greaterThan(0);
  });
});
