import { expect } from 'chai';
import { CoreV1Api, CustomObjectsApi, KubeConfig, type V1Secret } from '@kubernetes/client-node';
import { createTargetClient, displayName, kubeConfigFromSecret, parseTargetKey, targetKey } from '../../../../provider/clusters/target-client.js';
import { ServerAddressPolicy } from '../../../../provider/clusters/server-address-policy.js';
import { KubeconfigError } from '../../../../provider/clusters/target-kubeconfig.js';
import type { TargetRef } from '../../../../provider/model/types.js';

const REF = { secretName: 'c2-kubeconfig', secretNamespace: 'default' };
const POLICY = new ServerAddressPolicy({ allowLoopback: false, ownAddresses: [] });

/** A kubeconfig with two contexts: `east` (current) -> https://east.example:6443, `west` -> `westServer`. */
function kubeconfigYaml(opts: { westServer?: string; token?: string; current?: string } = {}): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: east',
    '  cluster:',
    '    server: https://east.example:6443',
    '- name: west',
    '  cluster:',
    `    server: ${opts.westServer ?? 'https://west.example:6443'}`,
    'users:',
    '- name: admin',
    '  user:',
    `    token: ${opts.token ?? 'secret-token'}`,
    'contexts:',
    '- name: east',
    '  context: { cluster: east, user: admin }',
    '- name: west',
    '  context: { cluster: west, user: admin }',
    `current-context: ${opts.current ?? 'east'}`,
    '',
  ].join('\n');
}

function secret(data: Record<string, string>): V1Secret {
  const encoded: Record<string, string> = {};
  for (const [k, v] of Object.entries(data)) encoded[k] = Buffer.from(v, 'utf8').toString('base64');
  return { metadata: { name: REF.secretName, namespace: REF.secretNamespace }, data: encoded };
}

function failure(fn: () => unknown): KubeconfigError {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(KubeconfigError);
    return err as KubeconfigError;
  }
  expect.fail('expected a KubeconfigError');
}

describe('kubeConfigFromSecret', () => {
  const invalid: { why: string; secret: V1Secret | undefined; ref?: Partial<Parameters<typeof kubeConfigFromSecret>[1]>; reason: string; message: RegExp }[] = [
    { why: 'a missing Secret', secret: undefined, reason: 'SecretNotFound', message: /^Secret default\/c2-kubeconfig does not exist$/ },
    {
      why: 'a missing default key, listing the keys present',
      secret: secret({ kubeconfig: kubeconfigYaml(), other: 'x' }),
      reason: 'SecretKeyMissing',
      message: /has no key "config" \(it has: kubeconfig, other\)/,
    },
    {
      why: 'a missing custom key',
      secret: secret({ config: kubeconfigYaml() }),
      ref: { key: 'value' },
      reason: 'SecretKeyMissing',
      message: /has no key "value" \(it has: config\)/,
    },
    { why: 'a Secret without data', secret: { metadata: { name: 'x' } }, reason: 'SecretKeyMissing', message: /has no key "config"$/ },
    { why: 'YAML garbage', secret: secret({ config: ': : :\n  - [' }), reason: 'KubeconfigInvalid', message: /key "config": the kubeconfig is not valid YAML/ },
    { why: 'an empty kubeconfig', secret: secret({ config: '' }), reason: 'KubeconfigInvalid', message: /not a kubeconfig \(expected a mapping\)/ },
    { why: 'a plain string', secret: secret({ config: 'hello' }), reason: 'KubeconfigInvalid', message: /not a kubeconfig \(expected a mapping\)/ },
    { why: 'an unknown context', secret: secret({ config: kubeconfigYaml() }), ref: { context: 'north' }, reason: 'KubeconfigInvalid', message: /context "north" not found/ },
    {
      why: 'a current context that does not exist',
      secret: secret({ config: kubeconfigYaml({ current: 'nowhere' }) }),
      reason: 'KubeconfigInvalid',
      message: /context "nowhere" not found/,
    },
    {
      why: 'a server without a scheme',
      secret: secret({ config: kubeconfigYaml({ westServer: 'west.example:6443' }) }),
      ref: { context: 'west' },
      reason: 'KubeconfigInvalid',
      message: /cluster "west": server must be an https URL, not west.example/,
    },
    {
      why: 'a server with another scheme',
      secret: secret({ config: kubeconfigYaml({ westServer: 'ftp://west.example' }) }),
      ref: { context: 'west' },
      reason: 'KubeconfigInvalid',
      message: /cluster "west": server must be an https URL, not ftp/,
    },
  ];
  for (const c of invalid) {
    it(`rejects ${c.why} with ${c.reason}`, () => {
      const err = failure(() => kubeConfigFromSecret(c.secret, { ...REF, ...c.ref }, POLICY));
      expect(err.reason).to.equal(c.reason);
      expect(err.message).to.match(c.message);
      expect(err.name).to.equal('KubeconfigError');
    });
  }

  const valid: { why: string; data: Record<string, string>; ref?: Partial<Parameters<typeof kubeConfigFromSecret>[1]>; server: string; context: string }[] = [
    { why: 'the current context under the default key', data: { config: kubeconfigYaml() }, server: 'https://east.example:6443', context: 'east' },
    { why: 'a custom key', data: { value: kubeconfigYaml() }, ref: { key: 'value' }, server: 'https://east.example:6443', context: 'east' },
    { why: 'a named context', data: { config: kubeconfigYaml() }, ref: { context: 'west' }, server: 'https://west.example:6443', context: 'west' },
  ];
  for (const c of valid) {
    it(`accepts ${c.why}`, () => {
      const { kubeConfig, fingerprint } = kubeConfigFromSecret(secret(c.data), { ...REF, ...c.ref }, POLICY);
      expect(kubeConfig).to.be.instanceOf(KubeConfig);
      expect(kubeConfig.getCurrentContext()).to.equal(c.context);
      expect(kubeConfig.getCurrentCluster()?.server).to.equal(c.server);
      expect(kubeConfig.getCurrentUser()?.token).to.equal('secret-token');
      expect(fingerprint).to.match(/^[0-9a-f]{16}$/);
    });
  }

  describe('fingerprint', () => {
    const fp = (data: Record<string, string>, ref: Partial<Parameters<typeof kubeConfigFromSecret>[1]> = {}) => kubeConfigFromSecret(secret(data), { ...REF, ...ref }, POLICY).fingerprint;
    const base = fp({ config: kubeconfigYaml() });

    it('is stable for the same content and context', () => {
      expect(fp({ config: kubeconfigYaml() })).to.equal(base);
      expect(fp({ config: kubeconfigYaml(), unrelated: 'x' })).to.equal(base);
      expect(fp({ config: kubeconfigYaml() }, { context: 'west' })).to.equal(fp({ config: kubeconfigYaml() }, { context: 'west' }));
    });
    it('changes when the content changes', () => {
      expect(fp({ config: kubeconfigYaml({ token: 'rotated' }) })).to.not.equal(base);
    });
    it('changes when the context changes', () => {
      const west = fp({ config: kubeconfigYaml() }, { context: 'west' });
      const east = fp({ config: kubeconfigYaml() }, { context: 'east' });
      expect(west).to.not.equal(base);
      expect(west).to.not.equal(east);
    });
  });
});

describe('targetKey / parseTargetKey', () => {
  const refs: [string, TargetRef, string][] = [
    ['Target/default/c2', { kind: 'Target', namespace: 'default', name: 'c2' }, 'default/c2'],
    ['Target/team-a/eu-west-1', { kind: 'Target', namespace: 'team-a', name: 'eu-west-1' }, 'team-a/eu-west-1'],
    ['ClusterTarget/c3', { kind: 'ClusterTarget', namespace: '', name: 'c3' }, 'c3'],
  ];
  for (const [key, ref, display] of refs) {
    it(`round-trips ${key}`, () => {
      expect(targetKey(ref)).to.equal(key);
      expect(parseTargetKey(key)).to.deep.equal(ref);
      expect(displayName(ref)).to.equal(display);
    });
  }

  it('ignores the namespace of a ClusterTarget ref', () => {
    expect(targetKey({ kind: 'ClusterTarget', namespace: 'ignored', name: 'c3' })).to.equal('ClusterTarget/c3');
  });

  const bad = ['', 'Target', 'Target/default', 'Target/a/b/c', 'ClusterTarget', 'ClusterTarget/a/b', 'Source/default/c2', 'target/default/c2', 'Node/x'];
  for (const key of bad) {
    it(`rejects ${JSON.stringify(key)}`, () => {
      expect(() => parseTargetKey(key)).to.throw(`not a target key: ${key}`);
    });
  }
});

describe('createTargetClient', () => {
  it('builds the clients of one target from its own KubeConfig', () => {
    const kc = kubeConfigFromSecret(secret({ config: kubeconfigYaml() }), REF, POLICY);
    const ref: TargetRef = { kind: 'Target', namespace: 'default', name: 'c2' };
    const client = createTargetClient(ref, kc.kubeConfig, kc.fingerprint, false);
    expect(client).to.deep.include({ key: 'Target/default/c2', ref, displayName: 'default/c2', fingerprint: kc.fingerprint, self: false });
    expect(client.kubeConfig).to.equal(kc.kubeConfig);
    expect(client.core).to.be.instanceOf(CoreV1Api);
    expect(client.custom).to.be.instanceOf(CustomObjectsApi);
  });
});
