import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { REPO_ROOT } from '../sandbox/sandbox.js';
import { apply, connectNamespace, disconnectNamespace, freeCpu, getJson, kubectl, milliCpu, readyOf, sandbox, squeeze, uniqueName, waitFor } from './support.js';

/**
 * `kubectl admiralty status` and `kubectl admiralty explain`, run as kubectl plugins (kubectl
 * finds `kubectl-admiralty` on the PATH), against the sandbox: what they show is what the
 * provider and the summaries say, and who may not read a pod is refused.
 */
describe('operator view: kubectl admiralty status and explain', function () {
  this.timeout(300_000);
  const ns = uniqueName('opview');
  let nodes: { c1Node: string; c2Node: string };
  let pluginDir = '';

  /** `kubectl admiralty <args>` on c1, with the plugin on the PATH; never rejects. */
  const plugin = (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((res) => {
      execFile(
        sandbox.kubectlPath,
        ['admiralty', ...args, '--kubeconfig', sandbox.kubeconfigPath, '--context', 'c1'],
        { env: { PATH: `${pluginDir}${delimiter}${process.env.PATH}`, HOME: pluginDir }, maxBuffer: 16 << 20 },
        (err, stdout, stderr) => res({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  const json = async (...args: string[]) => {
    const r = await plugin(...args, '-o', 'json');
    expect(r.code, r.stderr).to.equal(0);
    return JSON.parse(r.stdout);
  };
  const row = (report: any, name: string) => report.targets.find((t: any) => t.kind === 'Target' && t.namespace === ns && t.name === name);
  const verdict = (explanation: any, name: string) => explanation.targets.find((t: any) => t.target === `${ns}/${name}`);

  before(async () => {
    pluginDir = mkdtempSync(join(tmpdir(), 'kubectl-plugin-'));
    // What `npm install -g` makes: an executable named kubectl-admiralty on the PATH.
    symlinkSync(join(REPO_ROOT, 'bin', 'kubectl-admiralty.js'), join(pluginDir, 'kubectl-admiralty'));
    nodes = await connectNamespace(ns);
    // Held to c2 by its nodeSelector on the target's name.
    await apply(
      'c1',
      `apiVersion: v1\nkind: Pod\nmetadata: {name: held, namespace: ${ns}, annotations: {multicluster.admiralty.io/elect: ""}}\nspec:\n  nodeSelector: {multicluster.admiralty.io/target-name: c2}\n  containers: [{name: c, image: busybox, resources: {requests: {cpu: 100m}}}]\n`,
    );
    await waitFor('held Running on c2', 90_000, async () => {
      const p = await getJson('c1', 'pod', 'held', '-n', ns);
      return p.status?.phase === 'Running' && p.spec.nodeName === nodes.c2Node;
    });
  });
  after(async () => {
    await kubectl('c2', 'delete', 'pods', '-n', ns, '-l', 'role=hog', '--wait=false').catch(() => '');
    await disconnectNamespace(ns);
    rmSync(pluginDir, { recursive: true, force: true });
  });

  it("status shows both targets Ready, with the largest free cpu on one node and the node count of each target's summary, the proxy bound to c2 Running, and the provider's replica as the leader", async () => {
    let report: any;
    // The provider reads a summary once a probe period: wait until it has the current one.
    await waitFor('status to show the summaries as they are', 60_000, async () => {
      report = await json('status', '-n', ns);
      for (const cluster of ['c1', 'c2']) {
        const free = await freeCpu(cluster);
        const r = row(report, cluster);
        if (!r?.provider?.summary || milliCpu(r.provider.summary.largestFree.cpu) !== Math.max(...free.values()) || r.provider.summary.nodes !== free.size) return false;
      }
      return true;
    });
    for (const [cluster, node] of [
      ['c1', nodes.c1Node],
      ['c2', nodes.c2Node],
    ] as const) {
      expect(row(report, cluster)).to.deep.include({ ready: 'True', virtualNode: node });
      expect(row(report, cluster).provider).to.include({ ready: true, reason: 'TargetReady' });
      expect(row(report, cluster).summaryAgeSeconds).to.be.a('number');
    }
    expect(row(report, 'c2').proxies).to.deep.equal({ bound: 1, running: 1, pending: 0, other: 0 });
    expect(row(report, 'c1').proxies).to.deep.equal({ bound: 0, running: 0, pending: 0, other: 0 });
    expect(report.provider.leader.identity).to.match(/^c1-provider-\d+$/);
    // The sandbox's provider runs outside the cluster: seen as the Lease's holder, and leading.
    expect(report.provider.replicas).to.deep.equal([{ name: report.provider.leader.identity, seenAs: 'lease', leader: true }]);
    // The same as a table.
    const table = await plugin('status', '-n', ns);
    expect(table.code, table.stderr).to.equal(0);
    expect(table.stdout).to.match(new RegExp(`^${ns}/c2\\s+${nodes.c2Node}\\s+True\\s`, 'm'));
    expect(table.stdout).to.match(/^Provider leader: c1-provider-\d+ /m);
    expect(table.stdout).to.match(/^c1-provider-\d+\s+Lease holder\s+-\s+-\s+yes$/m);
  });

  it('status shows a target whose apiserver is stopped as not Ready, with the reason', async () => {
    let stopped = false;
    try {
      stopped = await sandbox.stop('c2', 'kube-apiserver');
      let c2: any;
      await waitFor('status to show c2 not Ready', 60_000, async () => {
        c2 = row(await json('status', '-n', ns), 'c2');
        return c2.ready === 'False';
      });
      expect(c2.reason).to.equal('TargetUnreachable');
      expect(c2.provider).to.include({ ready: false, reason: 'TargetUnreachable' });
      expect(c2.provider.outageSince).to.match(/^\d{4}-/);
      const table = await plugin('status', '-n', ns);
      expect(table.stdout).to.include(`${ns}/c2 not ready: TargetUnreachable: `);
    } finally {
      if (stopped) await sandbox.start('c2', 'kube-apiserver');
      await waitFor(`${nodes.c2Node} Ready again`, 90_000, async () => readyOf(await getJson('c1', 'node', nodes.c2Node)) === 'True');
      // c2's controller-manager reconnects with a backoff: the test files after this one expect
      // it to serve new namespaces (their default ServiceAccount) again.
      const probe = `${ns}-back`;
      await kubectl('c2', 'create', 'namespace', probe);
      await waitFor(
        "c2's controller-manager serving new namespaces",
        120_000,
        async () => (await kubectl('c2', 'get', 'serviceaccount', 'default', '-n', probe, '-o', 'name').catch(() => '')).trim() !== '',
      );
      await kubectl('c2', 'delete', 'namespace', probe, '--wait=false');
    }
  });

  it('explain names the nodeSelector that holds a pod to c2, which passes with the nodes it fits on and what its score ranks by, and the target it was bound to', async () => {
    const r = await plugin('explain', 'held', '-n', ns);
    expect(r.code, r.stderr).to.equal(0);
    const e = await json('explain', 'held', '-n', ns);
    expect(e.boundTo).to.deep.equal({ node: nodes.c2Node, target: `${ns}/c2` });
    expect(verdict(e, 'c1')).to.deep.include({ passes: false, reason: `no node in ${ns}/c1 fits: the pod's nodeSelector or node affinity on target labels excludes ${ns}/c1` });
    expect(verdict(e, 'c2')).to.deep.include({ passes: true, score: 10, ranking: 'spread (the default): the most free cpu (share of allocatable, after the pod) first' });
    expect(verdict(e, 'c2').why).to.match(new RegExp(`^fits on [12] of 2 node\\(s\\) of ${ns}/c2; the most free on one of them: cpu \\d`));
    expect(e.best).to.deep.equal([`${ns}/c2`]);
    expect(r.stdout).to.include(`bound to ${nodes.c2Node} (target ${ns}/c2)`);
  });

  it('explain names the reason of a pod too big for any node of c2, and that c1 passed', async () => {
    await squeeze('c2', ns, 500);
    await apply(
      'c1',
      `apiVersion: v1\nkind: Pod\nmetadata: {name: big, namespace: ${ns}, annotations: {multicluster.admiralty.io/elect: ""}}\nspec:\n  containers: [{name: c, image: busybox, resources: {requests: {cpu: "2"}}}]\n`,
    );
    let e: any;
    await waitFor('explain to judge c2 from its squeezed summary', 60_000, async () => {
      e = await json('explain', 'big', '-n', ns);
      return verdict(e, 'c2')?.passes === false;
    });
    expect(verdict(e, 'c2').reason).to.equal(`no node in ${ns}/c2 fits: 2 Insufficient cpu (largest free 500m)`);
    expect(verdict(e, 'c1')).to.deep.include({ passes: true, score: 10 });
    expect(e.best).to.deep.equal([`${ns}/c1`]);
    const table = await plugin('explain', 'big', '-n', ns);
    expect(table.stdout).to.match(new RegExp(`^${ns}/c2\\s+fail\\s+-\\s+no node in ${ns}/c2 fits: 2 Insufficient cpu \\(largest free 500m\\)$`, 'm'));
  });

  it('status counts the refusals of a target: a pod too big for any one node of c2 (but not for all of them), held to c2, shows there as NoNodeFits at least once', async () => {
    await squeeze('c2', ns, 500);
    // 700m: the virtual node offers the 2 x 500m left in all, so the proxy scheduler asks the
    // extender, whose filter finds no one node with room.
    await apply(
      'c1',
      `apiVersion: v1\nkind: Pod\nmetadata: {name: toobig, namespace: ${ns}, annotations: {multicluster.admiralty.io/elect: ""}}\nspec:\n  nodeSelector: {multicluster.admiralty.io/target-name: c2}\n  containers: [{name: c, image: busybox, resources: {requests: {cpu: 700m}}}]\n`,
    );
    let refusal: any;
    await waitFor('status to count a NoNodeFits refusal of c2', 90_000, async () => {
      refusal = row(await json('status', '-n', ns), 'c2')?.refusals?.find((r: any) => r.source === 'filter' && r.reason === 'NoNodeFits');
      return refusal !== undefined;
    });
    expect(refusal.count).to.be.at.least(1);
    expect(refusal.lastMessage).to.equal(`no node in ${ns}/c2 fits: 2 Insufficient cpu (largest free 500m)`);
    expect((await getJson('c1', 'pod', 'toobig', '-n', ns)).spec.nodeName).to.equal(undefined);
    const table = await plugin('status', '-n', ns);
    expect(table.stdout).to.match(new RegExp(`^${ns}/c2\\s.*\\sNoNodeFits×\\d+`, 'm'));
  });

  it('explain and status refuse a caller who may not read the pod or list Targets, with the reason', async () => {
    const explain = await plugin('explain', 'held', '-n', ns, '--as', 'nobody');
    expect(explain.code).to.equal(1);
    expect(explain.stdout).to.equal('');
    expect(explain.stderr).to.match(new RegExp(`^explain: forbidden to read pod ${ns}/held: pods "held" is forbidden: User "nobody" cannot get resource "pods"`));
    const status = await plugin('status', '-n', ns, '--as', 'nobody');
    expect(status.code).to.equal(1);
    expect(status.stderr).to.match(new RegExp(`^status: forbidden to list Targets in namespace ${ns}: .*User "nobody" cannot list resource "targets"`));
  });

  it('the provider itself refuses to explain a pod to a caller who may not get it, and explains it to one who may', async () => {
    await kubectl('c1', 'create', 'serviceaccount', 'outsider', '-n', ns);
    const token = (await kubectl('c1', 'create', 'token', 'outsider', '-n', ns)).trim();
    const pki = join(sandbox.dir, 'pki');
    const denied = await new Promise<{ status: number; body: string }>((res, rej) => {
      https
        .get(
          { host: '127.0.0.1', port: sandbox.ports('c1').kubelet, path: `/admiralty/explain/${ns}/held`, ca: readFileSync(join(pki, 'ca.crt')), headers: { Authorization: `Bearer ${token}` } },
          (r) => {
            let body = '';
            r.on('data', (c) => (body += c));
            r.on('end', () => res({ status: r.statusCode ?? 0, body }));
          },
        )
        .on('error', rej);
    });
    expect(denied).to.deep.equal({ status: 403, body: `Forbidden (user=system:serviceaccount:${ns}:outsider, verb=get, resource=pods, namespace=${ns}, name=held)` });
    // A reader of the namespace, impersonated: it may not read nodes, so the provider's address is given.
    await kubectl('c1', 'create', 'rolebinding', 'reader-view', '-n', ns, '--clusterrole=view', '--user=reader');
    const r = await plugin('explain', 'held', '-n', ns, '--as', 'reader', '--provider-address', `127.0.0.1:${sandbox.ports('c1').kubelet}`, '-o', 'json');
    expect(r.code, r.stderr).to.equal(0);
    expect(JSON.parse(r.stdout).boundTo).to.deep.equal({ node: nodes.c2Node, target: `${ns}/c2` });
  });
});
