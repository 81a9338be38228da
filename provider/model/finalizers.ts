import type { V1Pod } from '@kubernetes/client-node';
import { KEY_PREFIX } from '../core/keys.js';

/**
 * The finalizers of `pod` with ours (every one under our prefix) taken out, and the JSON patch
 * that writes them only if the list is still the one seen (a `test` op first; with `uid`, also
 * only on that pod), so a concurrent change is never overwritten. `patch` is undefined when
 * there is none of ours to release. Pure.
 */
export function releaseOurFinalizers(pod: V1Pod, opts: { uid?: string } = {}): { kept: string[]; patch?: object[] } {
  const finalizers = pod.metadata?.finalizers ?? [];
  const kept = finalizers.filter((f) => !f.startsWith(KEY_PREFIX));
  if (kept.length === finalizers.length) return { kept };
  return {
    kept,
    patch: [
      ...(opts.uid !== undefined ? [{ op: 'test', path: '/metadata/uid', value: opts.uid }] : []),
      { op: 'test', path: '/metadata/finalizers', value: finalizers },
      { op: 'replace', path: '/metadata/finalizers', value: kept },
    ],
  };
}
