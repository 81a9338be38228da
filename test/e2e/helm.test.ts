import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { FOLLOW_FINALIZER, HAS_FINALIZER_LABEL, PROXY_FINALIZER } from '../../provider/core/keys.js';
import { REPO_ROOT, Sandbox, shippedCli } from '../sandbox/sandbox.js';
import { asPodContainer, CHART, chartObjects, helmPath, sandbox as suiteSandbox, waitFor } from './support.js';

type Obj = any;

/** What the Quick start's placeholders stand for here. */
const PLACEHOLDERS: Record<string, string> = {
  'a name unique to this cluster': 'c1',
  // Never pulled: kwok runs no containers.
  registry: 'registry.example',
};

/**
 * The Quick start's `helm install` and `helm uninstall` commands, read from the README so that
 * the test runs what users are told, placeholders filled in, as argument lists (`helm` first).
 */
function quickStartCommands(): { install: string[]; uninstall: string[] } {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('## Quick start on real clusters');
  const section = readme.slice(start, readme.indexOf('\n## ', start + 1));
  const install = /```sh\n\s*(helm install [\s\S]*?)```/.exec(section)?.[1];
  const uninstall = /`(helm uninstall [^`]*)`/.exec(section)?.[1];
  if (!install || !uninstall) throw new Error("README's Quick start has no `helm install` block or no `helm uninstall` command");
  const argv = (command: string) =>
    command
      .replace(/\\\n/g, ' ')
      .replace(/<([^>]+)>/g, (_, p: string) => {
        const value = PLACEHOLDERS[p];
        if (value === undefined) throw new Error(`README's Quick start: no value for placeholder <${p}>`);
        return value;
      })
      .trim()
      .split(/\s+/);
  return { install: argv(install), uninstall: argv(uninstall) };
}

/** `kind/namespace/name` of an object, for comparisons. */
const id = (o: Obj) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;

/**
 * `helm install` and `helm uninstall` for real, in a cluster of their own: the suite's sandbox
 * already holds our cluster-wide objects (installed with kubectl, which Helm refuses to adopt),
 * and uninstalling there would break the tests after this one. Its cluster has the control plane
 * and kwok only, and kwok leaves Job pods Running: the test runs the post-delete hook's command
 * itself, as the pod's kubelet would, and writes the pod's outcome.
 */
describe("Helm: the Quick start's helm install and helm uninstall, in a cluster of their own", function () {
  this.timeout(180_000);
  const { install, uninstall } = quickStartCommands();
  // The Quick start's values, as `helm template` renders them: what the release must hold.
  const sets = install.flatMap((a, i) => (install[i - 1] === '--set' ? [a] : []));
  let sb: Sandbox;
  let dir: string;
  let helmEnv: NodeJS.ProcessEnv;
  // Ends the helm processes still running when the tests stop (an uninstall waiting for its hook).
  const stopHelm = new AbortController();
  const helm = (args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((res) => {
      // From the repository root, where the Quick start's `charts/admiralty` is.
      execFile(helmPath(), args, { cwd: REPO_ROOT, env: helmEnv, maxBuffer: 64 << 20, signal: stopHelm.signal }, (err, stdout, stderr) =>
        res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });

  before(async function () {
    this.timeout(300_000);
    helmPath(); // a cold build of helm (about 2 minutes) happens here, not in a test
    dir = mkdtempSync(join(tmpdir(), 'helm-sandbox-'));
    sb = new Sandbox(join(dir, 'sandbox'));
    await sb.up({ clusters: 1, provider: false, completeJobPods: false, log: (l) => console.log(`      helm: ${l}`) });
    // The throwaway cluster is the current context of this kubeconfig; helm keeps its files
    // (its own and client-go's discovery cache, under HOME) here, not in the user's home.
    helmEnv = { PATH: process.env.PATH, KUBECONFIG: sb.kubeconfigPath, HOME: join(dir, 'home') };
  });

  after(async function () {
    this.timeout(120_000);
    stopHelm.abort();
    await sb?.down();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('reads the commands from the README: the chart of this repository, the release in namespace admiralty', () => {
    expect(install.slice(0, 3)).to.deep.equal(['helm', 'install', 'admiralty']);
    expect(install).to.include('charts/admiralty').and.include('--create-namespace');
    expect(install.join(' ')).to.contain('-n admiralty');
    expect(sets).to.deep.equal(['clusterName=c1', 'image.repository=registry.example/admiralty-ts']);
    expect(uninstall).to.deep.equal(['helm', 'uninstall', 'admiralty', '-n', 'admiralty']);
  });

  it("installs: the release is deployed and holds the chart's objects, CRDs, RBAC that works, the webhook configuration and the proxy scheduler", async () => {
    const out = await helm(install.slice(1));
    expect(out.code, out.stderr).to.equal(0);
    const status = await helm(['status', 'admiralty', '-n', 'admiralty', '-o', 'json']);
    expect(JSON.parse(status.stdout).info.status).to.equal('deployed');

    // The release holds what the chart renders with the same values, CRDs and hooks aside.
    const rendered = (await chartObjects(...sets)).filter((o) => o.kind !== 'CustomResourceDefinition' && !o.metadata.annotations?.['helm.sh/hook']);
    const manifest = (await helm(['get', 'manifest', 'admiralty', '-n', 'admiralty'])).stdout;
    const released = parseAllDocuments(manifest)
      .map((d) => d.toJS())
      .filter(Boolean);
    expect(released.map(id).sort()).to.deep.equal(rendered.map(id).sort());
    // And each of them is in the cluster.
    writeFileSync(join(dir, 'release.yaml'), manifest);
    const live: Obj[] = JSON.parse(await sb.kubectl('c1', 'get', '-f', join(dir, 'release.yaml'), '-o', 'json')).items;
    expect(live.map(id).sort()).to.deep.equal(rendered.map(id).sort());
    const find = (kind: string, name: string) => live.find((o) => o.kind === kind && o.metadata.name === name);

    // The CRDs of crds/, established.
    const crds = readdirSync(join(CHART, 'crds')).map((f) => `${f.replace(/\.yaml$/, '')}.multicluster.admiralty.io`);
    await sb.kubectl('c1', 'wait', '--for=condition=Established', '--timeout=30s', ...crds.map((c) => `crd/${c}`));

    // The provider's Deployment runs the shipped image and arguments; the proxy scheduler is on by default.
    const version = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).version;
    const provider = find('Deployment', 'admiralty').spec.template.spec.containers[0];
    expect(provider.image).to.equal(`registry.example/admiralty-ts:${version}`);
    expect(provider.args[0]).to.equal('provider');
    expect(provider.args).to.deep.equal(rendered.find((o) => o.kind === 'Deployment' && o.metadata.name === 'admiralty').spec.template.spec.containers[0].args);
    expect(find('ConfigMap', 'admiralty-config').data.clusterName).to.equal('c1');
    expect(find('Deployment', 'admiralty-proxy-scheduler')).to.not.equal(undefined);
    expect(find('MutatingWebhookConfiguration', 'admiralty').webhooks[0].clientConfig.service).to.include({ namespace: 'admiralty', name: 'admiralty' });
    // Their pods pass admission and scheduling (kwok runs them as fakes).
    for (const name of ['admiralty', 'admiralty-proxy-scheduler']) {
      await waitFor(`Deployment ${name} available`, 60_000, async () => {
        const d = JSON.parse(await sb.kubectl('c1', 'get', 'deployment', name, '-n', 'admiralty', '-o', 'json'));
        return d.status.availableReplicas === d.spec.replicas;
      });
    }
    // The release's RBAC is in force for both ServiceAccounts.
    const can = async (user: string, ...a: string[]) => (await sb.kubectl('c1', 'auth', 'can-i', '--as', `system:serviceaccount:admiralty:${user}`, ...a).catch((e) => e.stdout ?? '')).trim();
    expect(await can('admiralty', 'patch', 'nodes', '--subresource=status')).to.equal('yes');
    expect(await can('admiralty', 'patch', 'pods', '--subresource=status', '-n', 'default')).to.equal('yes');
    expect(await can('admiralty-proxy-scheduler', 'create', 'pods', '--subresource=binding', '-n', 'default')).to.equal('yes');
    expect(await can('admiralty', 'delete', 'namespaces')).to.equal('no');
  });

  it("uninstalls: the post-delete hook Job runs `admiralty cleanup` with its own ServiceAccount and completes; the release's objects are gone, the CRDs stay", async () => {
    // What a provider leaves behind once it is gone: a proxy pod being deleted, held by our
    // finalizer; a followed ConfigMap with ours and another owner's.
    await sb.kubectl('c1', 'create', 'namespace', 'app');
    await sb.applyYaml(
      'c1',
      `apiVersion: v1\nkind: Pod\nmetadata: {name: proxy, namespace: app, labels: {${HAS_FINALIZER_LABEL}: "true"}, finalizers: [${PROXY_FINALIZER}]}\nspec: {containers: [{name: c, image: busybox}]}\n---\n` +
        `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: followed, namespace: app, labels: {${HAS_FINALIZER_LABEL}: "true"}, finalizers: [${FOLLOW_FINALIZER}, example.com/keep]}\n`,
    );
    await sb.kubectl('c1', 'delete', 'pod', 'proxy', '-n', 'app', '--wait=false');
    const manifest = join(dir, 'release.yaml');
    writeFileSync(manifest, (await helm(['get', 'manifest', 'admiralty', '-n', 'admiralty'])).stdout);

    let done: { code: number; stdout: string; stderr: string } | undefined;
    const uninstalling = helm(uninstall.slice(1)).then((r) => (done = r));

    // The hook Job's pod, Running under kwok: its container's command, run here with what the
    // pod would have (a token of its ServiceAccount bound to it, the CA, in-cluster addressing).
    let pod: Obj;
    await waitFor('the post-delete hook pod Running', 90_000, async () => {
      if (done) throw new Error(`helm uninstall ended before its hook ran (exit ${done.code}): ${done.stderr}`);
      pod = JSON.parse(await sb.kubectl('c1', 'get', 'pods', '-n', 'admiralty', '-l', 'job-name=admiralty-cleanup', '-o', 'json')).items.find((p: Obj) => p.status.phase === 'Running');
      return pod !== undefined;
    });
    const container = pod.spec.containers[0];
    expect(container.args).to.deep.equal(['cleanup']);
    expect(pod.spec.serviceAccountName).to.equal('admiralty-cleanup');
    const token = (
      await sb.kubectl(
        'c1',
        'create',
        'token',
        pod.spec.serviceAccountName,
        '-n',
        'admiralty',
        '--bound-object-kind=Pod',
        `--bound-object-name=${pod.metadata.name}`,
        `--bound-object-uid=${pod.metadata.uid}`,
      )
    ).trim();
    const cli = shippedCli();
    const run = asPodContainer({ dir, token, ca: readFileSync(join(sb.dir, 'pki', 'ca.crt')), namespace: 'admiralty', apiserverPort: sb.ports('c1').apiserver }, cli.command, [
      ...cli.args,
      ...container.args,
    ]);
    const cleanup = await new Promise<{ code: number; stdout: string; stderr: string }>((res) => {
      execFile(run.file, run.args, { cwd: REPO_ROOT, env: run.env }, (err, stdout, stderr) => res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
    });
    expect(cleanup.code, cleanup.stdout + cleanup.stderr).to.equal(0);
    expect(cleanup.stdout).to.contain('removed 2 finalizer(s) from 2 object(s)');
    // Its outcome, as the kubelet reports a container that exited 0. kwok may still be writing
    // the pod's Running status from its own stages; a kubelet would keep reporting the exit, so
    // the report is made again until helm, which waits for the Job, is done.
    const now = new Date().toISOString();
    const terminated = { exitCode: 0, reason: 'Completed', startedAt: now, finishedAt: now };
    const succeeded = JSON.stringify({ status: { phase: 'Succeeded', containerStatuses: [{ name: container.name, image: container.image, ready: false, restartCount: 0, state: { terminated } }] } });
    await waitFor('helm uninstall done, the hook pod reported Succeeded', 120_000, async () => {
      if (done) return true;
      const phase = (await sb.kubectl('c1', 'get', 'pod', pod.metadata.name, '-n', 'admiralty', '--ignore-not-found', '-o', 'jsonpath={.status.phase}')).trim();
      if (phase !== '' && phase !== 'Succeeded')
        await sb.kubectl('c1', 'patch', 'pod', pod.metadata.name, '-n', 'admiralty', '--subresource=status', '--type=merge', '-p', succeeded).catch(() => undefined);
      return false;
    });

    // helm waits for the Job to complete, then deletes the hook's objects (hook-succeeded).
    const out = await uninstalling;
    expect(out.code, out.stderr).to.equal(0);
    expect(out.stdout).to.contain('release "admiralty" uninstalled');
    const events: Obj[] = JSON.parse(
      await sb.kubectl('c1', 'get', 'events', '-n', 'admiralty', '--field-selector', 'involvedObject.kind=Job,involvedObject.name=admiralty-cleanup', '-o', 'json'),
    ).items;
    expect(events.map((e) => e.reason)).to.include('Completed');
    const hookObjects = await sb.kubectl(
      'c1',
      'get',
      'job/admiralty-cleanup',
      'serviceaccount/admiralty-cleanup',
      'clusterrole/admiralty-cleanup',
      'clusterrolebinding/admiralty-cleanup',
      '-n',
      'admiralty',
      '--ignore-not-found',
      '-o',
      'name',
    );
    expect(hookObjects).to.equal('');

    // The cleanup's effect: the proxy pod is gone, the ConfigMap keeps only the other owner's finalizer.
    await waitFor('the proxy pod gone', 30_000, async () => (await sb.kubectl('c1', 'get', 'pod', 'proxy', '-n', 'app', '--ignore-not-found', '-o', 'name')) === '');
    const followed = JSON.parse(await sb.kubectl('c1', 'get', 'configmap', 'followed', '-n', 'app', '-o', 'json')).metadata;
    expect(followed.finalizers).to.deep.equal(['example.com/keep']);
    expect(followed.labels ?? {}).to.not.have.key(HAS_FINALIZER_LABEL);

    // Every object of the release is gone; as Helm does, the CRDs of crds/ stay (their deletion
    // would delete every Target and Source), and so does the namespace --create-namespace made.
    await waitFor("the release's objects gone", 60_000, async () => (await sb.kubectl('c1', 'get', '-f', manifest, '--ignore-not-found', '-o', 'name')) === '');
    expect((await helm(['status', 'admiralty', '-n', 'admiralty'])).stderr).to.contain('not found');
    const crds = readdirSync(join(CHART, 'crds')).map((f) => `crd/${f.replace(/\.yaml$/, '')}.multicluster.admiralty.io`);
    expect((await sb.kubectl('c1', 'get', ...crds, '-o', 'name')).trim().split('\n')).to.have.length(crds.length);
    expect((await sb.kubectl('c1', 'get', 'namespace', 'admiralty', '-o', 'name')).trim()).to.equal('namespace/admiralty');
    // The chart README's command for those who want the CRDs gone too: it selects exactly the
    // chart's CRDs. Not waited for: once in a CI run the apiserver's cleanup of a CRD never
    // finished in this throwaway cluster (the waiting kubectl hung the suite), cause not found.
    const deleted = await sb.kubectl('c1', 'delete', 'crd', '-l', 'app.kubernetes.io/name=admiralty-ts', '--wait=false', '-o', 'name');
    expect(deleted.trim().split('\n').sort()).to.deep.equal(crds.map((c) => c.replace(/^crd\//, 'customresourcedefinition.apiextensions.k8s.io/')).sort());
  });

  it("leaves the suite's sandbox alone", () => {
    expect(suiteSandbox.isUp()).to.equal(true);
    expect(sb.dir).to.not.equal(suiteSandbox.dir);
  });
});
