import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { packageRoot } from '../../../provider/tools/package-root.js';
import { outOfClusterSchedulerConfig, shippedSchedulerConfig } from '../../../test/sandbox/proxy-scheduler-config.js';

const shipped = shippedSchedulerConfig(readFileSync(join(packageRoot(), 'manifests', 'scheduler', 'config.yaml'), 'utf8'));
const opts = {
  webhookOrigin: 'https://127.0.0.1:11007',
  serverName: '127.0.0.1',
  caFile: '/sandbox/c1/proxy-scheduler/ca.crt',
  certFile: '/sandbox/c1/proxy-scheduler/client.crt',
  keyFile: '/sandbox/c1/proxy-scheduler/client.key',
  kubeconfig: '/sandbox/c1/proxy-scheduler/kubeconfig',
};

describe('sandbox proxy scheduler config', () => {
  it('is the shipped config but for the extender address, its TLS name, CA and client certificate, and the kubeconfig', () => {
    const want = parse(shipped);
    const got = parse(outOfClusterSchedulerConfig(shipped, opts));
    // The only differences, one by one; then the rest must be equal.
    expect(got.extenders[0].urlPrefix).to.equal('https://127.0.0.1:11007/scheduler');
    expect(got.extenders[0].tlsConfig).to.deep.equal({ serverName: '127.0.0.1', caFile: opts.caFile, certFile: opts.certFile, keyFile: opts.keyFile });
    expect(got.clientConnection).to.deep.equal({ kubeconfig: opts.kubeconfig });
    want.extenders[0].urlPrefix = got.extenders[0].urlPrefix;
    want.extenders[0].tlsConfig = got.extenders[0].tlsConfig;
    want.clientConnection = got.clientConnection;
    expect(got).to.deep.equal(want);
  });

  it('keeps leader election on, with the shipped Lease', () => {
    const got = parse(outOfClusterSchedulerConfig(shipped, opts));
    expect(got.leaderElection).to.deep.equal(parse(shipped).leaderElection);
    expect(got.leaderElection.leaderElect).to.equal(true);
  });

  it('refuses a config without exactly one extender, and a file that is not the shipped ConfigMap', () => {
    expect(() => outOfClusterSchedulerConfig('apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n', opts)).to.throw(/exactly one extender/);
    expect(() => shippedSchedulerConfig('apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\ndata: {config.yaml: x}\n')).to.throw(/admiralty-proxy-scheduler/);
  });
});
