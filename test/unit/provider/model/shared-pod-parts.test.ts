import { expect } from 'chai';
import type { V1Pod } from '@kubernetes/client-node';
import { SubtreeTable } from '../../../../provider/controller/subtree-table.js';
import { PARENT_NAME_ANNOTATION, PARENT_UID_LABEL } from '../../../../provider/core/keys.js';
import { sharePodParts } from '../../../../provider/model/shared-pod-parts.js';

/** A pod of a Deployment as its apiserver serves it (the shape of the sandbox's proxies), parsed from its own text as a watch event brings it. */
function workloadPod(i: number, readyAt: string): V1Pod {
  return JSON.parse(
    JSON.stringify({
      metadata: {
        name: `web-84dc84948d-${i}`,
        namespace: 'default',
        uid: `uid-${i}`,
        resourceVersion: `${100 + i}`,
        labels: { app: 'web', 'pod-template-hash': '84dc84948d' },
        annotations: { 'multicluster.admiralty.io/elect': '' },
        finalizers: ['multicluster.admiralty.io/multiclusterForegroundDeletion'],
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-84dc84948d', uid: 'rs-uid', controller: true, blockOwnerDeletion: true }],
      },
      spec: {
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'multicluster.admiralty.io/target-namespace', operator: 'In', values: ['default'] }] }] },
          },
        },
        containers: [
          {
            name: 'web',
            image: 'nginx',
            env: [{ name: 'MODE', value: 'prod' }],
            ports: [{ containerPort: 80, protocol: 'TCP' }],
            resources: { limits: { memory: '64Mi' }, requests: { cpu: '10m', memory: '16Mi' } },
            volumeMounts: [{ mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', name: `kube-api-access-${i}`, readOnly: true }],
          },
        ],
        nodeName: 'admiralty-namespace-default-c2',
        nodeSelector: { 'multicluster.admiralty.io/target-name': 'c2' },
        securityContext: {},
        tolerations: [{ effect: 'NoSchedule', key: 'dedicated', operator: 'Equal', value: 'web' }],
        volumes: [
          {
            name: `kube-api-access-${i}`,
            projected: {
              defaultMode: 420,
              sources: [{ serviceAccountToken: { expirationSeconds: 3607, path: 'token' } }, { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } }],
            },
          },
        ],
      },
      status: {
        phase: 'Running',
        conditions: [
          { lastProbeTime: null, lastTransitionTime: '2026-11-25T06:44:14Z', status: 'True', type: 'PodScheduled' },
          { lastProbeTime: null, lastTransitionTime: readyAt, status: 'True', type: 'Ready' },
        ],
        containerStatuses: [{ name: 'web', image: 'nginx', imageID: '', containerID: `containerd://${i}`, lastState: {}, ready: true, restartCount: 0, state: { running: { startedAt: readyAt } } }],
        hostIP: '127.0.0.1',
        hostIPs: [{ ip: '127.0.0.1' }],
        podIP: `10.201.0.${i}`,
        podIPs: [{ ip: `10.201.0.${i}` }],
      },
    }),
  );
}

describe('sharePodParts', () => {
  it('gives two pods of one workload one copy of what they repeat, and leaves each its own of the rest', () => {
    const table = new SubtreeTable();
    const a = sharePodParts(workloadPod(1, '2026-11-25T06:44:15Z'), table);
    const b = sharePodParts(workloadPod(2, '2026-11-25T06:44:15Z'), table);
    const same: Array<(p: V1Pod) => unknown> = [
      (p) => p.metadata!.labels,
      (p) => p.metadata!.annotations,
      (p) => p.metadata!.finalizers,
      (p) => p.metadata!.ownerReferences,
      (p) => p.spec!.affinity,
      (p) => p.spec!.tolerations,
      (p) => p.spec!.nodeSelector,
      (p) => p.spec!.securityContext,
      (p) => p.spec!.volumes![0]!.projected,
      (p) => p.spec!.containers[0]!.env,
      (p) => p.spec!.containers[0]!.ports,
      (p) => p.spec!.containers[0]!.resources,
      (p) => p.status!.conditions![0],
      (p) => p.status!.conditions![1],
      (p) => p.status!.hostIPs,
      (p) => p.status!.containerStatuses![0]!.state,
      (p) => p.status!.containerStatuses![0]!.lastState,
    ];
    for (const part of same) {
      expect(part(a), String(part)).to.equal(part(b));
      expect(Object.isFrozen(part(a)), String(part)).to.equal(true);
    }
    const own: Array<(p: V1Pod) => unknown> = [
      (p) => p.metadata,
      (p) => p.spec,
      (p) => p.spec!.volumes![0],
      (p) => p.spec!.containers[0],
      (p) => p.spec!.containers[0]!.volumeMounts,
      (p) => p.status,
      (p) => p.status!.containerStatuses![0],
      (p) => p.status!.podIPs,
    ];
    for (const part of own) {
      expect(part(a), String(part)).to.not.equal(part(b));
      expect(Object.isFrozen(part(a)), String(part)).to.equal(false);
    }
  });

  it('changes nothing a reader sees', () => {
    const table = new SubtreeTable();
    sharePodParts(workloadPod(1, '2026-11-25T06:44:15Z'), table);
    expect(sharePodParts(workloadPod(2, '2026-11-25T06:44:15Z'), table)).to.deep.equal(workloadPod(2, '2026-11-25T06:44:15Z'));
  });

  it('shares a condition only with pods that reached it in the same second', () => {
    const table = new SubtreeTable();
    const a = sharePodParts(workloadPod(1, '2026-11-25T06:44:15Z'), table);
    const b = sharePodParts(workloadPod(2, '2026-11-25T06:44:16Z'), table);
    expect(a.status!.conditions![0]).to.equal(b.status!.conditions![0]);
    expect(a.status!.conditions![1]).to.not.equal(b.status!.conditions![1]);
    expect(b.status!.conditions![1]!.lastTransitionTime).to.equal('2026-11-25T06:44:16Z');
  });

  it("leaves a delegate's labels and annotations, which name its proxy, out of the table", () => {
    const table = new SubtreeTable();
    const delegateOf = (i: number): V1Pod => {
      const p = workloadPod(i, '2026-11-25T06:44:15Z');
      p.metadata!.labels = { ...p.metadata!.labels, [PARENT_UID_LABEL]: `uid-${i}` };
      p.metadata!.annotations = { [PARENT_NAME_ANNOTATION]: p.metadata!.name! };
      return p;
    };
    const a = sharePodParts(delegateOf(1), table);
    const entries = table.size();
    const b = sharePodParts(delegateOf(2), table);
    expect(table.size(), 'entries after the second delegate').to.equal(entries);
    expect(Object.isFrozen(a.metadata!.labels)).to.equal(false);
    expect(Object.isFrozen(a.metadata!.annotations)).to.equal(false);
    expect(a.spec!.tolerations).to.equal(b.spec!.tolerations);
  });

  it('takes a pod whose parts are shared already, and one without spec or status', () => {
    const table = new SubtreeTable();
    const a = sharePodParts(workloadPod(1, '2026-11-25T06:44:15Z'), table);
    expect(sharePodParts(a, table)).to.deep.equal(workloadPod(1, '2026-11-25T06:44:15Z'));
    expect(sharePodParts({ metadata: { name: 'bare' } }, table)).to.deep.equal({ metadata: { name: 'bare' } });
  });

  it("takes the previous version's parts where they are equal, its own where they changed, and looks up only what is new", () => {
    // The previous version was shared through another table (as after the table forgot its
    // parts): what this one answers with is the previous version's only if it was taken as is.
    const previous = sharePodParts(workloadPod(1, '2026-11-25T06:44:15Z'), new SubtreeTable());
    const table = new SubtreeTable();
    // The next event of the same pod: it became ready a second later, and gained a toleration.
    const next = workloadPod(1, '2026-11-25T06:44:16Z');
    next.spec!.tolerations!.push({ key: 'spot', operator: 'Exists' });
    next.metadata!.resourceVersion = '200';
    const shared = sharePodParts(next, table, previous);
    expect(shared).to.deep.equal(
      (() => {
        const p = workloadPod(1, '2026-11-25T06:44:16Z');
        p.spec!.tolerations!.push({ key: 'spot', operator: 'Exists' });
        p.metadata!.resourceVersion = '200';
        return p;
      })(),
    );
    const unchanged: Array<(p: V1Pod) => unknown> = [
      (p) => p.metadata!.labels,
      (p) => p.metadata!.annotations,
      (p) => p.metadata!.finalizers,
      (p) => p.metadata!.ownerReferences,
      (p) => p.spec!.affinity,
      (p) => p.spec!.nodeSelector,
      (p) => p.spec!.volumes![0]!.projected,
      (p) => p.spec!.containers[0]!.env,
      (p) => p.spec!.containers[0]!.resources,
      (p) => p.status!.conditions![0],
      (p) => p.status!.hostIPs,
      (p) => p.status!.containerStatuses![0]!.lastState,
    ];
    for (const part of unchanged) expect(part(shared), String(part)).to.equal(part(previous));
    for (const part of [(p: V1Pod) => p.spec!.tolerations, (p: V1Pod) => p.status!.conditions![1], (p: V1Pod) => p.status!.containerStatuses![0]!.state]) {
      expect(part(shared), String(part)).to.not.equal(part(previous));
      expect(Object.isFrozen(part(shared)), String(part)).to.equal(true);
    }
    // What changed went through the table: another pod with the same new parts gets them.
    const other = workloadPod(2, '2026-11-25T06:44:16Z');
    other.spec!.tolerations!.push({ key: 'spot', operator: 'Exists' });
    const second = sharePodParts(other, table);
    expect(second.spec!.tolerations).to.equal(shared.spec!.tolerations);
    expect(second.status!.conditions![1]).to.equal(shared.status!.conditions![1]);
  });

  it('matches list items by index, and takes nothing from a previous version that is not shared', () => {
    const previous = sharePodParts(workloadPod(1, '2026-11-25T06:44:15Z'), new SubtreeTable());
    // The conditions come in the other order: each is compared with the one at its index only,
    // so neither is the previous version's (the table, new, has neither).
    const next = workloadPod(1, '2026-11-25T06:44:15Z');
    next.status!.conditions!.reverse();
    const shared = sharePodParts(next, new SubtreeTable(), previous);
    expect(shared.status!.conditions!.map((c) => c.type)).to.deep.equal(['Ready', 'PodScheduled']);
    expect(shared.status!.conditions![0]).to.not.equal(previous.status!.conditions![1]);
    expect(shared.status!.conditions![1]).to.not.equal(previous.status!.conditions![0]);
    expect(shared.spec!.affinity).to.equal(previous.spec!.affinity);
    // A previous version nobody shared (its parts are its own, writable): nothing of it is taken.
    const unshared = workloadPod(3, '2026-11-25T06:44:15Z');
    const again = sharePodParts(workloadPod(3, '2026-11-25T06:44:15Z'), new SubtreeTable(), unshared);
    expect(again.spec!.affinity).to.not.equal(unshared.spec!.affinity);
    expect(Object.isFrozen(unshared.spec!.affinity)).to.equal(false);
  });
});
