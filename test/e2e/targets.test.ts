import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { apply, authorizeSource, docSection, getJson, inlineCommands, kubectl, readyOf, sandbox, uniqueName, waitFor } from './support.js';

const targetReady = (t: any) => t?.status?.conditions?.find((c: any) => c.type === 'Ready');

async function nodeOrUndefined(name: string): Promise<any> {
  try {
    return await getJson('c1', 'node', name);
  } catch {
    return undefined;
  }
}

/** Targets become virtual nodes (the sandbox connected c1 and c2 as the user guide does). */
describe('targets and virtual nodes', function () {
  this.timeout(180_000);

  it('lists one Ready virtual node per target, with taint, role, capacity and the target nodes’ region', async () => {
    const nodes = await getJson('c1', 'nodes', '-l', 'virtual-kubelet.io/provider=admiralty');
    const byName = new Map<string, any>(nodes.items.map((n: any) => [n.metadata.name, n]));
    for (const [name, region] of [
      ['admiralty-namespace-default-c1', 'us'],
      ['admiralty-namespace-default-c2', 'eu'],
    ] as const) {
      const n = byName.get(name);
      expect(n, name).to.exist;
      expect(readyOf(n)).to.equal('True');
      expect(n.spec.taints).to.deep.include({ key: 'virtual-kubelet.io/provider', value: 'admiralty', effect: 'NoSchedule' });
      expect(n.metadata.labels).to.include({ 'kubernetes.io/role': 'cluster', type: 'virtual-kubelet', 'topology.kubernetes.io/region': region });
      expect(Number(n.status.capacity.pods)).to.be.greaterThan(0);
      expect(n.status.addresses[0]).to.deep.equal({ type: 'InternalIP', address: '127.0.0.1' });
      // Our own kubelet API, not kwok's: the port is the provider's.
      expect(n.status.daemonEndpoints.kubeletEndpoint.Port).to.equal(sandbox.ports('c1').kubelet);
    }
    const lease = await getJson('c1', 'lease', 'admiralty-namespace-default-c2', '-n', 'kube-node-lease');
    expect(lease.spec.leaseDurationSeconds).to.equal(40);
    const targets = await getJson('c1', 'targets', '-n', 'default');
    for (const t of targets.items) expect(targetReady(t)).to.include({ status: 'True' });
  });

  it("shows, as the Quick start's step 4 says, whether each target works and why not (kubectl get targets) and the virtual nodes (kubectl get nodes -l …)", async () => {
    const step4 = /\n4\. ([\s\S]*?)\n\n/.exec(docSection('README.md', '## Quick start on real clusters'))?.[1] ?? '';
    const [getTargets, getNodes] = inlineCommands(step4, 'kubectl');
    expect([getTargets, getNodes]).to.deep.equal(['kubectl get targets', 'kubectl get nodes -l virtual-kubelet.io/provider=admiralty']);
    // kubectl's table: columns start where their header does; an empty cell is blank.
    const table = async (cluster: string, command: string, ...args: string[]) => {
      const [head, ...lines] = (await kubectl(cluster, ...command.split(' ').slice(1), ...args)).trimEnd().split('\n');
      const columns = [...head!.matchAll(/\S+/g)].map((m) => ({ name: m[0], start: m.index! }));
      const cells = (line: string) => Object.fromEntries(columns.map((c, i) => [c.name, line.slice(c.start, columns[i + 1]?.start).trim()]));
      return { header: columns.map((c) => c.name), rows: new Map(lines.map((l) => [cells(l).NAME, cells(l)])) };
    };
    // Namespace default (the current context's): the sandbox's two Ready targets.
    const targets = await table('c1', getTargets!);
    expect(targets.header).to.deep.equal(['NAME', 'READY', 'REASON', 'NODE', 'SELF', 'WEIGHT', 'PRIORITY', 'AGE']);
    expect(targets.rows.get('c1')).to.include({ READY: 'True', REASON: 'TargetReady', NODE: 'admiralty-namespace-default-c1', SELF: 'true', WEIGHT: '1', PRIORITY: '0' });
    expect(targets.rows.get('c2')).to.include({ READY: 'True', REASON: 'TargetReady', NODE: 'admiralty-namespace-default-c2', SELF: '', WEIGHT: '1', PRIORITY: '0' });
    // A target that does not work says why.
    const ns = uniqueName('get-targets');
    await kubectl('c1', 'create', 'namespace', ns);
    try {
      await apply(
        'c1',
        `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Target\nmetadata: {name: broken, namespace: ${ns}}\nspec: {kubeconfigSecret: {name: missing}, placement: {weight: 3, priority: 2}}\n`,
      );
      await waitFor('Target broken says SecretNotFound', 60_000, async () => targetReady(await getJson('c1', 'target', 'broken', '-n', ns))?.reason === 'SecretNotFound');
      const broken = await table('c1', getTargets!, '-n', ns);
      // The name its node will have once it works (the status says it from the start).
      const node = (await getJson('c1', 'target', 'broken', '-n', ns)).status.virtualNodeName;
      expect(node).to.match(new RegExp(`^admiralty-namespace-${ns}-broken-`));
      expect(broken.rows.get('broken')).to.include({ READY: 'False', REASON: 'SecretNotFound', NODE: node, SELF: '', WEIGHT: '3', PRIORITY: '2' });
    } finally {
      await kubectl('c1', 'delete', 'namespace', ns, '--wait=false');
    }
    const nodes = await table('c1', getNodes!);
    expect(nodes.header).to.deep.equal(['NAME', 'STATUS', 'ROLES', 'AGE', 'VERSION']);
    for (const name of ['admiralty-namespace-default-c1', 'admiralty-namespace-default-c2']) expect(nodes.rows.get(name), name).to.include({ STATUS: 'Ready', ROLES: 'cluster' });
    // Only virtual nodes: kwok's fake nodes are not listed.
    for (const name of nodes.rows.keys()) expect(name).to.match(/^admiralty-/);
  });

  it('makes a ClusterTarget a node named admiralty-cluster-<name>, and removes it with the ClusterTarget', async () => {
    const name = uniqueName('ct');
    await apply('c1', `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: ClusterTarget\nmetadata: {name: ${name}}\nspec: {self: true}\n`);
    const node = `admiralty-cluster-${name}`;
    await waitFor(`node ${node} Ready`, 60_000, async () => readyOf(await nodeOrUndefined(node)) === 'True');
    const n = await getJson('c1', 'node', node);
    expect(n.metadata.labels['multicluster.admiralty.io/cluster-target-name']).to.equal(name);
    await kubectl('c1', 'delete', 'clustertarget', name);
    await waitFor(`node ${node} deleted`, 60_000, async () => (await nodeOrUndefined(node)) === undefined);
    // Nothing of ours left behind: no Lease, no finalizer on the (gone) ClusterTarget.
    await waitFor('node Lease gone', 30_000, async () => !(await kubectl('c1', 'get', 'lease', '-n', 'kube-node-lease', '-o', 'name')).includes(node));
  });

  it('brings back a virtual node deleted by hand while its target lives', async () => {
    await kubectl('c1', 'delete', 'node', 'admiralty-namespace-default-c2');
    await waitFor('c2 virtual node back and Ready', 60_000, async () => readyOf(await nodeOrUndefined('admiralty-namespace-default-c2')) === 'True');
  });

  it('reports a broken Target in its status and events, keeps the others Ready, and heals when the Secret is fixed', async () => {
    const ns = uniqueName('bad-targets');
    await kubectl('c1', 'create', 'namespace', ns);
    try {
      const cases = [
        { name: 'missing', secret: undefined, reason: 'SecretNotFound' },
        { name: 'garbage', secret: 'this is: [not a kubeconfig', reason: 'KubeconfigInvalid' },
        {
          name: 'unreachable',
          secret:
            'apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: "https://127.0.0.1:1"}}]\nusers: [{name: x, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\ncurrent-context: x\n',
          reason: 'TargetUnreachable',
        },
      ];
      for (const c of cases) {
        if (c.secret !== undefined) await kubectl('c1', 'create', 'secret', 'generic', c.name, '-n', ns, `--from-literal=config=${c.secret}`);
        await apply('c1', `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Target\nmetadata: {name: ${c.name}, namespace: ${ns}}\nspec: {kubeconfigSecret: {name: ${c.name}}}\n`);
      }
      for (const c of cases) {
        await waitFor(`Target ${c.name} says ${c.reason}`, 60_000, async () => targetReady(await getJson('c1', 'target', c.name, '-n', ns))?.reason === c.reason);
        const cond = targetReady(await getJson('c1', 'target', c.name, '-n', ns));
        expect(cond.status).to.equal('False');
        expect(cond.message).to.be.a('string').and.not.empty;
        await waitFor(
          `event ${c.reason}`,
          30_000,
          async () => (await kubectl('c1', 'get', 'events', '-n', ns, '--field-selector', `involvedObject.name=${c.name},reason=${c.reason}`, '-o', 'name')).trim() !== '',
        );
      }
      // The healthy targets are not disturbed.
      for (const n of ['admiralty-namespace-default-c1', 'admiralty-namespace-default-c2']) expect(readyOf(await getJson('c1', 'node', n))).to.equal('True');

      // Fix the missing Secret with a working kubeconfig (c2's), and authorize that identity in
      // this namespace of c2 as a user would (a Source): it heals without a restart.
      await kubectl('c2', 'create', 'namespace', ns);
      await authorizeSource(ns);
      const good = await getJson('c1', 'secret', 'c2', '-n', 'default');
      await apply('c1', JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'missing', namespace: ns }, data: good.data }));
      await waitFor('Target "missing" Ready', 60_000, async () => targetReady(await getJson('c1', 'target', 'missing', '-n', ns))?.status === 'True');
      // A namespace with a dash makes the readable name ambiguous, so the node name carries a hash.
      const t = await getJson('c1', 'target', 'missing', '-n', ns);
      expect(t.status.virtualNodeName).to.match(new RegExp(`^admiralty-namespace-${ns}-missing-[0-9a-f]{10}$`));
      await waitFor('its node Ready', 30_000, async () => readyOf(await nodeOrUndefined(t.status.virtualNodeName)) === 'True');
    } finally {
      // Source side first: its Targets go before c2 takes the Source's rights away.
      await kubectl('c1', 'delete', 'namespace', ns, '--wait=true', '--timeout=60s');
      await kubectl('c2', 'delete', 'namespace', ns, '--wait=false', '--ignore-not-found');
    }
    // Deleting the Targets (with their namespace) removes their nodes.
    await waitFor('nodes of the bad targets gone', 60_000, async () => !(await kubectl('c1', 'get', 'nodes', '-o', 'name')).includes(`admiralty-namespace-${ns}`));
  });

  it("never sends the provider's credentials where a Target's writer points: hostile kubeconfigs are refused without a connection", async () => {
    const ns = uniqueName('hostile-kc');
    const dir = mkdtempSync(join(tmpdir(), 'canary-dir-'));
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'provider-token-canary');
    // One loopback listener per case, counting connections: a credential can only leave on one.
    const listeners: Server[] = [];
    const listen = async () => {
      const counter = { connections: 0, port: 0 };
      const server = createServer((socket) => {
        counter.connections++;
        socket.destroy();
      });
      await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
      counter.port = (server.address() as AddressInfo).port;
      listeners.push(server);
      return counter;
    };
    const kc = (server: string, user: string, cluster = '') =>
      `apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: "${server}"${cluster}}}]\nusers: [{name: x, user: {${user}}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\ncurrent-context: x\n`;
    await kubectl('c1', 'create', 'namespace', ns);
    try {
      const cases = [
        {
          name: 'token-file',
          reason: 'KubeconfigUnsupported',
          listener: await listen(),
          kubeconfig: (p: number) => kc(`https://127.0.0.1:${p}`, `token-file: ${tokenFile}`, ', insecure-skip-tls-verify: true'),
        },
        { name: 'proxy-url', reason: 'KubeconfigUnsupported', listener: await listen(), kubeconfig: (p: number) => kc('https://10.0.0.1:6443', 'token: t', `, proxy-url: "http://127.0.0.1:${p}"`) },
        { name: 'query', reason: 'KubeconfigInvalid', listener: await listen(), kubeconfig: (p: number) => kc(`https://127.0.0.1:${p}/?`, 'token: t') },
        { name: 'newline-token', reason: 'KubeconfigInvalid', listener: await listen(), kubeconfig: (p: number) => kc(`https://127.0.0.1:${p}`, 'token: "canary-token\\n"') },
        // The control: a plain kubeconfig to the same kind of listener is dialled, so a zero above means something.
        { name: 'control', reason: 'TargetUnreachable', listener: await listen(), kubeconfig: (p: number) => kc(`https://127.0.0.1:${p}`, 'token: t') },
      ];
      for (const c of cases) {
        await kubectl('c1', 'create', 'secret', 'generic', c.name, '-n', ns, `--from-literal=config=${c.kubeconfig(c.listener.port)}`);
        await apply('c1', `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Target\nmetadata: {name: ${c.name}, namespace: ${ns}}\nspec: {kubeconfigSecret: {name: ${c.name}}}\n`);
      }
      for (const c of cases) {
        await waitFor(`Target ${c.name} says ${c.reason}`, 60_000, async () => targetReady(await getJson('c1', 'target', c.name, '-n', ns))?.reason === c.reason);
        const cond = targetReady(await getJson('c1', 'target', c.name, '-n', ns));
        expect(cond.message, c.name).to.not.match(/canary/);
      }
      await waitFor('the control Target was dialled', 30_000, async () => cases.at(-1)!.listener.connections > 0);
      for (const c of cases.slice(0, -1)) expect(c.listener.connections, `connections made for ${c.name}`).to.equal(0);
      const logs = readFileSync(join(sandbox.dir, 'logs', 'c1-provider.log'), 'utf8');
      expect(logs).to.not.contain('canary');
    } finally {
      for (const l of listeners) l.close();
      rmSync(dir, { recursive: true, force: true });
      await kubectl('c1', 'delete', 'namespace', ns, '--wait=true', '--timeout=60s');
    }
  });

  it('copies a label shared by every node of c2 onto its virtual node, and drops it live with excludedLabelsRegexp', async () => {
    const node = 'admiralty-namespace-default-c2';
    const key = 'e2e.example.com/marker';
    await kubectl('c2', 'label', 'nodes', '-l', 'type=kwok', `${key}=yes`, '--overwrite');
    try {
      await waitFor('label on the virtual node', 60_000, async () => (await getJson('c1', 'node', node)).metadata.labels[key] === 'yes');
      await kubectl('c1', 'patch', 'target', 'c2', '-n', 'default', '--type=merge', '-p', JSON.stringify({ spec: { excludedLabelsRegexp: '^e2e\\.example\\.com/' } }));
      await waitFor('label gone from the virtual node', 60_000, async () => (await getJson('c1', 'node', node)).metadata.labels[key] === undefined);
    } finally {
      await kubectl('c1', 'patch', 'target', 'c2', '-n', 'default', '--type=merge', '-p', '{"spec":{"excludedLabelsRegexp":null}}');
      await kubectl('c2', 'label', 'nodes', '-l', 'type=kwok', `${key}-`);
    }
  });

  it("turns c2's virtual node NotReady while c2's apiserver is down, and Ready again after", async () => {
    const node = 'admiralty-namespace-default-c2';
    await sandbox.stop('c2', 'kube-apiserver');
    try {
      await waitFor('c2 virtual node NotReady', 60_000, async () => readyOf(await getJson('c1', 'node', node)) === 'False');
      const t = await getJson('c1', 'target', 'c2', '-n', 'default');
      expect(targetReady(t)).to.include({ status: 'False', reason: 'TargetUnreachable' });
      expect(readyOf(await getJson('c1', 'node', 'admiralty-namespace-default-c1'))).to.equal('True');
    } finally {
      await sandbox.start('c2', 'kube-apiserver');
    }
    await waitFor('c2 virtual node Ready again', 60_000, async () => readyOf(await getJson('c1', 'node', node)) === 'True');
  });
});
