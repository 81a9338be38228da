import { ValidationError } from '../core/errors.js';
import { parseGoRegexp } from './labels.js';
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
}

/** Outcome of {@link parseTarget}: the normalized spec, or a condition reason and message. */
export type ParseTargetResult =
  | { ok: true; spec: NormalizedTargetSpec }
  | { ok: false; reason: string; message: string };

/**
 * Validates a Target or ClusterTarget and applies defaults. Rules: exactly one of `self: true`
 * and `kubeconfigSecret`; the Secret name is a valid object name; a ClusterTarget names the
 * Secret's namespace; a Target may not name another namespace than its own (it would read
 * another namespace's Secret with the provider's rights); `excludedLabelsRegexp` compiles.
 * The failure's reason and message go to the Target's Ready condition.
 *
 * Pure; called by the targets reconciler and the clusters registry.
 */
export function parseTarget(obj: Target, kind: 'Target' | 'ClusterTarget'): ParseTargetResult {
  const name = obj.metadata?.name ?? '';
  const namespace = kind === 'Target' ? obj.metadata?.namespace ?? '' : '';
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

  if (self) return { ok: true, spec: { ref, self: true, excludedLabelsRegexp } };

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
    return (
      !!d &&
      d.status === c.status &&
      d.reason === c.reason &&
      d.message === c.message &&
      d.lastTransitionTime === c.lastTransitionTime &&
      d.observedGeneration === c.observedGeneration
    );
  });
}
