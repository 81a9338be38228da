import type { CoordinationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { ClusterRegistry } from '../clusters/cluster-registry.js';
import type { TargetClient } from '../clusters/target-client.js';
import type { Controller } from '../controller/controller.js';
import type { Manager } from '../controller/manager.js';
import type { WorkQueueShards } from '../controller/workqueue.js';
import type { Shards } from '../sharding/shards.js';
import type { Clock } from '../core/clock.js';
import type { ProviderConfig } from '../core/config.js';
import type { EventRecorder } from '../core/events.js';
import type { Logger } from '../core/logger.js';
import type { Metrics } from '../core/metrics.js';

/**
 * What the parts' setups share: the manager (whose caches each part asks for what it reads,
 * see `Manager.caches` and `Manager.onEngage`), this cluster's clients, the registry of targets,
 * and the services every part logs, measures and records events with. What one part makes for
 * another goes from setup to setup, in `main.ts`, not through here.
 */
export interface Wiring {
  config: ProviderConfig;
  kc: KubeConfig;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  coordination: CoordinationV1Api;
  clusters: ClusterRegistry;
  events: EventRecorder;
  logger: Logger;
  clock: Clock;
  metrics: Metrics;
  registry: Registry;
  manager: Manager<TargetClient>;
  /** With `--shard-targets`: the shards of the targets among the replicas (see `Shards`); absent, the leader writes every target. */
  shards?: Shards;
  /** Whether this replica writes `targetKey` now: it owns its shard, or, without sharding, it leads. */
  writes(targetKey: string): boolean;
  /** Calls `listener` on each SIGHUP (a forced certificate renewal) until the function it returns is called. */
  onHangup: (listener: () => void) => () => void;
  /**
   * A controller. A writer names the shard of each key (`shardOf`: the target the key writes to,
   * or undefined for the cluster-wide share); with sharding, it then reconciles only the keys of
   * the shards this replica owns. The read side (every replica) names none.
   */
  newController: (
    name: string,
    reconciler: { reconcile(key: string): Promise<{ requeueAfterMs?: number } | void> },
    opts?: { shards?: WorkQueueShards; maxBackoffMs?: number; shardOf?: (key: string) => string | undefined },
  ) => Controller;
}

/** A writer's `shardOf` for work that belongs to no one target: the cluster-wide shard's. */
export const CLUSTER_WIDE = (): undefined => undefined;
