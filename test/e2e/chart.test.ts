import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { parseConfig } from '../../provider/core/config.js';
import { REPO_ROOT } from '../sandbox/sandbox.js';
import { CHART, chartObjects as objects, helmPath, helmTemplate as template, kubectl, kubectlStdin, sandbox, uniqueName } from './support.js';

const run = promisify(execFile);

type Obj = any;

/** Every value of the chart set away from its default, each to something its test can see. */
const NON_DEFAULT = [
  'sourceController.enabled=false',
  'image.repository=registry.example/admiralty',
  'image.tag=9.9.9',
  'image.pullPolicy=Always',
  'imagePullSecrets[0].name=pull',
  'replicaCount=3',
  'sharding.enabled=true',
  'resources.requests.cpu=250m',
  'nodeSelector.pool=system',
  'tolerations[0].key=dedicated',
  'tolerations[0].operator=Exists',
  'affinity=null',
  'podSecurityContext.runAsUser=1001',
  'securityContext.runAsUser=1001',
  'debug=true',
  'extraArgs={--target-cache-budget-mib=256,--summary-renew-interval-seconds=60,--log-level=warn}',
  'webhook.failurePolicy=Ignore',
  'proxyScheduler.enabled=false',
  'providerConfinement.enabled=false',
];

describe('Helm chart (charts/admiralty)', function () {
  this.timeout(300_000);
  let helm: string;
  before(function () {
    // A cold build of helm (cached by version, as the control plane) takes about 2 minutes.
    helm = helmPath();
  });

  const helmRun = async (...args: string[]) => (await run(helm, args, { maxBuffer: 64 << 20 })).stdout;
  const find = (objs: Obj[], kind: string, name: string): Obj => objs.find((o) => o.kind === kind && o.metadata.name === name);
  const podSpecs = (objs: Obj[]): Obj[] => objs.filter((o) => o.kind === 'Deployment' || o.kind === 'Job').map((o) => o.spec.template.spec);
  const provider = (objs: Obj[]): Obj => find(objs, 'Deployment', 'admiralty').spec.template.spec.containers[0];

  it('lints (strict)', async () => {
    const out = await helmRun('lint', '--strict', CHART, '--set', 'clusterName=c1');
    expect(out).to.contain('1 chart(s) linted, 0 chart(s) failed');
  });

  it('is what manifests/ holds: the kustomize install is rendered from the chart', async () => {
    // Exit 1 with a diff when a file differs, is missing, or is left over.
    const { stdout } = await run('bash', [join(REPO_ROOT, 'charts', 'render-manifests.sh'), '--check'], { maxBuffer: 16 << 20 }).catch((e) => {
      throw new Error(`manifests/ is not what the chart renders:\n${e.stdout}${e.stderr}`);
    });
    expect(stdout).to.equal('');
  });

  for (const [what, sets] of [
    ['its defaults', ['clusterName=c1']],
    ['every value changed', ['clusterName=c1', ...NON_DEFAULT]],
  ] as const) {
    it(`applies server-side (dry run) in the sandbox with ${what}, CRDs and post-delete hook included`, async () => {
      const rendered = await template(...sets);
      const out = await kubectlStdin('c1', rendered, 'apply', '--dry-run=server', '-f', '-');
      expect(out.code, out.stderr).to.equal(0);
      // One line per object, each accepted.
      expect(out.stdout.trim().split('\n')).to.have.length((await objects(...sets)).length);
      expect(out.stdout).to.contain('job.batch/admiralty-cleanup').and.contain('customresourcedefinition.apiextensions.k8s.io/targets.multicluster.admiralty.io');
    });
  }

  it('runs the provider with flags its own configuration accepts, with defaults and with every value changed', async () => {
    for (const sets of [['clusterName=c1'], ['clusterName=c1', ...NON_DEFAULT]]) {
      const c = provider(await objects(...sets));
      // The kubelet expands $(VAR) in args from the container's env.
      const env = { CLUSTER_NAME: 'c1', POD_NAMESPACE: 'admiralty', POD_NAME: 'admiralty-0', POD_IP: '10.0.0.7' };
      const args = (c.args as string[]).slice(1).map((a) => a.replace(/\$\((\w+)\)/g, (_, v: keyof typeof env) => env[v]));
      expect(c.args[0]).to.equal('provider');
      const parsed = parseConfig(args, env);
      expect(parsed.ok, JSON.stringify(parsed)).to.equal(true);
    }
  });

  it('wires every value', async () => {
    const d = await objects('clusterName=c1');
    const n = await objects('clusterName=c1', ...NON_DEFAULT);
    const cfg = (objs: Obj[]) => {
      const parsed = parseConfig(
        provider(objs)
          .args.slice(1)
          .map((a: string) => a.replace('$(CLUSTER_NAME)', 'c1').replace('$(POD_IP)', '10.0.0.7')),
        {},
      );
      if (!parsed.ok) throw new Error(parsed.errors.join('; '));
      return parsed.config;
    };
    // clusterName
    expect(find(d, 'ConfigMap', 'admiralty-config').data.clusterName).to.equal('c1');
    // sourceController.enabled: the sources component and its RBAC
    const targetRules = (objs: Obj[]) => find(objs, 'ClusterRole', 'admiralty-provider-target').rules.flatMap((r: Obj) => r.resources);
    expect(cfg(d).enable).to.include('sources');
    expect(targetRules(d)).to.include.members(['sources', 'clustersources', 'serviceaccounts', 'rolebindings', 'clusterrolebindings', 'clusterroles']);
    expect(cfg(n).enable).to.not.include('sources');
    expect(targetRules(n)).to.deep.equal(['nodes', 'pods', 'runtimeclasses', 'priorityclasses', 'clustersummaries']);
    // image.*: the provider and the post-delete cleanup run the same image
    expect(provider(d).image).to.equal(`ghcr.io/example/admiralty-ts:${JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).version}`);
    const job = (objs: Obj[]) => find(objs, 'Job', 'admiralty-cleanup').spec.template.spec.containers[0];
    for (const c of [provider(n), job(n)]) expect(c).to.include({ image: 'registry.example/admiralty:9.9.9', imagePullPolicy: 'Always' });
    expect(job(n).args).to.deep.equal(['cleanup']);
    expect(find(d, 'Job', 'admiralty-cleanup').metadata.annotations['helm.sh/hook']).to.equal('post-delete');
    // imagePullSecrets, nodeSelector, tolerations, podSecurityContext, securityContext: every pod
    for (const spec of podSpecs(n)) {
      expect(spec.imagePullSecrets).to.deep.equal([{ name: 'pull' }]);
      expect(spec.nodeSelector).to.deep.equal({ pool: 'system' });
      expect(spec.tolerations).to.deep.equal([{ key: 'dedicated', operator: 'Exists' }]);
      expect(spec.securityContext.runAsUser).to.equal(1001);
      expect(spec.containers[0].securityContext.runAsUser).to.equal(1001);
    }
    for (const spec of podSpecs(d)) expect(spec).to.not.have.any.keys('imagePullSecrets', 'nodeSelector', 'tolerations');
    // replicaCount, resources, affinity: the provider
    expect(find(d, 'Deployment', 'admiralty').spec.replicas).to.equal(2);
    expect(find(n, 'Deployment', 'admiralty').spec.replicas).to.equal(3);
    expect(provider(n).resources.requests.cpu).to.equal('250m');
    expect(find(d, 'Deployment', 'admiralty').spec.template.spec.affinity.podAntiAffinity).to.be.an('object');
    expect(find(n, 'Deployment', 'admiralty').spec.template.spec).to.not.have.key('affinity');
    // sharding.enabled
    expect(cfg(d).shardTargets).to.equal(false);
    expect(cfg(n).shardTargets).to.equal(true);
    // debug (and extraArgs after it: the last of a flag given twice wins)
    expect(cfg(d).logLevel).to.equal('info');
    expect(cfg(await objects('clusterName=c1', 'debug=true')).logLevel).to.equal('debug');
    // extraArgs
    expect(cfg(d)).to.include({ targetCacheBudgetMib: 128, summaryRenewIntervalSeconds: 30 });
    expect(cfg(n)).to.include({ targetCacheBudgetMib: 256, summaryRenewIntervalSeconds: 60, logLevel: 'warn' });
    // webhook.failurePolicy
    expect(find(d, 'MutatingWebhookConfiguration', 'admiralty').webhooks[0].failurePolicy).to.equal('Fail');
    expect(find(n, 'MutatingWebhookConfiguration', 'admiralty').webhooks[0].failurePolicy).to.equal('Ignore');
    // providerConfinement.enabled: the provider's admission policies and their bindings
    const confinement = (objs: Obj[]) => objs.filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy') && o.metadata.name.startsWith('admiralty-provider-')).length;
    expect(confinement(d)).to.equal(8);
    expect(confinement(n)).to.equal(0);
    // proxyScheduler.*: its Deployment, config and RBAC, the extender, the provider's scheduler name
    const schedulerObjects = (objs: Obj[]) => objs.filter((o) => o.metadata.name.startsWith('admiralty-proxy-scheduler')).map((o) => `${o.kind}/${o.metadata.name}`);
    expect(schedulerObjects(d)).to.have.members([
      'ServiceAccount/admiralty-proxy-scheduler',
      'ConfigMap/admiralty-proxy-scheduler',
      'ClusterRoleBinding/admiralty-proxy-scheduler',
      'ClusterRole/admiralty-proxy-scheduler-storage-classes',
      'ClusterRoleBinding/admiralty-proxy-scheduler-storage-classes',
      'Role/admiralty-proxy-scheduler',
      'RoleBinding/admiralty-proxy-scheduler',
      'RoleBinding/admiralty-proxy-scheduler-authentication-reader',
      'Deployment/admiralty-proxy-scheduler',
    ]);
    expect(find(d, 'Deployment', 'admiralty-proxy-scheduler').spec.template.spec.containers[0].image).to.equal('registry.k8s.io/kube-scheduler:v1.36.3');
    expect(find(await objects('clusterName=c1', 'proxyScheduler.image.tag=v1.31.0'), 'Deployment', 'admiralty-proxy-scheduler').spec.template.spec.containers[0].image).to.equal(
      'registry.k8s.io/kube-scheduler:v1.31.0',
    );
    expect(cfg(d)).to.include({ proxySchedulerName: 'admiralty-proxy' });
    expect(cfg(d).enable).to.include('extender');
    expect(schedulerObjects(n)).to.deep.equal([]);
    expect(cfg(n)).to.include({ proxySchedulerName: '' });
    expect(cfg(n).enable).to.not.include('extender');
  });

  it('renders the HA example (examples/values-ha.yaml) as 3 replicas writing their shares of the targets', async () => {
    const out = await helmRun('template', 'admiralty', CHART, '--namespace', 'admiralty', '-f', join(CHART, 'examples', 'values-ha.yaml'), '--set', 'clusterName=c1');
    const objs = parseAllDocuments(out)
      .map((d) => d.toJSON())
      .filter(Boolean);
    expect(find(objs, 'Deployment', 'admiralty').spec.replicas).to.equal(3);
    expect(provider(objs).args).to.include('--shard-targets=true');
  });

  it('installs into the release namespace', async () => {
    const other = parseAllDocuments(await helmRun('template', 'admiralty', CHART, '--namespace', 'multicluster', '--set', 'clusterName=c1'))
      .map((x) => x.toJS() as Obj)
      .filter(Boolean);
    const namespaced = other.filter((o) => o.metadata.namespace && !['kube-system', 'kube-node-lease'].includes(o.metadata.namespace));
    expect(namespaced.map((o) => o.metadata.namespace)).to.satisfy((ns: string[]) => ns.every((x) => x === 'multicluster'));
    expect(find(other, 'MutatingWebhookConfiguration', 'admiralty').webhooks[0].clientConfig.service.namespace).to.equal('multicluster');
    expect(find(other, 'ConfigMap', 'admiralty-proxy-scheduler').data['config.yaml']).to.contain('https://admiralty.multicluster.svc:443/scheduler');
    const subjects = other.filter((o) => o.subjects).flatMap((o) => o.subjects);
    expect(subjects.map((s: Obj) => s.namespace)).to.satisfy((ns: string[]) => ns.every((x) => x === 'multicluster'));
  });

  it('refuses a render without clusterName, and values outside its schema', async () => {
    const refusal = (...args: string[]) =>
      helmRun('template', 'admiralty', CHART, ...args).then(
        () => '',
        (e) => String(e.stderr),
      );
    expect(await refusal()).to.contain('clusterName is required');
    expect(await refusal('--set', 'clusterName=c1', '--set', 'webhook.failurePolicy=Sometimes')).to.contain('failurePolicy');
    expect(await refusal('--set', 'clusterName=c1', '--set', 'proxyScheduler.enbled=false')).to.contain('enbled');
    expect(await refusal('--set', 'clusterName=Not_A_Name')).to.contain('clusterName');
    // Flags only: a value that is not one would be a command-line argument the provider refuses.
    expect(await refusal('--set', 'clusterName=c1', '--set', 'extraArgs={target-cache-budget-mib=256}')).to.contain('extraArgs');
  });

  it("lets the post-delete hook's ServiceAccount strip finalizers everywhere, as `admiralty cleanup` does", async () => {
    // The hook's ServiceAccount and RBAC, created for real; the Job's command run with its token.
    const hookRbac = (await objects('clusterName=c1')).filter((o) => o.metadata.annotations?.['helm.sh/hook'] === 'post-delete' && o.kind !== 'Job');
    const yaml = hookRbac.map((o) => JSON.stringify(o)).join('\n---\n');
    const ns = uniqueName('chart-cleanup');
    const dir = mkdtempSync(join(tmpdir(), 'chart-cleanup-'));
    try {
      expect((await kubectlStdin('c1', yaml, 'apply', '-f', '-')).code).to.equal(0);
      await kubectl('c1', 'create', 'namespace', ns);
      await kubectlStdin('c1', JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'held', namespace: ns, finalizers: ['multicluster.admiralty.io/test'] } }), 'apply', '-f', '-');
      const token = (await kubectl('c1', 'create', 'token', 'admiralty-cleanup', '-n', 'admiralty', '--duration=10m')).trim();
      const kubeconfig = join(dir, 'kubeconfig');
      const server = `https://127.0.0.1:${sandbox.ports('c1').apiserver}`;
      const ca = readFileSync(join(sandbox.dir, 'pki', 'ca.crt')).toString('base64');
      writeFileSync(
        kubeconfig,
        `apiVersion: v1\nkind: Config\nclusters: [{name: c1, cluster: {server: "${server}", certificate-authority-data: ${ca}}}]\nusers: [{name: u, user: {token: ${token}}}]\ncontexts: [{name: c1, context: {cluster: c1, user: u}}]\ncurrent-context: c1\n`,
      );
      const cli = (...args: string[]) => run(process.execPath, [join(REPO_ROOT, 'bin', 'admiralty.js'), 'cleanup', '--kubeconfig', kubeconfig, ...args]);
      // Every namespace, in a dry run (the sandbox's own proxies keep their finalizers): the
      // server authorizes a dry-run patch as a real one.
      const all = await cli('--dry-run');
      expect(all.stdout).to.contain(`configmap ${ns}/held: would remove multicluster.admiralty.io/test`);
      expect(all.stdout).to.not.match(/FAILED|skipped/);
      await cli('-n', ns);
      expect(JSON.parse(await kubectl('c1', 'get', 'configmap', 'held', '-n', ns, '-o', 'json')).metadata.finalizers).to.equal(undefined);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await kubectlStdin('c1', yaml, 'delete', '--ignore-not-found', '-f', '-');
      await kubectl('c1', 'delete', 'namespace', ns, '--ignore-not-found', '--wait=false');
    }
  });
});
