import { KubeConfig } from '@kubernetes/client-node';
import { targetKey, type TargetClient } from '../../provider/clusters/target-client.js';
import type { TargetRef } from '../../provider/model/types.js';
import { coreStub, type CoreStub } from './stubs.js';

export interface FakeTargetOptions {
  /** A Target in this namespace; a ClusterTarget when absent. */
  namespace?: string;
  /** The source's own cluster. Default false. */
  self?: boolean;
  /** Its CoreV1Api; a fresh {@link coreStub} when absent. */
  core?: CoreStub;
  /** Default as the real client names it: `<namespace>/<name>`, or `<name>` for a ClusterTarget. */
  displayName?: string;
  /** Default the name. */
  fingerprint?: string;
}

/**
 * A target's client for tests: key and ref as the real client builds them, a kubeconfig that
 * is never dialled, and its CoreV1Api a sinon stub the test tells what to answer. Its other
 * APIs (custom objects, reviews) are absent: a test that needs them adds them.
 */
export function fakeTarget(name: string, o: FakeTargetOptions = {}): { target: TargetClient; core: CoreStub } {
  const ref: TargetRef = o.namespace === undefined ? { kind: 'ClusterTarget', namespace: '', name } : { kind: 'Target', namespace: o.namespace, name };
  const core = o.core ?? coreStub();
  const target = {
    key: targetKey(ref),
    ref,
    displayName: o.displayName ?? (o.namespace === undefined ? name : `${o.namespace}/${name}`),
    kubeConfig: new KubeConfig(),
    core,
    custom: {},
    fingerprint: o.fingerprint ?? name,
    self: o.self ?? false,
  } as unknown as TargetClient;
  return { target, core };
}
