import { pool } from '../bench/bench-support.js';
import { SOURCE_USER } from '../sandbox/sandbox.js';
import { apply, getJson, kubectl, readyOf, waitFor } from './support.js';

/**
 * Many namespaced Targets from c1 to c2, made as a user would in a few batched calls: each
 * namespace its own Secret, Source and Target, so each is a separate target to the provider (its
 * own clients, caches, virtual node and Lease). For the scale benchmark and the sharded
 * reliability scenario.
 */

const yamlDocs = (docs: readonly object[]): string => docs.map((d) => JSON.stringify(d)).join('\n---\n');

/**
 * Connects `names` as a user would, in a few batched calls: the namespaces (labelled in c1), a
 * Source per namespace in c2 (waits until its role is bound, or c2 refuses the Target's first
 * list), c2's kubeconfig Secret copied into each namespace of c1, and one Target `c2` in each.
 * Resolves once every Target is Ready and every namespace has its default ServiceAccount.
 */
export async function connectMany(names: readonly string[]): Promise<void> {
  await apply('c1', yamlDocs(names.map((name) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: { 'multicluster-scheduler': 'enabled' } } }))));
  await apply('c2', yamlDocs(names.map((name) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } }))));
  await apply('c2', yamlDocs(names.map((namespace) => ({ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'Source', metadata: { name: 'c1', namespace }, spec: { userName: SOURCE_USER } }))));
  await pool([...names], 4, async (ns) => {
    await waitFor(`the Source role bound in c2's ${ns}`, 120_000, async () => (await kubectl('c2', 'auth', 'can-i', 'list', 'pods', '-n', ns, '--as', SOURCE_USER).catch(() => 'no')).trim() === 'yes');
  });
  const secret = await getJson('c1', 'secret', 'c2', '-n', 'default');
  await apply(
    'c1',
    yamlDocs(
      names.flatMap((namespace) => [
        { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'c2', namespace }, data: secret.data },
        { apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'Target', metadata: { name: 'c2', namespace }, spec: { kubeconfigSecret: { name: 'c2' } } },
      ]),
    ),
  );
  const wanted = new Set(names);
  await waitFor(`${names.length} Targets Ready`, 60_000 + names.length * 3000, async () => {
    const targets = await getJson('c1', 'targets', '-A');
    return targets.items.filter((t: any) => wanted.has(t.metadata.namespace) && readyOf(t) === 'True' && t.status?.virtualNodeName).length === names.length;
  });
  for (const c of ['c1', 'c2']) {
    await waitFor(`ServiceAccount default in the ${names.length} namespaces of ${c}`, 120_000, async () => {
      const accounts = await getJson(c, 'serviceaccounts', '-A', '--field-selector', 'metadata.name=default');
      return accounts.items.filter((a: any) => wanted.has(a.metadata.namespace)).length === names.length;
    });
  }
}

/** Deletes the namespaces, the source side first (proxies go, then their delegates), and waits until they are gone from both. */
export async function disconnectMany(names: readonly string[]): Promise<void> {
  const wanted = new Set(names);
  for (const c of ['c1', 'c2']) {
    for (let i = 0; i < names.length; i += 50) await kubectl(c, 'delete', 'namespace', ...names.slice(i, i + 50), '--wait=false', '--ignore-not-found');
    await waitFor(`${names.length} namespaces gone from ${c}`, 10 * 60_000, async () => {
      const left = (await kubectl(c, 'get', 'namespaces', '-o', 'name')).split('\n').filter((l) => wanted.has(l.replace('namespace/', '').trim()));
      return left.length === 0;
    });
  }
}
