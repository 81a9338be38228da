import { PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import type { TargetClient } from '../provider/clusters/target-client.js';
import type { Clock } from '../provider/core/clock.js';
import { isAlreadyExists, statusMessage } from '../provider/core/errors.js';
import { errorFields, type Logger } from '../provider/core/logger.js';
import { PARENT_CLUSTER_NAME_LABEL } from '../provider/core/keys.js';
import { POD_GROUP_GROUP, POD_GROUP_PLURAL, POD_GROUP_VERSION, targetPodGroup, targetPodGroupName, type PodGroupObject } from '../provider/model/pod-group.js';

/** How long a target found without the PodGroup API (or without our right to write them) is not asked again. */
const NO_API_TTL_MS = 60_000;

/** The HTTP status of a client error, when it has one. */
function statusOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown } | undefined;
  const code = e?.code ?? e?.statusCode;
  return typeof code === 'number' ? code : undefined;
}

/**
 * The PodGroups the delegates of a gang form in a target (`scheduling.k8s.io/v1alpha2`, named by
 * {@link targetPodGroupName}), so the target's scheduler places a gang's share there all or
 * none. Made once per gang, target and share, however many members ask at once. A target that
 * does not serve PodGroups (an older Kubernetes, or the gate off), or where this source may not
 * write them (a Source's role of an older release), gets none: then the delegates are plain
 * pods, and the binder's wait for every member's placement is what keeps the gang whole.
 *
 * Each member's delegate owns the PodGroup ({@link TargetPodGroups.owned}), so the target's
 * garbage collector deletes it with the last of them: nothing of a gang stays in a target once
 * its delegates are gone.
 */
export class TargetPodGroups {
  private readonly inflight = new Map<string, Promise<string | undefined>>();
  private readonly noApiUntil = new Map<string, number>();

  constructor(private readonly o: { sourceClusterName: string; clock: Clock; logger: Logger }) {}

  /** The name of the gang's PodGroup in `target` with `minCount` (made when missing), or undefined when the target gets none. */
  ensure(target: TargetClient, namespace: string, groupName: string, minCount: number): Promise<string | undefined> {
    if ((this.noApiUntil.get(target.key) ?? 0) > this.o.clock.now()) return Promise.resolve(undefined);
    const key = `${target.key}|${namespace}/${groupName}|${minCount}`;
    let p = this.inflight.get(key);
    if (!p) {
      p = this.make(target, namespace, groupName, minCount).finally(() => this.inflight.delete(key));
      this.inflight.set(key, p);
    }
    return p;
  }

  /**
   * Makes `delegate` an owner of its gang's PodGroup (a strategic merge patch, which adds it to
   * the others'). Best effort: a PodGroup left without owners is only left behind.
   */
  async owned(target: TargetClient, podGroupName: string, delegate: V1Pod): Promise<void> {
    const { name, namespace, uid } = delegate.metadata ?? {};
    if (!name || !namespace || !uid) return;
    const body = { metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name, uid }] } };
    try {
      await target.custom.patchNamespacedCustomObject(
        { group: POD_GROUP_GROUP, version: POD_GROUP_VERSION, plural: POD_GROUP_PLURAL, namespace, name: podGroupName, body },
        setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
      );
    } catch (err) {
      this.o.logger.warn('scheduler extender: could not make a delegate an owner of its PodGroup; the PodGroup may stay in the target after the gang', {
        cluster: target.displayName,
        podGroup: `${namespace}/${podGroupName}`,
        ...errorFields(err),
      });
    }
  }

  private async make(target: TargetClient, namespace: string, groupName: string, minCount: number): Promise<string | undefined> {
    const name = targetPodGroupName(groupName, this.o.sourceClusterName);
    const api = { group: POD_GROUP_GROUP, version: POD_GROUP_VERSION, plural: POD_GROUP_PLURAL, namespace };
    try {
      await target.custom.createNamespacedCustomObject({ ...api, body: targetPodGroup(name, namespace, minCount, this.o.sourceClusterName) });
      return name;
    } catch (err) {
      if (isAlreadyExists(err)) return this.adopt(target, api, name, minCount);
      const status = statusOf(err);
      if (status === 404 || status === 403) {
        this.noApiUntil.set(target.key, this.o.clock.now() + NO_API_TTL_MS);
        this.o.logger.info('scheduler extender: a target takes no PodGroups; its share of a gang is kept whole by the bind alone', {
          cluster: target.displayName,
          reason: statusMessage(err),
        });
        return undefined;
      }
      throw err;
    }
  }

  /**
   * A PodGroup of that name exists: ours with that minCount is used as it is; ours with another
   * (a plan before this one, whose delegates are gone) is made again, since its spec is
   * immutable; one not ours is left alone, and the gang's delegates there get none.
   */
  private async adopt(target: TargetClient, api: { group: string; version: string; plural: string; namespace: string }, name: string, minCount: number): Promise<string | undefined> {
    const existing = (await target.custom.getNamespacedCustomObject({ ...api, name })) as PodGroupObject;
    if (existing.metadata?.labels?.[PARENT_CLUSTER_NAME_LABEL] !== this.o.sourceClusterName) {
      this.o.logger.warn('scheduler extender: a PodGroup of the name of our gang exists in the target and is not ours; its delegates join none', {
        cluster: target.displayName,
        podGroup: `${api.namespace}/${name}`,
      });
      return undefined;
    }
    if (existing.spec?.schedulingPolicy?.gang?.minCount === minCount) return name;
    try {
      await target.custom.deleteNamespacedCustomObject({ ...api, name, body: { preconditions: { uid: existing.metadata?.uid } } });
      await target.custom.createNamespacedCustomObject({ ...api, body: targetPodGroup(name, api.namespace, minCount, this.o.sourceClusterName) });
    } catch (err) {
      this.o.logger.warn('scheduler extender: could not remake a PodGroup in a target', { cluster: target.displayName, podGroup: `${api.namespace}/${name}`, ...errorFields(err) });
      throw err;
    }
    return name;
  }
}
