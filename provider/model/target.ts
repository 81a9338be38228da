import { ValidationError } from '../core/errors.js';
import { parseGoRegexp } from './labels.js';
import { parseQuantity } from './quantity.js';
import type { ResourceAmounts } from './resources.js';
import type { Condition, Target, TargetRef } from './types.js';

/** Default data key of the kubeconfig in its Secret (Admiralty's). */
export const DEFAULT_KUBECONFIG_KEY = 'config';

/** Reasons of a `Ready=False` condition for a Target whose spec is unusable. */
export const INVALID_SPEC_REASON = 'InvalidSpec';
export const INVALID_EXCLUDED_LABELS_REGEXP_REASON = 'InvalidExcludedLabelsRegexp';

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A Target or ClusterTarget spec once validated, with defaults applied. */
export interface NormalizedTargetSpec {
  ref: TargetRef;
  self: boolean;
  /** Set when `self` is false. `namespace` is the Target's own for a Target. */
  kubeconfigSecret?: { namespace: string; name: string; key: string; context?: string };
  /** Source of the regexp (already known to compile), or null. */
  excludedLabelsRegexp: string | null;
  placement: TargetPlacement;
}

/** `spec.placement` of a Target or ClusterTarget, defaults applied. */
export interface TargetPlacement {
  /** Share of placements, integer 0..{@link MAX_TARGET_WEIGHT}; 0: only when no target of weight > 0 can take the pod. */
  weight: number;
  /** Order for the `burst` policy, lower first, integer within ±{@link MAX_TARGET_PRIORITY}. */
  priority: number;
  /**
   * `spec.placement.burstCapacity` in nano-units, by resource (`cpu`, `memory`, `pods`; a
   * resource left out is not limited), or undefined: the target takes only what its current
   * nodes can hold.
   */
  burstCapacity?: ResourceAmounts;
}

/** Resources `spec.placement.burstCapacity` may bound. */
export const BURST_CAPACITY_RESOURCES = ['cpu', 'memory', 'pods'] as const;

export const DEFAULT_TARGET_PLACEMENT: TargetPlacement = { weight: 1, priority: 0 };
/** Bounds of `spec.placement` (the CRD's validation says the same). */
export const MAX_TARGET_WEIGHT = 1000;
export const MAX_TARGET_PRIORITY = 1000;

/**
 * `spec.placement` with defaults applied, or a message saying which field is wrong (a field
 * that is not an integer within its bounds). Pure.
 */
export function parseTargetPlacement(spec: Target['spec'] | undefined): { ok: true; placement: TargetPlacement } | { ok: false; message: string } {
  const p = spec?.placement ?? {};
  const field = (name: 'weight' | 'priority', min: number, max: number): number | string => {
    const v: unknown = p[name];
    if (v === undefined || v === null) return DEFAULT_TARGET_PLACEMENT[name];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) return `spec.placement.${name} must be an integer from ${min} to ${max}`;
    return v;
  };
  const weight = field('weight', 0, MAX_TARGET_WEIGHT);
  const priority = field('priority', -MAX_TARGET_PRIORITY, MAX_TARGET_PRIORITY);
  if (typeof weight === 'string') return { ok: false, message: weight };
  if (typeof priority === 'string') return { ok: false, message: priority };
  const burst = p.burstCapacity;
  if (burst === undefined || burst === null) return { ok: true, placement: { weight, priority } };
  if (typeof burst !== 'object' || Array.isArray(burst)) return { ok: false, message: 'spec.placement.burstCapacity must be an object of cpu, memory and pods' };
  const burstCapacity: ResourceAmounts = new Map();
  for (const [name, value] of Object.entries(burst)) {
    if (!(BURST_CAPACITY_RESOURCES as readonly string[]).includes(name)) return { ok: false, message: `spec.placement.burstCapacity.${name}: only ${BURST_CAPACITY_RESOURCES.join(', ')} are allowed` };
    let amount: bigint;
    try {
      amount = parseQuantity(value as string | number);
    } catch {
      amount = -1n;
    }
    if (amount < 0n) return { ok: false, message: `spec.placement.burstCapacity.${name} must be a quantity of at least 0` };
    burstCapacity.set(name, amount);
  }
  if (burstCapacity.size === 0) return { ok: false, message: 'spec.placement.burstCapacity must name at least one of cpu, memory, pods' };
  return { ok: true, placement: { weight, priority, burstCapacity } };
}

/** Outcome of {@link parseTarget}: the normalized spec, or a condition reason and message. */
export type ParseTargetResult = { ok: true; spec: NormalizedTargetSpec } | { ok: false; reason: string; message: string };

/**
 * Validates a Target or ClusterTarget and applies defaults. Rules: exactly one of `self: true`
 * and `kubeconfigSecret`; the Secret name is a valid object name; a ClusterTarget names the
 * Secret's namespace; a Target may not name another namespace than its own (it would read
 * another namespace's Secret with the provider's rights); `excludedLabelsRegexp` compiles;
 * `placement` holds integers within bounds ({@link parseTargetPlacement}).
 * The failure's reason and message go to the Target's Ready condition.
 *
 * Pure; called by the targets reconciler and the clusters registry.
 */
export function parseTarget(obj: Target, kind: 'Target' | 'ClusterTarget'): ParseTargetResult {
  const name = obj.metadata?.name ?? '';
  const namespace = kind === 'Target' ? (obj.metadata?.namespace ?? '') : '';
  const ref: TargetRef = { kind, namespace, name };
  const spec = obj.spec ?? {};
  const fail = (message: string, reason = INVALID_SPEC_REASON): ParseTargetResult => ({ ok: false, reason, message });

  if (!name || (kind === 'Target' && !namespace)) return fail(`${kind} has no name${kind === 'Target' ? ' or namespace' : ''}`);
  const self = spec.self === true;
  const secret = spec.kubeconfigSecret;
  if (self && secret) return fail('spec.self and spec.kubeconfigSecret are mutually exclusive: set exactly one');
  if (!self && !secret) return fail('set exactly one of spec.self: true and spec.kubeconfigSecret');

  let excludedLabelsRegexp: string | null = null;
  if (spec.excludedLabelsRegexp !== undefined && spec.excludedLabelsRegexp !== null && spec.excludedLabelsRegexp !== '') {
    try {
      parseGoRegexp(spec.excludedLabelsRegexp);
    } catch (err) {
      if (err instanceof ValidationError) {
        return fail(`spec.excludedLabelsRegexp: ${err.message}`, INVALID_EXCLUDED_LABELS_REGEXP_REASON);
      }
      throw err;
    }
    excludedLabelsRegexp = spec.excludedLabelsRegexp;
  }

  const placement = parseTargetPlacement(spec);
  if (!placement.ok) return fail(placement.message);

  if (self) return { ok: true, spec: { ref, self: true, excludedLabelsRegexp, placement: placement.placement } };

  const secretName = secret!.name ?? '';
  if (!secretName) return fail('spec.kubeconfigSecret.name is empty');
  if (secretName.length > 253 || !DNS1123_SUBDOMAIN.test(secretName)) {
    return fail(`spec.kubeconfigSecret.name ${JSON.stringify(secretName)} is not a valid Secret name`);
  }
  let secretNamespace: string;
  if (kind === 'ClusterTarget') {
    if (!secret!.namespace) return fail('spec.kubeconfigSecret.namespace is required for a ClusterTarget');
    secretNamespace = secret!.namespace;
  } else {
    if (secret!.namespace && secret!.namespace !== namespace) {
      return fail(`spec.kubeconfigSecret.namespace must be empty or ${JSON.stringify(namespace)}: a Target reads Secrets of its own namespace only`);
    }
    secretNamespace = namespace;
  }
  const key = secret!.key || DEFAULT_KUBECONFIG_KEY;
  return {
    ok: true,
    spec: {
      ref,
      self: false,
      kubeconfigSecret: { namespace: secretNamespace, name: secretName, key, ...(secret!.context ? { context: secret!.context } : {}) },
      excludedLabelsRegexp,
      placement: placement.placement,
    },
  };
}

/** A condition to set; `lastTransitionTime` is filled by {@link setCondition}. */
export type ConditionInput = Omit<Condition, 'lastTransitionTime'>;

/**
 * Returns a new condition list with `cond` set (replacing the condition of the same type, or
 * appended). `lastTransitionTime` is kept from the previous condition when the status did not
 * change, else set to `now` (ISO). The input list is not modified.
 */
export function setCondition(conditions: Condition[] | undefined, cond: ConditionInput, now: string): Condition[] {
  const list = conditions ?? [];
  const old = list.find((c) => c.type === cond.type);
  const next: Condition = {
    ...cond,
    lastTransitionTime: old && old.status === cond.status ? old.lastTransitionTime : now,
  };
  if (next.observedGeneration === undefined) delete next.observedGeneration;
  return old ? list.map((c) => (c.type === cond.type ? next : c)) : [...list, next];
}

/** The `Ready` condition of a Target: True with `reason`, or False with `reason` and `message`. */
export function readyCondition(ready: boolean, reason: string, message: string, observedGeneration?: number): ConditionInput {
  const cond: ConditionInput = { type: 'Ready', status: ready ? 'True' : 'False', reason, message };
  if (observedGeneration !== undefined) cond.observedGeneration = observedGeneration;
  return cond;
}

/** Whether two condition lists are equal (order-insensitive, by type); lets callers skip status writes. */
export function conditionsEqual(a: Condition[] | undefined, b: Condition[] | undefined): boolean {
  const x = a ?? [];
  const y = b ?? [];
  if (x.length !== y.length) return false;
  return x.every((c) => {
    const d = y.find((e) => e.type === c.type);
    return !!d && d.status === c.status && d.reason === c.reason && d.message === c.message && d.lastTransitionTime === c.lastTransitionTime && d.observedGeneration === c.observedGeneration;
  });
}
