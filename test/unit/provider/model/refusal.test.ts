import { expect } from 'chai';
import { clusterTargetRights, explainRefusal, targetForbidden, type PodRights, type RefusalFacts, type RefusedWrite } from '../../../../provider/model/refusal.js';
import type { TargetRef } from '../../../../provider/model/types.js';

const target = { ref: { kind: 'Target', namespace: 'apps', name: 'c2' } as TargetRef, displayName: 'apps/c2' };
const clusterTarget = { ref: { kind: 'ClusterTarget', namespace: '', name: 'c2' } as TargetRef, displayName: 'c2' };
const pod: RefusedWrite = { kind: 'pod', namespace: 'apps' };
const conf: RefusedWrite = { kind: 'configmap', namespace: 'apps', name: 'conf' };
const USER = 'system:serviceaccount:default:c1';
const TEXT = 'pods "web-1a2b" is forbidden: exceeded quota: pods';

describe('explainRefusal', () => {
  const cases: [string, typeof target, RefusedWrite, RefusalFacts, { reason: string; message: string } | undefined][] = [
    ['a missing namespace', target, pod, { kind: 'NotFound', targetMessage: 'namespaces "apps" not found' }, { reason: 'TargetNamespaceMissing', message: 'namespace apps does not exist in apps/c2' }],
    ['a missing namespace, for a copy', clusterTarget, conf, { kind: 'NotFound', targetMessage: '' }, { reason: 'TargetNamespaceMissing', message: 'namespace apps does not exist in c2' }],
    [
      'an invalid delegate',
      target,
      pod,
      { kind: 'Invalid', targetMessage: 'spec.containers: Required value' },
      { reason: 'DelegateInvalid', message: 'apps/c2 rejected the delegate: spec.containers: Required value' },
    ],
    ['an invalid copy (retried as an error)', target, conf, { kind: 'Invalid', targetMessage: 'x' }, undefined],
    [
      "a delegate a Target's cluster does not authorize: a Source in that namespace, for that user",
      target,
      pod,
      { kind: 'Forbidden', targetMessage: TEXT, authorized: false, user: USER },
      {
        reason: 'SourceNotAuthorized',
        message: `the cluster of Target apps/c2 does not authorize this source (user "${USER}") to create pods in namespace apps: create a Source in namespace apps of that cluster with spec.userName "${USER}"`,
      },
    ],
    [
      "a copy a ClusterTarget's cluster does not authorize: a Source in that namespace, or a ClusterSource",
      clusterTarget,
      conf,
      { kind: 'Forbidden', targetMessage: TEXT, authorized: false, user: USER },
      {
        reason: 'SourceNotAuthorized',
        message: `the cluster of ClusterTarget c2 does not authorize this source (user "${USER}") to create configmaps in namespace apps: create a Source in namespace apps of that cluster with spec.userName "${USER}", or a ClusterSource for every namespace`,
      },
    ],
    [
      'an unauthorized write when the target would not say who we are',
      target,
      { kind: 'secret', namespace: 'apps', name: 'pw' },
      { kind: 'Forbidden', targetMessage: TEXT, authorized: false },
      {
        reason: 'SourceNotAuthorized',
        message:
          "the cluster of Target apps/c2 does not authorize this source (the user of the Target's kubeconfig) to create secrets in namespace apps: create a Source in namespace apps of that cluster for that user",
      },
    ],
    [
      'a delegate refused by admission (authorized)',
      target,
      pod,
      { kind: 'Forbidden', targetMessage: TEXT, authorized: true, user: USER },
      { reason: 'DelegateForbidden', message: `apps/c2 refused to create the delegate: ${TEXT}` },
    ],
    [
      'a delegate refused when the target would not say why',
      target,
      pod,
      { kind: 'Forbidden', targetMessage: TEXT },
      { reason: 'DelegateForbidden', message: `apps/c2 refused to create the delegate: ${TEXT}` },
    ],
    [
      'a copy refused by admission',
      clusterTarget,
      conf,
      { kind: 'Forbidden', targetMessage: 'exceeded quota: configmaps', authorized: true },
      { reason: 'CopyForbidden', message: "c2 refused this cluster's copy of configmap apps/conf: exceeded quota: configmaps" },
    ],
  ];
  for (const [why, t, write, facts, expected] of cases) {
    it(`explains ${why}`, () => {
      expect(explainRefusal(t, write, facts)).to.deep.equal(expected);
    });
  }
});

describe('clusterTargetRights', () => {
  const server = 'https://c2.example:6443';
  const reachable = `target reachable at ${server}`;
  const ns = (entries: [string, boolean][]) => new Map(entries);
  const cases: [string, PodRights, { reason: string; message: string }][] = [
    ['cluster-wide rights (a ClusterSource)', { clusterWide: true, namespaces: ns([]) }, { reason: 'TargetReady', message: reachable }],
    ['rights unknown (the review failed): as before', { namespaces: ns([]) }, { reason: 'TargetReady', message: reachable }],
    [
      'a Source in some namespaces',
      {
        clusterWide: false,
        user: USER,
        namespaces: ns([
          ['web', true],
          ['batch', false],
          ['api', true],
        ]),
      },
      {
        reason: 'NoClusterSource',
        message: `${reachable}; no ClusterSource there authorizes this source (user "${USER}") in every namespace, so only pods of the namespaces where a Source does are offered this target (api, web); not in batch`,
      },
    ],
    [
      'no namespace asked about yet',
      { clusterWide: false, namespaces: ns([]) },
      {
        reason: 'NoClusterSource',
        message: `${reachable}; no ClusterSource there authorizes this source (the user of its kubeconfig) in every namespace, so only pods of the namespaces where a Source does are offered this target`,
      },
    ],
    [
      'no right in any namespace, seven of them (five named)',
      { clusterWide: false, user: USER, namespaces: ns(['g', 'f', 'e', 'd', 'c', 'b', 'a'].map((n) => [n, false])) },
      {
        reason: 'SourceNotAuthorized',
        message: `${reachable}, but it authorizes this source (user "${USER}") to create pods in none of its namespaces (a, b, c, d, e and 2 more): create a ClusterSource in that cluster for every namespace, or a Source in each`,
      },
    ],
  ];
  for (const [why, rights, expected] of cases) {
    it(`says ${why}`, () => {
      expect(clusterTargetRights(server, rights)).to.deep.equal(expected);
    });
  }
});

describe('targetForbidden', () => {
  const server = 'https://c2.example:6443';
  const cases: [string, PodRights, { reason: string; message: string } | undefined][] = [
    ['nothing when the Target may create pods in its namespace', { user: USER, namespaces: new Map([['apps', true]]) }, undefined],
    ['nothing when nobody knows (the review failed): the probe goes on', { namespaces: new Map() }, undefined],
    ['nothing for an answer about another namespace', { namespaces: new Map([['web', false]]) }, undefined],
    [
      'TargetForbidden, naming the Source to create and for whom, when it may not',
      { user: USER, namespaces: new Map([['apps', false]]) },
      {
        reason: 'TargetForbidden',
        message: `target reachable at ${server}, but the cluster of Target apps/c2 does not authorize this source (user "${USER}") to create pods in namespace apps: create a Source in namespace apps of that cluster with spec.userName "${USER}"`,
      },
    ],
    [
      'TargetForbidden without the user when the target would not say',
      { namespaces: new Map([['apps', false]]) },
      {
        reason: 'TargetForbidden',
        message: `target reachable at ${server}, but the cluster of Target apps/c2 does not authorize this source (the user of the Target's kubeconfig) to create pods in namespace apps: create a Source in namespace apps of that cluster for that user`,
      },
    ],
  ];
  for (const [why, rights, expected] of cases) {
    it(`says ${why}`, () => {
      expect(targetForbidden(target, server, rights)).to.deep.equal(expected);
    });
  }
});
