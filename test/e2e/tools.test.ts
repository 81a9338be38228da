import { expect } from 'chai';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { FOLLOW_FINALIZER, HAS_FINALIZER_LABEL, SELF_BINDING_FINALIZER } from '../../provider/core/keys.js';
import type { CliIo } from '../../provider/tools/cli-io.js';
import { cleanupCli } from '../../provider/tools/cleanup.js';
import { exportKubeconfigCli } from '../../provider/tools/export-kubeconfig.js';
import { apply, getJson, kubectl, sandbox, uniqueName, waitFor } from './support.js';

/** Runs a command in-process and captures what it writes. */
async function runCli(cli: (args: string[], io: CliIo) => Promise<number>, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await cli(args, { stdout: { write: (s: string) => (stdout += s) }, stderr: { write: (s: string) => (stderr += s) }, env: {} });
  return { code, stdout, stderr };
}

const statusOf = async (p: Promise<unknown>): Promise<number | 'ok'> =>
  p.then(
    () => 'ok' as const,
    (err: { code?: number }) => err.code ?? -1,
  );

describe('tools', () => {
  describe('export-kubeconfig', () => {
    const ns = uniqueName('export');
    before(async () => {
      await kubectl('c2', 'create', 'namespace', ns);
      await kubectl('c2', 'create', 'serviceaccount', 'reader', '-n', ns);
      await kubectl('c2', 'create', 'rolebinding', 'reader-view', '-n', ns, '--clusterrole=view', `--serviceaccount=${ns}:reader`);
    });
    after(async () => {
      await kubectl('c2', 'delete', 'namespace', ns, '--wait=false', '--ignore-not-found');
    });

    it('exports a kubeconfig that acts as the service account: reads its namespace, nothing else', async () => {
      const { code, stdout, stderr } = await runCli(exportKubeconfigCli, ['--kubeconfig', sandbox.kubeconfigPath, '--context', 'c2', '-n', ns, 'reader', '--as', 'c2-reader', '--duration', '1h']);
      expect(code, stderr).to.equal(0);
      expect(stderr).to.match(/expires at/);
      const secret = parse(stdout);
      expect(secret).to.deep.include({ apiVersion: 'v1', kind: 'Secret' });
      expect(secret.metadata).to.deep.equal({ name: 'c2-reader', namespace: 'default' });

      const kc = new KubeConfig();
      kc.loadFromString(secret.stringData.config);
      expect(kc.getContextObject(kc.getCurrentContext())?.namespace).to.equal(ns);
      const core = kc.makeApiClient(CoreV1Api);
      const pods = await core.listNamespacedPod({ namespace: ns });
      expect(pods.items).to.be.an('array');
      // Forbidden elsewhere: the token is the service account's, not the admin's.
      expect(await statusOf(core.listNamespacedPod({ namespace: 'kube-system' }))).to.equal(403);
    });

    it('says to create the Source first when the service account does not exist', async () => {
      const { code, stdout, stderr } = await runCli(exportKubeconfigCli, ['--kubeconfig', sandbox.kubeconfigPath, '--context', 'c2', '-n', ns, 'nobody', '--as', 'x']);
      expect(code).to.equal(1);
      expect(stdout).to.equal('');
      expect(stderr).to.match(/not found in context c2: create the Source first/);
    });
  });

  describe('cleanup', () => {
    const ns = uniqueName('cleanup');
    before(async () => {
      await kubectl('c2', 'create', 'namespace', ns);
    });
    after(async () => {
      // Whatever a failed test left behind must not block the namespace's deletion.
      for (const name of ['labelled', 'unlabelled', 'labelled-kept']) {
        await kubectl('c2', 'patch', 'configmap', name, '-n', ns, '--type', 'merge', '-p', '{"metadata":{"finalizers":null}}').catch(() => '');
      }
      await kubectl('c2', 'patch', 'rolebinding', 'self-binding', '-n', ns, '--type', 'merge', '-p', '{"metadata":{"finalizers":null}}').catch(() => '');
      await kubectl('c2', 'delete', 'namespace', ns, '--wait=false', '--ignore-not-found');
    });

    it("in a dry run changes nothing; for real, strips our finalizers (a self target's binding's too) so that objects can go", async () => {
      await apply(
        'c2',
        [
          `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: labelled\n  namespace: ${ns}\n  labels: {${HAS_FINALIZER_LABEL}: "true"}\n  finalizers: [${FOLLOW_FINALIZER}]\ndata: {a: b}`,
          `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: unlabelled\n  namespace: ${ns}\n  finalizers: [example.com/keep, ${FOLLOW_FINALIZER}]\ndata: {a: b}`,
          `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: labelled-kept\n  namespace: ${ns}\n  labels: {${HAS_FINALIZER_LABEL}: "true", app: x}\n  finalizers: [${FOLLOW_FINALIZER}]\ndata: {a: b}`,
          // As the provider makes it for a self Target (no has-finalizer label: see cleanup.ts).
          `apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: self-binding\n  namespace: ${ns}\n  finalizers: [${SELF_BINDING_FINALIZER}]\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\nsubjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: nobody}]`,
        ].join('\n---\n'),
      );
      // Deleted while our finalizer holds them: they hang, as after an uninstall without cleanup.
      await kubectl('c2', 'delete', 'configmap', 'labelled', '-n', ns, '--wait=false');
      await kubectl('c2', 'delete', 'rolebinding', 'self-binding', '-n', ns, '--wait=false');
      const common = ['--kubeconfig', sandbox.kubeconfigPath, '--context', 'c2', '-n', ns];

      const dry = await runCli(cleanupCli, [...common, '--dry-run']);
      expect(dry.code, dry.stdout + dry.stderr).to.equal(0);
      expect(dry.stdout).to.include(`configmap ${ns}/labelled: would remove ${FOLLOW_FINALIZER}`);
      expect(dry.stdout).to.include(`configmap ${ns}/unlabelled: would remove ${FOLLOW_FINALIZER}`);
      expect(dry.stdout).to.include(`rolebinding ${ns}/self-binding: would remove ${SELF_BINDING_FINALIZER}`);
      expect(dry.stdout).to.match(/would remove 4 finalizer\(s\) from 4 object\(s\)/);
      const held = await getJson('c2', 'configmap', 'labelled', '-n', ns);
      expect(held.metadata.finalizers).to.deep.equal([FOLLOW_FINALIZER]);
      expect(held.metadata.deletionTimestamp).to.be.a('string');

      const real = await runCli(cleanupCli, common);
      expect(real.code, real.stdout + real.stderr).to.equal(0);
      expect(real.stdout).to.include(`configmap ${ns}/labelled: removed ${FOLLOW_FINALIZER}`);
      expect(real.stdout).to.match(/removed 4 finalizer\(s\) from 4 object\(s\)/);
      await waitFor('rolebinding self-binding deleted', 30_000, async () => (await kubectl('c2', 'get', 'rolebinding', 'self-binding', '-n', ns, '--ignore-not-found', '-o', 'name')).trim() === '');
      // An object that stays loses the has-finalizer label with the finalizer, and keeps the rest.
      const stays = await getJson('c2', 'configmap', 'labelled-kept', '-n', ns);
      expect(stays.metadata.finalizers).to.equal(undefined);
      expect(stays.metadata.labels).to.deep.equal({ app: 'x' });
      await waitFor('configmap labelled deleted', 30_000, async () => (await kubectl('c2', 'get', 'configmap', 'labelled', '-n', ns, '--ignore-not-found', '-o', 'name')).trim() === '');
      const kept = await getJson('c2', 'configmap', 'unlabelled', '-n', ns);
      expect(kept.metadata.finalizers).to.deep.equal(['example.com/keep']);

      const again = await runCli(cleanupCli, common);
      expect(again.code).to.equal(0);
      expect(again.stdout).to.match(/removed 0 finalizer\(s\) from 0 object\(s\)/);
    });
  });
});
