import type { V1PodSpec, V1Toleration } from '@kubernetes/client-node';
import { parseList, type ResourceAmounts } from '../provider/model/resources.js';
import type { ClusterSummary } from '../provider/model/types.js';

// What a target's admission makes of a delegate by the classes it names (RuntimeClass,
// PriorityClass), judged from what the target's ClusterSummary publishes of them.

/** What one RuntimeClass of a target does to a pod that names it, with quantities parsed. */
export interface FitRuntimeClass {
  /** `overhead.podFixed`, which the target's admission sets as the pod's `spec.overhead`. */
  overhead: ResourceAmounts;
  /** `scheduling.nodeSelector`, merged into the pod's. */
  nodeSelector?: Readonly<Record<string, string>>;
  /** `scheduling.tolerations`, added to the pod's. */
  tolerations: readonly V1Toleration[];
}

/** A target's RuntimeClasses by name, as its summary publishes them. */
export type RuntimeClasses = ReadonlyMap<string, FitRuntimeClass>;

const parsed = new WeakMap<ClusterSummary, RuntimeClasses>();

/**
 * The RuntimeClasses a ClusterSummary publishes, parsed once per summary object; undefined when
 * it publishes none (its writer is an earlier version, or may not list them): runtime classes
 * are then not judged. Pure apart from the cache.
 */
export function runtimeClassesOfSummary(summary: ClusterSummary): RuntimeClasses | undefined {
  if (!summary.runtimeClasses) return undefined;
  const cached = parsed.get(summary);
  if (cached) return cached;
  const out = new Map<string, FitRuntimeClass>();
  for (const rc of summary.runtimeClasses) {
    out.set(rc.name, { overhead: parseList(rc.overhead), ...(rc.nodeSelector ? { nodeSelector: rc.nodeSelector } : {}), tolerations: rc.tolerations ?? [] });
  }
  parsed.set(summary, out);
  return out;
}

const parsedPriority = new WeakMap<ClusterSummary, ReadonlySet<string>>();

/**
 * The names of the PriorityClasses a ClusterSummary publishes, once per summary object;
 * undefined when it publishes none (its writer is an earlier version, or may not list them).
 * Pure apart from the cache.
 */
export function priorityClassesOfSummary(summary: ClusterSummary): ReadonlySet<string> | undefined {
  if (!summary.priorityClasses) return undefined;
  let names = parsedPriority.get(summary);
  if (!names) parsedPriority.set(summary, (names = new Set(summary.priorityClasses)));
  return names;
}

/**
 * Why a target's Priority admission would refuse the delegate `spec`: it names a PriorityClass
 * the target does not have (`names`, undefined when unknown: nothing is judged). Pure.
 */
export function priorityClassRefusal(spec: V1PodSpec, names: ReadonlySet<string> | undefined, target: string): string | undefined {
  const name = spec.priorityClassName;
  if (!name || !names || names.has(name)) return undefined;
  return `${target} has no PriorityClass ${name}`;
}

/** The delegate's spec as a target's RuntimeClass admission makes it, and the overhead it sets. */
export type AsAdmitted = { spec: V1PodSpec; overhead?: ResourceAmounts; refusal?: undefined } | { refusal: string };

/**
 * What a target's RuntimeClass admission does to the delegate `spec` (upstream's RuntimeClass
 * plugin): a pod naming a class the target lacks is refused; else the class's node selector is
 * merged into the pod's (a key the pod sets to another value is refused, as a conflict), its
 * tolerations are added, and its overhead becomes the pod's. A spec naming no class, or a target
 * whose classes are unknown (`classes` undefined), is returned as it is, overhead unknown.
 * `target` names the target in a refusal. Pure; `spec` is not changed.
 */
export function asTargetAdmits(spec: V1PodSpec, classes: RuntimeClasses | undefined, target: string): AsAdmitted {
  const name = spec.runtimeClassName;
  if (!name || !classes) return { spec };
  const rc = classes.get(name);
  if (!rc) return { refusal: `${target} has no RuntimeClass ${name}` };
  for (const [key, value] of Object.entries(rc.nodeSelector ?? {})) {
    // The pod's own entry only: a label key may be any name, `constructor` too.
    const own = spec.nodeSelector && Object.prototype.hasOwnProperty.call(spec.nodeSelector, key) ? spec.nodeSelector[key] : undefined;
    if (own !== undefined && own !== value) {
      return { refusal: `the RuntimeClass ${name} of ${target} selects nodes with ${key}=${value}, and the pod's nodeSelector has ${key}=${own}` };
    }
  }
  return {
    spec: {
      ...spec,
      ...(rc.nodeSelector ? { nodeSelector: { ...spec.nodeSelector, ...rc.nodeSelector } } : {}),
      ...(rc.tolerations.length ? { tolerations: [...(spec.tolerations ?? []), ...rc.tolerations] } : {}),
    },
    overhead: rc.overhead,
  };
}
