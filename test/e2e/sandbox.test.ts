import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { apply, getJson, kubectl, kubectlStdin, sandbox, uniqueName, waitFor } from './support.js';

/** The ground every other test stands on: real control planes, fake nodes, logs and exec. */
describe('sandbox', () => {
  it('has two Ready fake nodes per cluster with their region label', async () => {
    for (const [cluster, region] of [
      ['c1', 'us'],
      ['c2', 'eu'],
    ] as const) {
      const nodes = await getJson(cluster, 'nodes', '-l', 'type=kwok');
      expect(nodes.items).to.have.length(2);
      for (const n of nodes.items) {
        expect(n.metadata.labels['topology.kubernetes.io/region']).to.equal(region);
        const ready = n.status.conditions.find((c: any) => c.type === 'Ready');
        expect(ready?.status, `${n.metadata.name} Ready`).to.equal('True');
        expect(Number(n.status.allocatable.pods)).to.be.at.least(100);
      }
    }
  });

  it("serves each cluster's metrics API through metrics-server, from the usage kwok simulates", async () => {
    // The sandbox's ClusterResourceUsage of namespace default: what the pod's annotations say.
    const name = uniqueName('usage');
    await apply(
      'c2',
      `apiVersion: v1\nkind: Pod\nmetadata: {name: ${name}, namespace: default, annotations: {kwok.x-k8s.io/usage-cpu: 42m, kwok.x-k8s.io/usage-memory: 7Mi}}\nspec:\n  containers: [{name: app, image: busybox}]\n`,
    );
    try {
      let out = '';
      // Two scrapes of the fake node (10 s apart, at the path its annotation names, on the port its
      // status names) give metrics-server its first rate.
      await waitFor(`figures for ${name}`, 90_000, async () => (out = await kubectl('c2', 'top', 'pod', name, '--no-headers').catch(() => '')) !== '');
      const [cpu, memory] = out.trim().split(/\s+/).slice(1);
      // metrics-server derives the rate from kwok's cumulative counter between two scrapes whose
      // timestamps do not fall exactly 10 s apart: 42m comes back as 41m to 43m.
      expect(cpu).to.match(/^\d+m$/);
      expect(parseInt(cpu!, 10)).to.be.closeTo(42, 1);
      expect(memory).to.equal('7Mi');
    } finally {
      await kubectl('c2', 'delete', 'pod', name, '-n', 'default', '--ignore-not-found', '--wait=false');
    }
  });

  it('runs a pod in c2 and serves its logs and exec as kwok objects define', async () => {
    const ns = uniqueName('ground');
    await kubectl('c2', 'create', 'namespace', ns);
    try {
      // A per-pod Logs object decides what this pod's container prints.
      const dir = join(sandbox.dir, 'c2', 'fake-logs');
      mkdirSync(dir, { recursive: true });
      const file = join(dir, `${ns}.log`);
      writeFileSync(file, `${new Date().toISOString()} stdout F first line of ${ns}\n`);
      await apply('c2', `apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Logs\nmetadata: {name: p, namespace: ${ns}}\nspec:\n  logs:\n  - logsFile: ${file}\n    follow: true\n`);
      await apply('c2', `apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ${ns}}\nspec:\n  containers: [{name: app, image: busybox}]\n`);
      await waitFor('pod p Running', 60_000, async () => (await kubectl('c2', 'get', 'pod', 'p', '-n', ns, '-o', 'jsonpath={.status.phase}')) === 'Running');

      expect(await kubectl('c2', 'logs', 'p', '-n', ns)).to.equal(`first line of ${ns}\n`);
      appendFileSync(file, `${new Date().toISOString()} stdout F second line\n`);
      expect(await kubectl('c2', 'logs', 'p', '-n', ns, '--tail=1')).to.equal('second line\n');

      expect(await kubectl('c2', 'exec', 'p', '-n', ns, '--', 'sh', '-c', 'echo "in $SANDBOX_CLUSTER"')).to.equal('in c2\n');
      // kwok does not close a command's stdin on EOF, so use a command that ends by itself.
      const echoed = await kubectlStdin('c2', 'hi\n', 'exec', '-i', 'p', '-n', ns, '--', 'head', '-n', '1');
      expect(echoed).to.include({ stdout: 'hi\n', code: 0 });
    } finally {
      await kubectl('c2', 'delete', 'namespace', ns, '--wait=false');
    }
  });

  it("ends c1's provider (targets, delegation, kubelet API) within its shutdown deadline on SIGTERM, and brings it back as its Deployment would", async function () {
    this.timeout(120_000);
    const loop = Number(readFileSync(join(sandbox.dir, 'pids', 'c1-provider.pid'), 'utf8'));
    const childOf = (pid: number) => {
      try {
        return (
          Number(
            execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
              .trim()
              .split('\n')[0],
          ) || undefined
        );
      } catch {
        return undefined;
      }
    };
    const provider = childOf(loop)!;
    expect(provider, 'the provider runs under its restart loop').to.be.a('number');
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    // The provider itself, not its loop: a kubelet sends SIGTERM to the container's process.
    const signalled = Date.now();
    process.kill(provider, 'SIGTERM');
    // --shutdown-timeout-seconds is 20: the process must be gone by then, not linger on open sockets.
    await waitFor('the provider to exit after SIGTERM', 25_000, async () => !alive(provider));
    console.log(`      exited ${((Date.now() - signalled) / 1000).toFixed(1)} s after SIGTERM`);
    await waitFor('a new provider, Ready', 60_000, async () => {
      const next = childOf(loop);
      if (!next || next === provider) return false;
      return fetch(`http://127.0.0.1:${sandbox.ports('c1').metrics}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
    });
  });
});
