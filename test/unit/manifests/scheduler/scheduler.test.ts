import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { packageRoot } from '../../../../provider/tools/package-root.js';
import { shippedSchedulerConfig } from '../../../../test/sandbox/proxy-scheduler-config.js';

/** The proxy scheduler as shipped in manifests/scheduler/: config, Deployment, RBAC, kustomizations. */
const dir = join(packageRoot(), 'manifests', 'scheduler');
const read = (...p: string[]) => readFileSync(join(dir, ...p), 'utf8');
const docs = (...p: string[]) => parseAllDocuments(read(...p)).map((d) => d.toJSON());

const SA = { kind: 'ServiceAccount', name: 'admiralty-proxy-scheduler', namespace: 'admiralty' };
const config = parse(shippedSchedulerConfig(read('config.yaml')));
const deployment = docs('deployment.yaml')[0];
const rbac = docs('rbac', 'roles.yaml');

describe('manifests/scheduler', () => {
  it('ships one profile, admiralty-proxy, leader-elected on Lease admiralty/admiralty-proxy-scheduler', () => {
    expect(config).to.include({ apiVersion: 'kubescheduler.config.k8s.io/v1', kind: 'KubeSchedulerConfiguration' });
    // Its own scoring off: the extender's placement policy alone ranks virtual nodes. NodePorts
    // off: the extender judges host ports per real node (a virtual node stands for several).
    // The volume and DRA plugins off: a proxy's claims are its target's, bound by the target's scheduler.
    const off = ['NodePorts', 'VolumeBinding', 'VolumeRestrictions', 'VolumeZone', 'NodeVolumeLimits', 'DynamicResources'].map((name) => ({ name }));
    expect(config.profiles).to.deep.equal([{ schedulerName: 'admiralty-proxy', plugins: { score: { disabled: [{ name: '*' }] }, multiPoint: { disabled: off } } }]);
    expect(config.leaderElection).to.deep.include({ leaderElect: true, resourceLock: 'leases', resourceNamespace: 'admiralty', resourceName: 'admiralty-proxy-scheduler' });
    expect(config.clientConnection?.kubeconfig, 'in-cluster credentials').to.equal(undefined);
  });

  it("calls the provider's extender for filter, prioritize, bind and preempt, over verified TLS, and never schedules without it", () => {
    expect(config.extenders).to.have.length(1);
    const [e] = config.extenders;
    expect(e).to.deep.include({
      urlPrefix: 'https://admiralty.admiralty.svc:443/scheduler',
      filterVerb: 'filter',
      prioritizeVerb: 'prioritize',
      bindVerb: 'bind',
      preemptVerb: 'preempt',
      weight: 1,
      enableHTTPS: true,
      httpTimeout: '30s',
      nodeCacheCapable: true,
      ignorable: false,
    });
    expect(e.tlsConfig).to.deep.equal({
      serverName: 'admiralty.admiralty.svc',
      caFile: '/etc/admiralty-proxy-scheduler/ca.crt',
      // Files, so that client-go reloads a renewed certificate (data would be read once).
      certFile: '/etc/admiralty-proxy-scheduler/client.crt',
      keyFile: '/etc/admiralty-proxy-scheduler/client.key',
    });
    expect(e.managedResources, 'consulted for every pod').to.equal(undefined);
  });

  it('mounts the config, the provider CA and the client certificate where the config says, from the shipped ConfigMap and the provider Secrets', () => {
    const spec = deployment.spec.template.spec;
    const [c] = spec.containers;
    expect(c.image).to.equal(`registry.k8s.io/kube-scheduler:${readFileSync(join(packageRoot(), 'test', 'sandbox', 'build.sh'), 'utf8').match(/K8S=(v[\d.]+)/)![1]}`);
    const mount = c.volumeMounts.find((m: { name: string }) => m.name === 'config');
    expect(c.args).to.deep.equal([`--config=${mount.mountPath}/config.yaml`]);
    expect(config.extenders[0].tlsConfig.caFile).to.equal(`${mount.mountPath}/ca.crt`);
    const sources = spec.volumes.find((v: { name: string }) => v.name === 'config').projected.sources;
    expect(sources).to.deep.include({ configMap: { name: docs('config.yaml')[0].metadata.name, items: [{ key: 'config.yaml', path: 'config.yaml' }] } });
    expect(sources).to.deep.include({ secret: { name: 'admiralty-webhook-cert', items: [{ key: 'ca.crt', path: 'ca.crt' }] } });
    expect(config.extenders[0].tlsConfig.certFile).to.equal(`${mount.mountPath}/client.crt`);
    expect(config.extenders[0].tlsConfig.keyFile).to.equal(`${mount.mountPath}/client.key`);
    expect(sources).to.deep.include({
      secret: { name: 'admiralty-proxy-scheduler-client', items: [{ key: 'tls.crt', path: 'client.crt' }, { key: 'tls.key', path: 'client.key' }] },
    });
    // No subPath: files mounted with one are never updated, and a renewal would not reach the scheduler.
    expect(mount.subPath).to.equal(undefined);
  });

  it('runs two replicas as ServiceAccount admiralty-proxy-scheduler, non-root, probed on the secure port', () => {
    expect(deployment.metadata).to.include({ name: 'admiralty-proxy-scheduler', namespace: 'admiralty' });
    expect(deployment.spec.replicas).to.equal(2);
    const spec = deployment.spec.template.spec;
    expect(spec.serviceAccountName).to.equal(SA.name);
    expect(spec.securityContext).to.include({ runAsNonRoot: true });
    const [c] = spec.containers;
    expect(c.securityContext).to.deep.include({ runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    expect(c.livenessProbe.httpGet).to.deep.include({ path: '/healthz', port: 'https', scheme: 'HTTPS' });
    expect(c.readinessProbe.httpGet).to.deep.include({ path: '/readyz', port: 'https', scheme: 'HTTPS' });
    expect(c.ports).to.deep.include({ name: 'https', containerPort: 10259, protocol: 'TCP' });
  });

  it('binds exactly the roles a stock kube-scheduler needs to the ServiceAccount it runs as', () => {
    const [sa] = docs('rbac', 'service-account.yaml');
    expect({ kind: sa.kind, name: sa.metadata.name, namespace: sa.metadata.namespace }).to.deep.equal(SA);
    const bindings = rbac.filter((o) => o.kind.endsWith('Binding'));
    for (const b of bindings) expect(b.subjects, `${b.kind} ${b.metadata.name}`).to.deep.equal([SA]);
    const refs = bindings.map((b) => `${b.kind} ${b.metadata.namespace ?? ''}/${b.roleRef.kind} ${b.roleRef.name}`).sort();
    expect(refs).to.deep.equal([
      'ClusterRoleBinding /ClusterRole admiralty-proxy-scheduler-storage-classes',
      'ClusterRoleBinding /ClusterRole system:kube-scheduler',
      'RoleBinding admiralty/Role admiralty-proxy-scheduler',
      'RoleBinding kube-system/Role extension-apiserver-authentication-reader',
    ]);
  });

  it('lets it read StorageClasses, and write no volume or claim', () => {
    const role = rbac.find((o) => o.kind === 'ClusterRole' && o.metadata.name === 'admiralty-proxy-scheduler-storage-classes');
    expect(role.rules).to.deep.equal([{ apiGroups: ['storage.k8s.io'], resources: ['storageclasses'], verbs: ['get', 'list', 'watch'] }]);
  });

  it('lets it renew its own Lease only (create cannot be restricted by name)', () => {
    const role = rbac.find((o) => o.kind === 'Role' && o.metadata.name === 'admiralty-proxy-scheduler');
    expect(role.metadata.namespace).to.equal(config.leaderElection.resourceNamespace);
    expect(role.rules).to.deep.equal([
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: [config.leaderElection.resourceName], verbs: ['get', 'update'] },
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
    ]);
  });

  it('is part of the full install, and its RBAC only (no Deployment) stands alone for the sandbox', () => {
    expect(parse(readFileSync(join(packageRoot(), 'manifests', 'kustomization.yaml'), 'utf8')).resources).to.include('scheduler');
    expect(parse(read('kustomization.yaml')).resources).to.deep.equal(['rbac', 'config.yaml', 'deployment.yaml']);
    expect(parse(read('rbac', 'kustomization.yaml')).resources).to.deep.equal(['service-account.yaml', 'roles.yaml']);
    expect(parse(readFileSync(join(packageRoot(), 'manifests', 'sandbox', 'kustomization.yaml'), 'utf8')).resources.join(' ')).not.to.include('scheduler');
  });
});
