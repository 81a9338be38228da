import type { CoreV1Api, CustomObjectsApi, KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { ClusterRegistry } from '../clusters/cluster-registry.js';
import type { CacheBudget } from '../controller/cache-budget.js';
import type { Controller } from '../controller/controller.js';
import type { Informer, InformerOptions } from '../controller/informer.js';
import type { Manager } from '../controller/manager.js';
import type { SubtreeTable } from '../controller/subtree-table.js';
import type { WorkQueueShards } from '../controller/workqueue.js';
import type { Clock } from '../core/clock.js';
import type { ProviderConfig } from '../core/config.js';
import type { EventRecorder } from '../core/events.js';
import type { Logger } from '../core/logger.js';
import type { Metrics } from '../core/metrics.js';

/** What an informer keeps of the objects it sees, and how it indexes them (see `InformerOptions`): memory grows with what is cached. */
export interface CachedObjects<T> {
  transform?: (obj: T) => T;
  keep?: (obj: T) => boolean;
  indexers?: Record<string, (obj: T) => string[]>;
  /** Which parts of each cached object to share with the others (see `InformerOptions.share`; for pods, `sharePodParts`). */
  share?: (obj: T, table: SubtreeTable) => void;
  /** What the cache may hold with the others sharing the budget (a target's; see `InformerOptions.budget`). */
  budget?: CacheBudget;
}

/** What an informer watches (one collection of one cluster, through its selectors) and what it keeps of it. */
export interface InformerSpec<T extends KubernetesObject> extends CachedObjects<T> {
  /** Short name for logs and metrics, e.g. `proxies`. */
  name: string;
  /** The cluster the objects come from, for logs. */
  cluster: string;
  kubeConfig: KubeConfig;
  /** Collection path, e.g. `/api/v1/pods`. */
  path: string;
  list: InformerOptions<T>['list'];
  labelSelector?: string;
  fieldSelector?: InformerOptions<T>['fieldSelector'];
}

/** What every part of the wiring shares. */
export interface Wiring {
  config: ProviderConfig;
  kc: KubeConfig;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  clusters: ClusterRegistry;
  events: EventRecorder;
  logger: Logger;
  clock: Clock;
  metrics: Metrics;
  registry: Registry;
  manager: Manager;
  /** Calls `listener` on each SIGHUP (a forced certificate renewal) until the function it returns is called. */
  onHangup: (listener: () => void) => () => void;
  newInformer: <T extends KubernetesObject>(spec: InformerSpec<T>) => Informer<T>;
  newController: (name: string, reconciler: { reconcile(key: string): Promise<{ requeueAfterMs?: number } | void> }, opts?: { shards?: WorkQueueShards; maxBackoffMs?: number }) => Controller;
}
