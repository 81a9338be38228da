import { expect } from 'chai';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { HAS_FINALIZER_LABEL } from '../../provider/core/keys.js';
import { REPO_ROOT, Sandbox } from '../sandbox/sandbox.js';
import { CHART, docSection, inlineCommands, nudgingStuckCrds, sandbox as suiteSandbox, stdoutOf, userShell, waitFor, type ShellResult } from './support.js';

type Obj = any;

const GROUP = 'multicluster.admiralty.io';
/** A finalizer as Admiralty's webhook and follow controllers write them (`<prefix><ns>-<target>`). */
const ADMIRALTY_FINALIZER = `${GROUP}/app-c2`;

/** An Admiralty 0.17 CRD: structural schema, status subresource, nothing more (no validation, no defaults). */
function admiraltyCrd(kind: string, plural: string, scope: 'Namespaced' | 'Cluster', shortName: string, properties: Record<string, unknown>, extra: Record<string, unknown> = {}): Obj {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${GROUP}` },
    spec: {
      group: GROUP,
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase(), shortNames: [shortName] },
      scope,
      versions: [
        {
          name: 'v1alpha1',
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: { openAPIV3Schema: { type: 'object', properties: { apiVersion: { type: 'string' }, kind: { type: 'string' }, metadata: { type: 'object' }, ...properties } } },
          ...extra,
        },
      ],
    },
  };
}

const str = { type: 'string' };
const quantities = { type: 'object', additionalProperties: { anyOf: [{ type: 'integer' }, { type: 'string' }], 'x-kubernetes-int-or-string': true } };
const anything = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };

/**
 * A stand-in for Admiralty 0.17's chart, as far as the migration guide's steps care: its CRDs
 * (the four we share, ClusterSummary and PodChaperon) as templates, not in crds/, so that they
 * belong to the release; its agent's Deployment, Service and ServiceAccount; its webhook
 * configuration; the ClusterRoles it binds sources to and their binding to itself. Written here
 * from the shapes in Admiralty's sources (names, fields, finalizers, labels); Admiralty itself is
 * never fetched.
 */
function admiraltyChart(dir: string): void {
  mkdirSync(join(dir, 'templates', 'crds'), { recursive: true });
  writeFileSync(join(dir, 'Chart.yaml'), 'apiVersion: v2\nname: admiralty\nversion: 0.17.0\ndescription: a stand-in for Admiralty 0.17, for the migration guide test\n');
  const spec = (properties: Record<string, unknown>) => ({ spec: { type: 'object', properties }, status: { type: 'object' } });
  const secretRef = { name: str, key: str, context: str };
  const crds = [
    admiraltyCrd(
      'Target',
      'targets',
      'Namespaced',
      'tg',
      spec({ self: { type: 'boolean' }, kubeconfigSecret: { type: 'object', properties: secretRef }, excludedLabelsRegexp: { type: 'string', nullable: true } }),
    ),
    admiraltyCrd(
      'ClusterTarget',
      'clustertargets',
      'Cluster',
      'ctg',
      spec({ self: { type: 'boolean' }, kubeconfigSecret: { type: 'object', properties: { namespace: str, ...secretRef } }, excludedLabelsRegexp: { type: 'string', nullable: true } }),
    ),
    admiraltyCrd('Source', 'sources', 'Namespaced', 'src', spec({ userName: str, serviceAccountName: str })),
    admiraltyCrd('ClusterSource', 'clustersources', 'Cluster', 'csrc', spec({ userName: str, serviceAccount: { type: 'object', properties: { name: str, namespace: str } } })),
    admiraltyCrd('ClusterSummary', 'clustersummaries', 'Cluster', 'mcsum', { capacity: quantities, allocatable: quantities }),
    admiraltyCrd(
      'PodChaperon',
      'podchaperons',
      'Namespaced',
      'chap',
      { spec: anything, status: anything },
      {
        additionalPrinterColumns: [
          { name: 'reserved', type: 'string', jsonPath: `.metadata.annotations.multicluster\\.admiralty\\.io/is-reserved` },
          { name: 'allowed', type: 'string', jsonPath: `.metadata.annotations.multicluster\\.admiralty\\.io/is-allowed` },
        ],
      },
    ),
  ];
  // JSON is YAML, and has no `{{` for Helm to read as a template action.
  for (const crd of crds) writeFileSync(join(dir, 'templates', 'crds', `${crd.spec.names.plural}.yaml`), JSON.stringify(crd, null, 1));
  const labels = { 'app.kubernetes.io/name': 'admiralty', 'app.kubernetes.io/instance': 'admiralty', component: 'controller-manager' };
  const agent = [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'admiralty', namespace: 'admiralty' } },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'admiralty-controller-manager', namespace: 'admiralty', labels },
      spec: {
        replicas: 2,
        selector: { matchLabels: labels },
        template: { metadata: { labels }, spec: { serviceAccountName: 'admiralty', containers: [{ name: 'controller-manager', image: 'public.ecr.aws/admiralty/admiralty-agent:0.17.0' }] } },
      },
    },
    { apiVersion: 'v1', kind: 'Service', metadata: { name: 'admiralty-controller-manager', namespace: 'admiralty' }, spec: { selector: labels, ports: [{ port: 443, targetPort: 9443 }] } },
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: 'admiralty' },
      webhooks: [
        {
          name: 'admiralty.multicluster.admiralty.io',
          clientConfig: { service: { name: 'admiralty-controller-manager', namespace: 'admiralty', path: '/mutate-v1-pod' } },
          rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
          namespaceSelector: { matchLabels: { 'multicluster-scheduler': 'enabled' } },
          failurePolicy: 'Fail',
          sideEffects: 'None',
          admissionReviewVersions: ['v1'],
        },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'admiralty-source' },
      rules: [
        { apiGroups: [GROUP], resources: ['podchaperons'], verbs: ['get', 'list', 'watch', 'create', 'update', 'delete', 'deletecollection', 'patch'] },
        { apiGroups: [''], resources: ['pods'], verbs: ['list'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'admiralty-cluster-summary-viewer' },
      rules: [{ apiGroups: [GROUP], resources: ['clustersummaries'], verbs: ['get', 'list', 'watch'] }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'admiralty-source' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admiralty-source' },
      subjects: [{ kind: 'ServiceAccount', name: 'admiralty', namespace: 'admiralty' }],
    },
  ];
  writeFileSync(join(dir, 'templates', 'agent.yaml'), agent.map((o) => JSON.stringify(o, null, 1)).join('\n---\n'));
}

/** The numbered steps of the migration guide, by number. */
function guideSteps(): Map<number, string> {
  const guide = docSection('docs/migration.md', '## Migrating from Admiralty');
  const steps = guide.slice(guide.indexOf('**Steps, in every cluster**'));
  return new Map([...steps.matchAll(/\n(\d)\. ([\s\S]*?)(?=\n\d\. |\n\n\S|$)/g)].map((m) => [Number(m[1]), m[2]!]));
}

/**
 * The migration guide's steps, run as written against a bare cluster where a stand-in for
 * Admiralty 0.17's release is installed with Helm and holds objects as Admiralty leaves them:
 * what each step keeps, changes and removes. No provider runs (kwok fakes the pods), so step 4
 * is the Quick start's helm install without the binding replacement that migration.test.ts
 * checks against the suite's sandbox.
 */
describe("the migration guide's steps, against a stand-in for an Admiralty 0.17 release, in a cluster of its own", function () {
  this.timeout(180_000);
  const steps = guideSteps();
  let sb: Sandbox;
  let dir: string;
  let sh: (command: string) => Promise<ShellResult>;
  const stop = new AbortController();
  const run = async (command: string) => stdoutOf(await sh(command), command);
  const kubectl = (...args: string[]) => sb.kubectl('c1', ...args);
  const get = async (...args: string[]): Promise<Obj> => JSON.parse(await kubectl('get', ...args, '-o', 'json'));
  /** The objects written for Admiralty that must come through unchanged: kind, namespace, name, spec. */
  const kept: [string, string | undefined, string, Obj][] = [
    ['target', 'app', 'c2', { kubeconfigSecret: { name: 'c2', key: 'config', context: 'c2' }, excludedLabelsRegexp: '^topology\\.kubernetes\\.io/' }],
    ['target', 'app', 'c1', { self: true }],
    ['clustertarget', undefined, 'c2', { self: false, kubeconfigSecret: { namespace: 'app', name: 'c2', key: 'config', context: 'c2' } }],
    ['source', 'app', 'c1', { serviceAccountName: 'c1' }],
    ['clustersource', undefined, 'c1', { serviceAccount: { name: 'c1', namespace: 'app' } }],
  ];

  before(async function () {
    this.timeout(300_000);
    dir = mkdtempSync(join(tmpdir(), 'migration-sandbox-'));
    sb = new Sandbox(join(dir, 'sandbox'));
    await sb.up({ clusters: 1, provider: false, log: (l) => console.log(`      migration: ${l}`) });
    // The user's clone (the guide's `charts/admiralty/crds/`), and the stand-in chart.
    symlinkSync(join(REPO_ROOT, 'charts'), join(dir, 'charts'));
    admiraltyChart(join(dir, 'admiralty-0.17'));
    sh = userShell(sb, dir, { helm: true, signal: stop.signal });

    // Admiralty installed as its user guide says (release admiralty in namespace admiralty) ...
    await run('helm install admiralty ./admiralty-0.17 -n admiralty --create-namespace');
    await kubectl(
      'wait',
      '--for=condition=Established',
      '--timeout=30s',
      ...['targets', 'clustertargets', 'sources', 'clustersources', 'clustersummaries', 'podchaperons'].map((p) => `crd/${p}.${GROUP}`),
    );
    // ... and what it runs with: Targets, Sources and their ServiceAccount (owned by the Source, as
    // its source controller makes it), the cluster's summary, finalizers on a proxy pod being
    // deleted and on followed objects, a PodChaperon and its delegate pod, its virtual node; and
    // one of our virtual nodes, as step 4 makes them.
    await kubectl('create', 'namespace', 'app');
    const custom = (kind: string, ns: string | undefined, name: string, body: Obj) => ({ apiVersion: `${GROUP}/v1alpha1`, kind, metadata: { name, ...(ns ? { namespace: ns } : {}) }, ...body });
    const kinds: Record<string, string> = { target: 'Target', clustertarget: 'ClusterTarget', source: 'Source', clustersource: 'ClusterSource' };
    const admiraltyObjects: Obj[] = [
      ...kept.map(([kind, ns, name, spec]) => custom(kinds[kind]!, ns, name, { spec })),
      custom('ClusterSummary', undefined, 'singleton', { capacity: { cpu: '8', pods: '220' }, allocatable: { cpu: '7', pods: '220' } }),
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'proxy', namespace: 'app', labels: { [HAS_FINALIZER_LABEL]: 'true' }, finalizers: [ADMIRALTY_FINALIZER] },
        spec: { containers: [{ name: 'c', image: 'busybox' }] },
      },
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'followed', namespace: 'app', labels: { [HAS_FINALIZER_LABEL]: 'true' }, finalizers: [ADMIRALTY_FINALIZER, 'example.com/keep'] } },
      {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'Ingress',
        metadata: { name: 'global', namespace: 'app', labels: { [HAS_FINALIZER_LABEL]: 'true' }, annotations: { [`${GROUP}/global`]: 'true' }, finalizers: [ADMIRALTY_FINALIZER] },
        spec: { defaultBackend: { service: { name: 'web', port: { number: 80 } } } },
      },
      custom('PodChaperon', 'app', 'proxy-x7k2p', {
        metadata: { name: 'proxy-x7k2p', namespace: 'app', labels: { [`${GROUP}/parent-uid`]: '0d1e2f' } },
        spec: { containers: [{ name: 'c', image: 'busybox' }] },
      }),
      ...['admiralty-app-c2', 'admiralty-namespace-app-c2'].map((name) => ({
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name, labels: { 'virtual-kubelet.io/provider': 'admiralty', type: 'virtual-kubelet' } },
      })),
    ];
    await sb.applyYaml('c1', admiraltyObjects.map((o) => JSON.stringify(o)).join('\n---\n'));
    const source = await get('source', 'c1', '-n', 'app');
    await sb.applyYaml(
      'c1',
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: {
          name: 'c1',
          namespace: 'app',
          ownerReferences: [{ apiVersion: `${GROUP}/v1alpha1`, kind: 'Source', name: 'c1', uid: source.metadata.uid, controller: true, blockOwnerDeletion: true }],
        },
      }),
    );
    const chaperon = await get('podchaperon', 'proxy-x7k2p', '-n', 'app');
    await sb.applyYaml(
      'c1',
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: 'proxy-x7k2p',
          namespace: 'app',
          ownerReferences: [{ apiVersion: `${GROUP}/v1alpha1`, kind: 'PodChaperon', name: 'proxy-x7k2p', uid: chaperon.metadata.uid, controller: true, blockOwnerDeletion: true }],
        },
        spec: { containers: [{ name: 'c', image: 'busybox' }] },
      }),
    );
    await kubectl('delete', 'pod', 'proxy', '-n', 'app', '--wait=false');
  });

  after(async function () {
    this.timeout(120_000);
    stop.abort();
    await sb?.down();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Every object written for Admiralty is there with its fields. */
  const expectKept = async () => {
    for (const [kind, ns, name, spec] of kept) {
      const o = await get(kind, name, ...(ns ? ['-n', ns] : []));
      // Ours adds spec.placement (defaulted) to Targets once its schema is in (step 3).
      const rest = { ...o.spec };
      delete rest.placement;
      expect(rest, `${kind} ${name}`).to.deep.equal(spec);
    }
    expect((await get('clustersummary', 'singleton')).capacity).to.deep.equal({ cpu: '8', pods: '220' });
    expect((await get('serviceaccount', 'c1', '-n', 'app')).metadata.ownerReferences[0].kind).to.equal('Source');
  };

  it('step 1: deletes every object of the release but the CRDs, and Helm forgets the release; Targets, Sources and their ServiceAccount stay', async () => {
    const script = /```sh\n([\s\S]*?)```/.exec(steps.get(1) ?? '')?.[1];
    expect(script, 'step 1 has a sh block').to.be.a('string');
    expect(script).to.not.match(/\byq\b/);
    const release = await run('helm get manifest admiralty -n admiralty');
    writeFileSync(join(dir, 'admiralty-release.yaml'), release);
    await run(script!);

    const left = (await kubectl('get', '-f', join(dir, 'admiralty-release.yaml'), '--ignore-not-found', '-o', 'name')).trim().split('\n');
    expect(left.sort()).to.deep.equal(
      ['clustersources', 'clustersummaries', 'clustertargets', 'podchaperons', 'sources', 'targets'].map((p) => `customresourcedefinition.apiextensions.k8s.io/${p}.${GROUP}`),
    );
    for (const gone of ['deployment/admiralty-controller-manager', 'service/admiralty-controller-manager', 'serviceaccount/admiralty'])
      expect(await kubectl('get', gone, '-n', 'admiralty', '--ignore-not-found', '-o', 'name')).to.equal('');
    for (const gone of ['mutatingwebhookconfiguration/admiralty', 'clusterrole/admiralty-source', 'clusterrole/admiralty-cluster-summary-viewer', 'clusterrolebinding/admiralty-source'])
      expect(await kubectl('get', gone, '--ignore-not-found', '-o', 'name')).to.equal('');
    expect((await sh('helm status admiralty -n admiralty')).stderr).to.contain('not found');
    expect((await run('helm list -A -q')).trim()).to.equal('');
    await expectKept();
    expect((await get('podchaperons', '-n', 'app')).items).to.have.length(1);
  });

  it("step 2: `admiralty cleanup` strips Admiralty's finalizers from the proxy pod, the ConfigMap and the Ingress", async () => {
    expect(inlineCommands(steps.get(2) ?? '', 'admiralty')).to.deep.equal(['admiralty cleanup']);
    const out = await run('admiralty cleanup');
    expect(out).to.contain('removed 3 finalizer(s) from 3 object(s)');
    await waitFor('the proxy pod gone', 30_000, async () => (await kubectl('get', 'pod', 'proxy', '-n', 'app', '--ignore-not-found', '-o', 'name')) === '');
    expect((await get('configmap', 'followed', '-n', 'app')).metadata.finalizers).to.deep.equal(['example.com/keep']);
    const ingress = (await get('ingress', 'global', '-n', 'app')).metadata;
    expect(ingress.finalizers ?? []).to.deep.equal([]);
    expect(ingress.labels ?? {}).to.not.have.key(HAS_FINALIZER_LABEL);
  });

  it("step 3: our CRDs' schemas replace Admiralty's; stored objects keep their fields and take ours (spec.placement)", async () => {
    const [apply] = inlineCommands(steps.get(3) ?? '', 'kubectl');
    expect(apply).to.equal('kubectl apply --server-side --force-conflicts -f charts/admiralty/crds/');
    await run(apply!);
    for (const file of readdirSync(join(CHART, 'crds'))) {
      const ours = parse(readFileSync(join(CHART, 'crds', file), 'utf8'));
      const live = await get('crd', ours.metadata.name);
      expect(
        live.spec.versions.map((v: Obj) => v.schema),
        ours.metadata.name,
      ).to.deep.equal(ours.spec.versions.map((v: Obj) => v.schema));
      expect(live.spec.versions[0].additionalPrinterColumns, ours.metadata.name).to.deep.equal(ours.spec.versions[0].additionalPrinterColumns);
    }
    await expectKept();
    await kubectl('patch', 'target', 'c2', '-n', 'app', '--type=merge', '-p', '{"spec":{"placement":{"weight":3,"priority":1}}}');
    expect((await get('target', 'c2', '-n', 'app')).spec.placement).to.deep.equal({ weight: 3, priority: 1 });
  });

  it("step 4: the Quick start's helm install takes the release name back", async () => {
    const install = /```sh\n\s*(helm install [\s\S]*?)```/
      .exec(docSection('README.md', '## Quick start on real clusters'))![1]!
      .replace('<a name unique to this cluster>', 'c1')
      .replace('<registry>', 'registry.example');
    expect(steps.get(4)).to.contain('[Quick start](../README.md#quick-start-on-real-clusters)');
    await run(install);
    expect(JSON.parse(await run('helm status admiralty -n admiralty -o json')).info.status).to.equal('deployed');
    await expectKept();
  });

  it("step 5: Admiralty's virtual node, its PodChaperons (their pods with them) and their CRD go; ours stay", async () => {
    const [listNodes, deleteNode, deleteChaperons, nudgeCrd] = inlineCommands(steps.get(5) ?? '', 'kubectl');
    expect(listNodes).to.equal('kubectl get nodes -l virtual-kubelet.io/provider=admiralty');
    const listed = (await run(listNodes!))
      .trim()
      .split('\n')
      .slice(1)
      .map((l) => l.split(/\s+/)[0]!);
    expect(listed.sort()).to.deep.equal(['admiralty-app-c2', 'admiralty-namespace-app-c2']);
    const theirs = listed.filter((n) => !n.startsWith('admiralty-namespace-') && !n.startsWith('admiralty-cluster-'));
    expect(deleteNode).to.equal('kubectl delete node <name>');
    for (const name of theirs) await run(deleteNode!.replace('<name>', name));
    expect((await run(`${listNodes} -o name`)).trim()).to.equal('node/admiralty-namespace-app-c2');

    expect(deleteChaperons).to.equal(`kubectl delete podchaperons --all -A --cascade=foreground && kubectl delete crd podchaperons.${GROUP}`);
    expect(nudgeCrd).to.equal(`kubectl label crd podchaperons.${GROUP} multicluster.admiralty.io/uninstall=now --overwrite`);
    const report = await nudgingStuckCrds(
      run(deleteChaperons!),
      async () => {
        const crd = await kubectl('get', 'crd', `podchaperons.${GROUP}`, '--ignore-not-found', '-o', 'json');
        return crd.trim() ? [JSON.parse(crd)] : [];
      },
      () => run(nudgeCrd!),
    );
    if (report) console.log(`      ${report}`);
    // Foreground: the pod is gone by the time the command returns.
    expect(await kubectl('get', 'pod', 'proxy-x7k2p', '-n', 'app', '--ignore-not-found', '-o', 'name')).to.equal('');
    expect(await kubectl('get', 'crd', `podchaperons.${GROUP}`, '--ignore-not-found', '-o', 'name')).to.equal('');
    await expectKept();
  });

  it("leaves the suite's sandbox alone", () => {
    expect(suiteSandbox.isUp()).to.equal(true);
    expect(sb.dir).to.not.equal(suiteSandbox.dir);
  });
});
