import type { V1Service, V1ServiceSpec } from '@kubernetes/client-node';
import {
  CILIUM_GLOBAL_SERVICE_ANNOTATION,
  GLOBAL_ANNOTATION,
  IS_DELEGATE_ANNOTATION,
  NO_PREFIX_LABEL_REGEXP_ANNOTATION,
  ORIGINAL_SELECTOR_ANNOTATION,
} from '../core/keys.js';
import { ValidationError } from '../core/errors.js';
import { copyMetadata, type CopyOptions } from './follow.js';
import { parseNoPrefixRegexp, prefixLabels, type GoRegexp } from './labels.js';
import { stringMapEquals } from './maps.js';
import { equalNormalized } from './normalize.js';

/**
 * A Service selector rerouted to delegates: keys prefixed exactly as delegate labels are
 * ({@link prefixLabels}), so a selector `app=web` selects delegates labelled
 * `multicluster.admiralty.io/app=web` instead of proxies. Pure.
 */
export function reroutedSelector(
  selector: Record<string, string> | undefined | null,
  noPrefixRegexp?: GoRegexp | null,
): Record<string, string> {
  return prefixLabels(selector, noPrefixRegexp);
}

/** `a=b,c=d`, keys sorted (the form of Go's `labels.Set.String()`). */
export function formatSelector(selector: Record<string, string>): string {
  return Object.keys(selector)
    .sort()
    .map((k) => `${k}=${selector[k]}`)
    .join(',');
}

/** Parses `a=b,c=d` back; undefined when malformed (label keys and values never hold `,` or `=`). */
export function parseSelector(text: string): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  if (text === '') return out;
  for (const pair of text.split(',')) {
    const eq = pair.indexOf('=');
    if (eq <= 0 || pair.indexOf('=', eq + 1) >= 0) return undefined;
    out[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim();
  }
  return out;
}

function noPrefixRegexpOf(svc: V1Service): GoRegexp | undefined {
  return parseNoPrefixRegexp(svc.metadata?.annotations?.[NO_PREFIX_LABEL_REGEXP_ANNOTATION]);
}

/**
 * The selector the user wrote, which finds the proxy pods: the `original-selector` annotation when
 * the current selector is its rerouted form; otherwise (never rerouted, or the user has replaced
 * the selector since) the current selector.
 *
 * @throws ValidationError when the Service's `no-prefix-label-regexp` does not compile.
 */
export function originalSelector(svc: V1Service): Record<string, string> {
  const current = svc.spec?.selector ?? {};
  const saved = svc.metadata?.annotations?.[ORIGINAL_SELECTOR_ANNOTATION];
  if (saved !== undefined) {
    const parsed = parseSelector(saved);
    if (parsed && stringMapEquals(reroutedSelector(parsed, noPrefixRegexpOf(svc)), current)) return parsed;
  }
  return { ...current };
}

/**
 * The local Service rerouted to delegates: selector prefixed ({@link reroutedSelector}, honouring
 * the Service's own `no-prefix-label-regexp`), `original-selector` = the user's selector (written
 * when absent, and rewritten when the user has replaced the selector since), and
 * `io.cilium/global-service` and `multicluster.admiralty.io/global` = "true". Idempotent:
 * rerouting a rerouted Service changes nothing. Finalizers and the `has-finalizer` label are the
 * follow reconciler's business. Pure.
 *
 * @throws ValidationError when the selector is empty (a Service without selector has manually
 *   managed endpoints and cannot be rerouted) or the no-prefix regexp does not compile.
 */
export function buildReroutedService(svc: V1Service): V1Service {
  const original = originalSelector(svc);
  if (Object.keys(original).length === 0) {
    throw new ValidationError(`service ${svc.metadata?.namespace}/${svc.metadata?.name} has no selector to reroute`);
  }
  const out = structuredClone(svc);
  out.metadata = { ...out.metadata };
  out.metadata.annotations = {
    ...(out.metadata.annotations ?? {}),
    [ORIGINAL_SELECTOR_ANNOTATION]: formatSelector(original),
    [CILIUM_GLOBAL_SERVICE_ANNOTATION]: 'true',
    [GLOBAL_ANNOTATION]: 'true',
  };
  out.spec = { ...(out.spec ?? {}), selector: reroutedSelector(original, noPrefixRegexpOf(svc)) };
  return out;
}

/**
 * The copy of a (rerouted) local Service to write in a target: {@link copyMetadata} plus
 * `is-delegate: ""` (so no follow controller re-propagates it); the spec with the rerouted
 * selector (computed again, so an unrerouted input gives the same copy) and without what the
 * target allocates for itself: `clusterIP`/`clusterIPs` (kept when `None`, which makes a Service
 * headless), `ipFamilies` (the target's families may differ; `ipFamilyPolicy` is kept), node
 * ports and `healthCheckNodePort`. No status. Pure.
 *
 * On update, send the copy as it is: the apiserver keeps the allocated cluster IPs and node ports
 * when an update leaves them unset.
 *
 * @throws ValidationError as {@link buildReroutedService}, or when the Service has no uid.
 */
export function buildServiceCopy(svc: V1Service, opts: CopyOptions): V1Service {
  const rerouted = buildReroutedService(svc);
  const metadata = copyMetadata(rerouted.metadata, opts);
  metadata.annotations![IS_DELEGATE_ANNOTATION] = '';
  const spec: V1ServiceSpec = structuredClone(rerouted.spec ?? {});
  const headless = spec.clusterIP === 'None';
  delete spec.clusterIP;
  delete spec.clusterIPs;
  if (headless) spec.clusterIP = 'None';
  delete spec.ipFamilies;
  delete spec.healthCheckNodePort;
  spec.ports = spec.ports?.map(({ nodePort: _allocated, ...port }) => port);
  if (spec.ports === undefined) delete spec.ports;
  return { apiVersion: 'v1', kind: 'Service', metadata, spec };
}

/**
 * Whether a remote Service copy differs from the desired copy in what we own: labels,
 * annotations, and the spec apart from the fields the target allocates (cluster IPs, IP families,
 * node ports, health-check node port). Pure.
 */
export function serviceCopyNeedsUpdate(existing: V1Service, desired: V1Service): boolean {
  const comparable = (s: V1ServiceSpec | undefined) => {
    const spec = structuredClone(s ?? {});
    delete spec.clusterIP;
    delete spec.clusterIPs;
    delete spec.ipFamilies;
    delete spec.healthCheckNodePort;
    spec.ports = spec.ports?.map(({ nodePort: _n, ...p }) => p);
    return spec;
  };
  return (
    !stringMapEquals(existing.metadata?.labels, desired.metadata?.labels) ||
    !stringMapEquals(existing.metadata?.annotations, desired.metadata?.annotations) ||
    !equalNormalized(comparable(existing.spec), comparable(desired.spec))
  );
}
