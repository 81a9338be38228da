import type { V1Pod } from '@kubernetes/client-node';
import { ValidationError } from '../provider/core/errors.js';

/**
 * Checks that an admitted object has the types of a Pod in every field the webhook and the
 * delegate builder read, and throws a ValidationError naming the first field that does not.
 *
 * The kube-apiserver only ever sends decoded, typed Pods, so real reviews always pass. The
 * check is for everything else that can reach the webhook's port: without it a number where a
 * map belongs ends as a TypeError deep in the mutation, answered as an internal error.
 * Pure; does not look at values, only at types (validation of values is the apiserver's).
 */
export function checkPodShape(pod: unknown): asserts pod is V1Pod {
  const c = new ShapeChecker();
  c.object(pod, 'the object');
  const p = pod as Record<string, unknown>;
  if (p.metadata !== undefined) {
    const m = c.object(p.metadata, 'metadata');
    for (const f of ['name', 'generateName', 'namespace', 'uid']) c.optionalString(m[f], `metadata.${f}`);
    c.optionalStringMap(m.labels, 'metadata.labels');
    c.optionalStringMap(m.annotations, 'metadata.annotations');
    c.optionalList(m.finalizers, 'metadata.finalizers', (f, at) => c.string(f, at));
  }
  const s = c.object(p.spec, 'spec');
  c.list(s.containers, 'spec.containers', (x, at) => c.object(x, at));
  c.optionalList(s.initContainers, 'spec.initContainers', (x, at) => c.object(x, at));
  for (const f of ['nodeName', 'schedulerName', 'serviceAccountName', 'priorityClassName', 'runtimeClassName']) c.optionalString(s[f], `spec.${f}`);
  c.optionalStringMap(s.nodeSelector, 'spec.nodeSelector');
  c.optionalList(s.tolerations, 'spec.tolerations', (t, at) => {
    const o = c.object(t, at);
    for (const f of ['key', 'operator', 'value', 'effect']) c.optionalString(o[f], `${at}.${f}`);
    if (o.tolerationSeconds !== undefined && o.tolerationSeconds !== null && typeof o.tolerationSeconds !== 'number') c.fail(`${at}.tolerationSeconds`, 'a number');
  });
  c.optionalList(s.topologySpreadConstraints, 'spec.topologySpreadConstraints', (x, at) => c.object(x, at));
  if (s.affinity !== undefined && s.affinity !== null) {
    const a = c.object(s.affinity, 'spec.affinity');
    for (const f of ['podAffinity', 'podAntiAffinity']) if (a[f] !== undefined && a[f] !== null) c.object(a[f], `spec.affinity.${f}`);
    if (a.nodeAffinity !== undefined && a.nodeAffinity !== null) {
      const n = c.object(a.nodeAffinity, 'spec.affinity.nodeAffinity');
      const reqAt = 'spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution';
      if (n.requiredDuringSchedulingIgnoredDuringExecution !== undefined && n.requiredDuringSchedulingIgnoredDuringExecution !== null) {
        const r = c.object(n.requiredDuringSchedulingIgnoredDuringExecution, reqAt);
        c.optionalList(r.nodeSelectorTerms, `${reqAt}.nodeSelectorTerms`, (t, at) => c.nodeSelectorTerm(t, at));
      }
      c.optionalList(n.preferredDuringSchedulingIgnoredDuringExecution, 'spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution', (x, at) => {
        const o = c.object(x, at);
        if (typeof o.weight !== 'number') c.fail(`${at}.weight`, 'a number');
        c.nodeSelectorTerm(o.preference, `${at}.preference`);
      });
    }
  }
}

class ShapeChecker {
  fail(at: string, what: string): never {
    throw new ValidationError(`the pod is malformed: ${at} must be ${what}`);
  }

  object(v: unknown, at: string): Record<string, unknown> {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) this.fail(at, 'an object');
    return v as Record<string, unknown>;
  }

  string(v: unknown, at: string): void {
    if (typeof v !== 'string') this.fail(at, 'a string');
  }

  optionalString(v: unknown, at: string): void {
    if (v !== undefined && v !== null) this.string(v, at);
  }

  optionalStringMap(v: unknown, at: string): void {
    if (v === undefined || v === null) return;
    const o = this.object(v, at);
    for (const [k, x] of Object.entries(o)) if (typeof x !== 'string') this.fail(`${at}[${JSON.stringify(k.slice(0, 100))}]`, 'a string');
  }

  list(v: unknown, at: string, each: (x: unknown, at: string) => void): void {
    if (!Array.isArray(v)) this.fail(at, 'a list');
    v.forEach((x, i) => each(x, `${at}[${i}]`));
  }

  optionalList(v: unknown, at: string, each: (x: unknown, at: string) => void): void {
    if (v !== undefined && v !== null) this.list(v, at, each);
  }

  nodeSelectorTerm(v: unknown, at: string): void {
    const t = this.object(v, at);
    for (const f of ['matchExpressions', 'matchFields']) {
      this.optionalList(t[f], `${at}.${f}`, (e, eAt) => {
        const o = this.object(e, eAt);
        this.string(o.key, `${eAt}.key`);
        this.string(o.operator, `${eAt}.operator`);
        this.optionalList(o.values, `${eAt}.values`, (x, xAt) => this.string(x, xAt));
      });
    }
  }
}
