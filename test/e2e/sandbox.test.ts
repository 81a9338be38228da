import { expect } from 'chai';
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { apply, getJson, kubectl, kubectlStdin, sandbox, uniqueName, waitFor } from './support.js';

/** The ground every other test stands on: real control planes, fake nodes, logs and exec. */
describe('sandbox', () => {
  it('has two Ready fake nodes per cluster with their region label', async () => {
    for (const [cluster, region] of [['c1', 'us'], ['c2', 'eu']] as const) {
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

  it('runs a pod in c2 and serves its logs and exec as kwok objects define', async () => {
    const ns = uniqueName('ground');
    await kubectl('c2', 'create', 'namespace', ns);
    try {
      // A per-pod Logs object decides what this pod's container prints.
      const dir = join(sandbox.dir, 'c2', 'fake-logs');
      mkdirSync(dir, { recursive: true });
      const file = join(dir, `${ns}.log`);
      writeFileSync(file, `${new Date().toISOString()} stdout F first line of ${ns}\n`);
      await apply(
        'c2',
        `apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Logs\nmetadata: {name: p, namespace: ${ns}}\nspec:\n  logs:\n  - logsFile: ${file}\n    follow: true\n`,
      );
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
});
