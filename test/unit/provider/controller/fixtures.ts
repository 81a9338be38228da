import { KubeConfig, type KubernetesListObject, type V1Pod } from '@kubernetes/client-node';
import { Informer } from '../../../../provider/controller/informer.js';
import type { Clock } from '../../../../provider/core/clock.js';
import { silentLogger } from '../../../../provider/core/logger.js';

/** A pod informer whose objects come from `list` alone: its watch opens and never sends anything. */
export function listOnlyPodInformer(list: () => Promise<KubernetesListObject<V1Pod>>, clock: Clock): Informer<V1Pod> {
  return new Informer<V1Pod>({
    name: 'pods',
    cluster: 'c1',
    kubeConfig: new KubeConfig(),
    path: '/api/v1/pods',
    list,
    logger: silentLogger(),
    clock,
    watch: { watch: async () => ({ abort() {} }) },
  });
}
