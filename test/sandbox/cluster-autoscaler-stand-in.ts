import { CoreV1Api, KubeConfig, type CoreV1Event, type V1Node, type V1Pod, type V1Taint } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { NOT_TRIGGER_SCALE_UP, TRIGGERED_SCALE_UP } from '../../provider/model/autoscaler.js';
import { isTerminal, ONE_POD, parseList, podRequests, type ResourceAmounts } from '../../provider/model/resources.js';
import { REASON_AFFINITY } from '../../scheduler/fit.js';
import { matchesNodeSelectorAndAffinity, untoleratedTaint } from '../../scheduler/node-match.js';

/**
 * TEST FIXTURE: a stand-in for cluster-autoscaler in the sandbox (cluster-autoscaler's Go module
 * is not served by the module proxy, so it cannot be built here). Towards pods it behaves as
 * cluster-autoscaler's scale-up loop does: node groups with a min and max size; an Unschedulable
 * pod that a new node of a group could hold grows that group by one (Normal event
 * `TriggeredScaleUp`, `pod triggered scale-up: [{<group> <size>-><new size> (max: <max>)}]`, from
 * component `cluster-autoscaler`), a pod that fits on a node already coming gets nothing, and a
 * pod no group can take gets `NotTriggerScaleUp`, `pod didn't trigger scale-up: <n reason>, …`
 * (not in a loop that scaled up, as upstream). New nodes are kwok nodes, created after the
 * group's provision delay (kwok then makes them Ready). A group whose cloud fails to deliver
 * (`failProvisioning`) registers no node: the scale-up is given up after its max provision time
 * and the group backs off, so the pod then gets `NotTriggerScaleUp` with upstream's
 * `in backoff after failed scale-up`. No scale-down, no cloud, no expanders beyond "first group
 * that fits". Runs against one cluster's apiserver on 127.0.0.1.
 */

/** Where the stand-in reads its node groups: ConfigMap `kube-system/<name>`, key `node-groups` (a JSON array of {@link NodeGroup}). */
export const STAND_IN_CONFIGMAP = 'cluster-autoscaler-stand-in';
/** Label on the nodes the stand-in created: the name of their group. */
export const NODE_GROUP_LABEL = 'cluster-autoscaler-stand-in/node-group';

export interface NodeGroup {
  name: string;
  minSize: number;
  maxSize: number;
  /** Seconds from a scale-up to its node being created (default 3). */
  provisionDelaySeconds?: number;
  /**
   * The cloud never delivers this group's instances: no node is created, and the scale-up is
   * given up after `maxNodeProvisionSeconds` (default 10; upstream's `--max-node-provision-time`
   * is 15 min), after which the group is in backoff for `backoffSeconds` (default 300, upstream's
   * initial node group backoff).
   */
  failProvisioning?: boolean;
  maxNodeProvisionSeconds?: number;
  backoffSeconds?: number;
  /** What a new node of the group is like. */
  template: { allocatable: Record<string, string>; labels?: Record<string, string>; taints?: V1Taint[] };
}

export interface ScaleUpPlan {
  /** Groups grown in this loop, as cluster-autoscaler's ScaleUpInfos. */
  scaleUps: { group: string; currentSize: number; newSize: number; maxSize: number }[];
  /** Pods that triggered a scale-up. */
  triggered: V1Pod[];
  /** Pods no group could take, with the event message; empty when the loop scaled up (as upstream). */
  notTriggered: { pod: V1Pod; message: string }[];
}

/** Room on a node that exists or is coming: what a pod is checked against before any scale-up. */
export interface Room {
  labels: Record<string, string>;
  taints?: V1Taint[];
  free: ResourceAmounts;
}

/**
 * One scale-up loop, decided: `pods` are the Unschedulable pods (oldest first), `sizes` each
 * group's nodes (registered or coming), `rooms` the free room of the Ready nodes and of the nodes
 * coming. A pod that fits a room is left to kube-scheduler, with no event (as upstream's
 * filter-out-schedulable and its upcoming nodes); the others go to a new node of the first group
 * whose template takes them, that is below its max size and not in `backedOff`. Pure.
 */
export function planScaleUp(pods: readonly V1Pod[], groups: readonly NodeGroup[], sizes: ReadonlyMap<string, number>, rooms: readonly Room[], backedOff: ReadonlySet<string> = new Set()): ScaleUpPlan {
  const open = rooms.map((r) => ({ ...r, free: new Map(r.free) }));
  const size = new Map(groups.map((g) => [g.name, sizes.get(g.name) ?? 0]));
  const scaled = new Map<string, { currentSize: number; newSize: number; maxSize: number }>();
  const triggered: V1Pod[] = [];
  const notTriggered: { pod: V1Pod; message: string }[] = [];
  for (const pod of pods) {
    const req = podRequests(pod.spec);
    req.set('pods', ONE_POD);
    const room = open.find((r) => rejection(pod, r, req) === undefined);
    if (room) {
      take(room.free, req);
      continue;
    }
    const reasons = new Map<string, number>();
    let grown = false;
    for (const g of groups) {
      const fresh = templateRoom(g);
      const why = backedOff.has(g.name) ? BACKOFF_REASON : (rejection(pod, fresh, req) ?? (size.get(g.name)! >= g.maxSize ? 'max node group size reached' : undefined));
      if (why) {
        reasons.set(why, (reasons.get(why) ?? 0) + 1);
        continue;
      }
      const current = size.get(g.name)!;
      const info = scaled.get(g.name) ?? { currentSize: current, newSize: current, maxSize: g.maxSize };
      info.newSize = current + 1;
      scaled.set(g.name, info);
      size.set(g.name, current + 1);
      take(fresh.free, req);
      open.push(fresh);
      triggered.push(pod);
      grown = true;
      break;
    }
    if (!grown) {
      const text = [...reasons]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([why, n]) => `${n} ${why}`)
        .join(', ');
      notTriggered.push({ pod, message: `pod didn't trigger scale-up: ${text}` });
    }
  }
  return {
    scaleUps: [...scaled].map(([group, s]) => ({ group, ...s })),
    triggered,
    notTriggered: scaled.size > 0 ? [] : notTriggered,
  };
}

/** Upstream's word for a node group skipped while it backs off after a failed scale-up. */
export const BACKOFF_REASON = 'in backoff after failed scale-up';

/** The room of a new node of `g`. */
export function templateRoom(g: NodeGroup): Room {
  return { labels: g.template.labels ?? {}, taints: g.template.taints, free: parseList(g.template.allocatable) };
}

/**
 * The room left on a Ready, schedulable node by the pods bound to it; undefined for a node that
 * takes nothing yet. A node that kube-controller-manager still taints `node.kubernetes.io/not-ready`
 * (for a moment after it turns Ready) is not ready either: the caller counts a node of its groups
 * as still coming, as upstream does until a new node is ready.
 */
export function nodeRoom(node: V1Node, pods: readonly V1Pod[]): Room | undefined {
  if (node.spec?.unschedulable || node.status?.conditions?.find((c) => c.type === 'Ready')?.status !== 'True') return undefined;
  if (node.spec?.taints?.some((t) => t.key === 'node.kubernetes.io/not-ready')) return undefined;
  const free = parseList(node.status?.allocatable);
  for (const p of pods) {
    if (p.spec?.nodeName !== node.metadata?.name || isTerminal(p)) continue;
    const req = podRequests(p.spec);
    req.set('pods', ONE_POD);
    take(free, req);
  }
  return { labels: node.metadata?.labels ?? {}, taints: node.spec?.taints, free };
}

/** `pod triggered scale-up: [{g 0->1 (max: 2)}]`, as cluster-autoscaler prints its ScaleUpInfos. */
export function triggeredMessage(scaleUps: ScaleUpPlan['scaleUps']): string {
  return `pod triggered scale-up: [${scaleUps.map((s) => `{${s.group} ${s.currentSize}->${s.newSize} (max: ${s.maxSize})}`).join(' ')}]`;
}

/** Why a node with this room cannot take the pod, in kube-scheduler's words; undefined when it can. */
function rejection(pod: V1Pod, room: Room, req: ResourceAmounts): string | undefined {
  const spec = pod.spec ?? { containers: [] };
  const free = room.free;
  if (!matchesNodeSelectorAndAffinity(spec, { name: room.labels['kubernetes.io/hostname'] ?? '', labels: room.labels })) return REASON_AFFINITY;
  const taint = untoleratedTaint(
    (room.taints ?? []).filter((t) => t.effect !== 'PreferNoSchedule'),
    spec.tolerations,
  );
  if (taint) return `node(s) had untolerated taint {${taint.key}: ${taint.value ?? ''}}`;
  for (const [name, amount] of [...req].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (amount > 0n && amount > (free.get(name) ?? 0n)) return name === 'pods' ? 'Too many pods' : `Insufficient ${name}`;
  }
  return undefined;
}

function take(free: ResourceAmounts, req: ResourceAmounts): void {
  for (const [name, amount] of req) free.set(name, (free.get(name) ?? 0n) - amount);
}

/** Whether a pod is waiting for a node: Pending, unbound, PodScheduled=False with reason Unschedulable. */
export function isUnschedulable(pod: V1Pod): boolean {
  if (pod.spec?.nodeName || pod.metadata?.deletionTimestamp || pod.status?.phase !== 'Pending') return false;
  const c = pod.status?.conditions?.find((x) => x.type === 'PodScheduled');
  return c?.status === 'False' && c.reason === 'Unschedulable';
}

/** The loop: reads groups, nodes and pods every `scanIntervalMs`, scales up, records events. */
export class ClusterAutoscalerStandIn {
  private readonly core: CoreV1Api;
  /** Nodes decided but not created yet, by group. */
  private readonly provisioning = new Map<string, number>();
  /** Groups in backoff after a failed scale-up, until when (ms since the epoch). */
  private readonly backoffUntil = new Map<string, number>();
  /** Events written, by pod UID, reason and message: repeats bump the count, as client-go's recorder does. */
  private readonly written = new Map<string, CoreV1Event>();
  private timer?: NodeJS.Timeout;

  constructor(
    kubeconfigPath: string,
    private readonly scanIntervalMs: number,
    private readonly log: (line: string) => void = console.log,
  ) {
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfigPath);
    this.core = kc.makeApiClient(CoreV1Api);
  }

  start(): void {
    const tick = () => {
      this.loop()
        .catch((err: unknown) => this.log(`loop failed: ${(err as Error).message}`))
        .finally(() => (this.timer = setTimeout(tick, this.scanIntervalMs)));
    };
    tick();
  }

  stop(): void {
    clearTimeout(this.timer);
  }

  private async groups(): Promise<NodeGroup[]> {
    try {
      const cm = await this.core.readNamespacedConfigMap({ name: STAND_IN_CONFIGMAP, namespace: 'kube-system' });
      return JSON.parse(cm.data?.['node-groups'] ?? '[]') as NodeGroup[];
    } catch (err) {
      if ((err as { code?: number }).code === 404) return [];
      throw err;
    }
  }

  private async loop(): Promise<void> {
    const groups = await this.groups();
    if (groups.length === 0) return;
    const byName = new Map(groups.map((g) => [g.name, g]));
    const nodes = (await this.core.listNode()).items;
    const all = (await this.core.listPodForAllNamespaces()).items;
    const sizes = new Map<string, number>();
    const rooms: Room[] = [];
    for (const n of nodes) {
      const g = n.metadata?.labels?.[NODE_GROUP_LABEL];
      if (g) sizes.set(g, (sizes.get(g) ?? 0) + 1);
      const room = nodeRoom(n, all);
      if (room) rooms.push(room);
      // A node of ours not Ready yet is still coming: room as its template says.
      else if (g && byName.has(g) && !n.spec?.unschedulable) rooms.push(templateRoom(byName.get(g)!));
    }
    for (const [g, n] of this.provisioning) {
      sizes.set(g, (sizes.get(g) ?? 0) + n);
      for (let i = 0; i < n && byName.has(g); i++) rooms.push(templateRoom(byName.get(g)!));
    }
    for (const g of groups) {
      for (let s = sizes.get(g.name) ?? 0; s < g.minSize; s++) this.provision(g);
    }
    const pods = all.filter(isUnschedulable).sort((a, b) => new Date(a.metadata!.creationTimestamp!).getTime() - new Date(b.metadata!.creationTimestamp!).getTime());
    if (pods.length === 0) return;
    const now = Date.now();
    const backedOff = new Set([...this.backoffUntil].filter(([, until]) => until > now).map(([g]) => g));
    const plan = planScaleUp(pods, groups, sizes, rooms, backedOff);
    for (const s of plan.scaleUps) {
      this.log(`scale-up: ${s.group} ${s.currentSize}->${s.newSize} (max: ${s.maxSize})`);
      for (let i = s.currentSize; i < s.newSize; i++) this.provision(groups.find((g) => g.name === s.group)!);
    }
    const message = triggeredMessage(plan.scaleUps);
    for (const pod of plan.triggered) await this.record(pod, TRIGGERED_SCALE_UP, message);
    for (const { pod, message: m } of plan.notTriggered) await this.record(pod, NOT_TRIGGER_SCALE_UP, m);
  }

  /** Creates a node of `g` after its provision delay (a cloud instance registering), or gives the scale-up up if `g` fails to provision. */
  private provision(g: NodeGroup): void {
    this.provisioning.set(g.name, (this.provisioning.get(g.name) ?? 0) + 1);
    if (g.failProvisioning) {
      setTimeout(
        () => {
          this.provisioning.set(g.name, (this.provisioning.get(g.name) ?? 1) - 1);
          const until = Date.now() + (g.backoffSeconds ?? 300) * 1000;
          this.backoffUntil.set(g.name, until);
          this.log(`scale-up of ${g.name} failed: no node registered in ${g.maxNodeProvisionSeconds ?? 10} s; in backoff until ${new Date(until).toISOString()}`);
        },
        (g.maxNodeProvisionSeconds ?? 10) * 1000,
      );
      return;
    }
    setTimeout(
      () => {
        const name = `${g.name}-${randomBytes(3).toString('hex')}`;
        const node: V1Node = {
          apiVersion: 'v1',
          kind: 'Node',
          metadata: {
            name,
            annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
            labels: { ...g.template.labels, [NODE_GROUP_LABEL]: g.name, 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64' },
          },
          spec: { taints: g.template.taints },
          status: { capacity: g.template.allocatable, allocatable: g.template.allocatable },
        };
        this.core
          .createNode({ body: node })
          .then(() => this.log(`node ${name} of ${g.name} created`))
          .catch((err: unknown) => this.log(`creating node ${name} failed: ${(err as Error).message}`))
          .finally(() => this.provisioning.set(g.name, (this.provisioning.get(g.name) ?? 1) - 1));
      },
      (g.provisionDelaySeconds ?? 3) * 1000,
    );
  }

  private async record(pod: V1Pod, reason: string, message: string): Promise<void> {
    const key = `${pod.metadata!.uid}|${reason}|${message}`;
    const now = new Date();
    const seen = this.written.get(key);
    if (seen) {
      seen.count = (seen.count ?? 1) + 1;
      seen.lastTimestamp = now;
      seen.metadata!.resourceVersion = undefined;
      await this.core.replaceNamespacedEvent({ name: seen.metadata!.name!, namespace: seen.metadata!.namespace!, body: seen });
      return;
    }
    const namespace = pod.metadata!.namespace!;
    const body: CoreV1Event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: `${pod.metadata!.name}.${Date.now().toString(16)}${randomBytes(2).toString('hex')}`, namespace },
      involvedObject: { apiVersion: 'v1', kind: 'Pod', namespace, name: pod.metadata!.name, uid: pod.metadata!.uid, resourceVersion: pod.metadata!.resourceVersion },
      reason,
      message,
      type: 'Normal',
      source: { component: 'cluster-autoscaler' },
      reportingComponent: 'cluster-autoscaler',
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    const created = await this.core.createNamespacedEvent({ namespace, body });
    if (this.written.size >= 10_000) this.written.delete(this.written.keys().next().value!);
    this.written.set(key, created);
    this.log(`${reason} ${namespace}/${pod.metadata!.name}: ${message}`);
  }
}
