import { expect } from 'chai';
import type { V1PodSpec } from '@kubernetes/client-node';
import { referencedNames, serviceAccountTokenVolumeNames, withCopyNames, type CopyNames } from '../../../../provider/model/pod-references.js';

const SA_PATH = '/var/run/secrets/kubernetes.io/serviceaccount';

const spec: V1PodSpec = {
  serviceAccountName: 'default',
  imagePullSecrets: [{ name: 'regcred' }, { name: 'regcred' }],
  volumes: [
    { name: 'cm', configMap: { name: 'cm-vol' } },
    { name: 's', secret: { secretName: 'secret-vol' } },
    { name: 'proj', projected: { sources: [{ configMap: { name: 'cm-proj' } }, { secret: { name: 'secret-proj' } }] } },
    { name: 'csi', csi: { driver: 'x', nodePublishSecretRef: { name: 'secret-csi' } } },
    {
      name: 'kube-api-access-abcde',
      projected: { sources: [{ serviceAccountToken: { path: 'token' } }, { configMap: { name: 'kube-root-ca.crt' } }] },
    },
    { name: 'default-token-xyz', secret: { secretName: 'default-token-xyz' } },
  ],
  initContainers: [{ name: 'i', env: [{ name: 'A', valueFrom: { configMapKeyRef: { name: 'cm-init-env', key: 'k' } } }] }],
  containers: [
    {
      name: 'c',
      env: [
        { name: 'B', valueFrom: { secretKeyRef: { name: 'secret-env', key: 'k' } } },
        { name: 'C', value: 'plain' },
        { name: 'D', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      ],
      envFrom: [{ configMapRef: { name: 'cm-envfrom' } }, { secretRef: { name: 'secret-envfrom' } }],
    },
    { name: 'd', envFrom: [{ configMapRef: { name: 'cm-vol' } }] },
  ],
  ephemeralContainers: [{ name: 'e', env: [{ name: 'E', valueFrom: { configMapKeyRef: { name: 'cm-ephemeral', key: 'k' } } }] }],
};

describe('referenced objects', () => {
  it('finds ConfigMaps everywhere, sorted and unique, without the token volume', () => {
    expect(referencedNames(spec).configmap).to.deep.equal(['cm-envfrom', 'cm-ephemeral', 'cm-init-env', 'cm-proj', 'cm-vol']);
  });
  it('finds Secrets everywhere, sorted and unique, without legacy token secrets', () => {
    expect(referencedNames(spec).secret).to.deep.equal(['regcred', 'secret-csi', 'secret-env', 'secret-envfrom', 'secret-proj', 'secret-vol']);
  });
  it('leaves out kube-root-ca.crt wherever it is named: every target publishes its own', () => {
    const own: V1PodSpec = {
      containers: [{ name: 'c', env: [{ name: 'CA', valueFrom: { configMapKeyRef: { name: 'kube-root-ca.crt', key: 'ca.crt' } } }] }],
      volumes: [{ name: 'ca', projected: { sources: [{ configMap: { name: 'kube-root-ca.crt' } }] } }],
    };
    expect(referencedNames(own).configmap).to.deep.equal([]);
  });
  it('handles a bare spec', () => {
    expect(referencedNames({ containers: [{ name: 'a' }] }).configmap).to.deep.equal([]);
    expect(referencedNames({ containers: [{ name: 'a' }] }).secret).to.deep.equal([]);
  });
});

/** Every volume plugin that names a Secret, one volume each. */
const pluginVolumes: V1PodSpec['volumes'] = [
  { name: 'azure', azureFile: { secretName: 's-azure', shareName: 'x' } },
  { name: 'ceph', cephfs: { monitors: ['m'], secretRef: { name: 's-cephfs' } } },
  { name: 'cinder', cinder: { volumeID: 'v', secretRef: { name: 's-cinder' } } },
  { name: 'flex', flexVolume: { driver: 'd', secretRef: { name: 's-flex' } } },
  { name: 'iscsi', iscsi: { targetPortal: 't', iqn: 'i', lun: 0, secretRef: { name: 's-iscsi' } } },
  { name: 'rbd', rbd: { monitors: ['m'], image: 'i', secretRef: { name: 's-rbd' } } },
  { name: 'scaleio', scaleIO: { gateway: 'g', system: 's', secretRef: { name: 's-scaleio' } } },
  { name: 'storageos', storageos: { secretRef: { name: 's-storageos' } } },
];

describe('withCopyNames', () => {
  const mapAll = (s: V1PodSpec): CopyNames => ({
    configmap: new Map(referencedNames(s).configmap.map((n) => [n, `${n}-copy`])),
    secret: new Map(referencedNames(s).secret.map((n) => [n, `${n}-copy`])),
  });

  it('renames every reference the readers find, in every place, and nothing else', () => {
    const full: V1PodSpec = { ...spec, volumes: [...spec.volumes!, ...pluginVolumes] };
    expect(referencedNames(full).secret).to.include.members(['s-azure', 's-cephfs', 's-cinder', 's-flex', 's-iscsi', 's-rbd', 's-scaleio', 's-storageos']);
    const out = withCopyNames(full, mapAll(full));
    expect(referencedNames(out).configmap).to.deep.equal(referencedNames(full).configmap.map((n) => `${n}-copy`));
    expect(referencedNames(out).secret).to.deep.equal(referencedNames(full).secret.map((n) => `${n}-copy`));
    // What is not a reference of ours keeps its name: the token volume's ConfigMap and legacy token Secret.
    expect(out.volumes!.find((v) => v.name === 'kube-api-access-abcde')!.projected!.sources![1]!.configMap!.name).to.equal('kube-root-ca.crt');
    expect(out.volumes!.find((v) => v.name === 'default-token-xyz')!.secret!.secretName).to.equal('default-token-xyz');
    expect(out.imagePullSecrets).to.deep.equal([{ name: 'regcred-copy' }, { name: 'regcred-copy' }]);
    expect(out.containers[0]!.env![0]!.valueFrom!.secretKeyRef).to.deep.equal({ name: 'secret-env-copy', key: 'k' });
    expect(out.containers[0]!.env![1]).to.deep.equal({ name: 'C', value: 'plain' });
  });

  it('renames only what the map names, per kind, and leaves its argument alone', () => {
    const s: V1PodSpec = { containers: [{ name: 'c', envFrom: [{ configMapRef: { name: 'same' } }, { secretRef: { name: 'same' } }, { configMapRef: { name: 'other' } }] }] };
    const before = structuredClone(s);
    const out = withCopyNames(s, { configmap: new Map([['same', 'same-cm']]), secret: new Map() });
    expect(out.containers[0]!.envFrom).to.deep.equal([{ configMapRef: { name: 'same-cm' } }, { secretRef: { name: 'same' } }, { configMapRef: { name: 'other' } }]);
    expect(s).to.deep.equal(before);
  });

  it("is not fooled by names that are Object.prototype's keys", () => {
    const s: V1PodSpec = { containers: [{ name: 'c', envFrom: [{ configMapRef: { name: 'constructor' } }] }] };
    expect(withCopyNames(s, { configmap: new Map(), secret: new Map() }).containers[0]!.envFrom).to.deep.equal([{ configMapRef: { name: 'constructor' } }]);
  });
});

describe('serviceAccountTokenVolumeNames', () => {
  const cases: [string, V1PodSpec, string[]][] = [
    ['none', { containers: [{ name: 'a' }] }, []],
    ['kube-api-access without token source is a user volume', { containers: [{ name: 'a' }], volumes: [{ name: 'kube-api-access-mine', configMap: { name: 'x' } }] }, []],
    ['legacy token of the default service account', { containers: [{ name: 'a' }], volumes: [{ name: 'v', secret: { secretName: 'default-token-xyz' } }] }, ['v']],
    ['anything mounted at the token path', { containers: [{ name: 'a', volumeMounts: [{ name: 'custom', mountPath: `${SA_PATH}/` }] }], volumes: [{ name: 'custom', emptyDir: {} }] }, ['custom']],
  ];
  for (const [why, spec, want] of cases) {
    it(why, () => expect([...serviceAccountTokenVolumeNames(spec!)].sort()).to.deep.equal(want));
  }
});
