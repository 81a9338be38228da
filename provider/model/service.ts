import type { V1Service, V1ServicePort, V1ServiceSpec } from '@kubernetes/client-node';
import { CILIUM_GLOBAL_SERVICE_ANNOTATION, GLOBAL_ANNOTATION, IS_DELEGATE_ANNOTATION, KEY_PREFIX, NO_PREFIX_LABEL_REGEXP_ANNOTATION, ORIGINAL_SELECTOR_ANNOTATION } from '../core/keys.js';
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
export function reroutedSelector(selector: Record<string, string> | undefined | null, noPrefixRegexp?: GoRegexp | null): Record<string, string> {
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
 * What a Service copy carries of the spec: what selects the delegates and how the target's own
 * proxies serve them, nothing that claims an address, a node port or a load balancer in the
 * target (the copy is made with the source's identity there, so anything else would let
 * whoever writes Services here claim external IPs or public exposure there: CVE-2020-8554).
 * An allow-list, so a field added to Services later is left out until it is judged.
 */
const COPIED_SPEC_FIELDS = [
  'selector',
  'ports',
  'ipFamilyPolicy',
  'sessionAffinity',
  'sessionAffinityConfig',
  'publishNotReadyAddresses',
  'internalTrafficPolicy',
  'trafficDistribution',
] as const satisfies readonly (keyof V1ServiceSpec)[];

/** What a copy carries of each port: everything but `nodePort`. */
const COPIED_PORT_FIELDS = ['name', 'protocol', 'port', 'targetPort', 'appProtocol'] as const satisfies readonly (keyof V1ServicePort)[];

/** Spec fields the target allocates for itself: left out of a copy without a word. */
const ALLOCATED_SPEC_FIELDS = new Set<string>(['clusterIP', 'clusterIPs', 'ipFamilies']);

/**
 * Annotations a copy carries besides ours (`multicluster.admiralty.io/…`): Cilium's cluster-mesh
 * Service annotations, which make the copy take part in the global Service it was rerouted for.
 * Every other annotation stays in the source: cloud and bare-metal load-balancer controllers
 * (`service.beta.kubernetes.io/…`, `cloud.google.com/…`, `metallb.universe.tf/…`), DNS and tunnel
 * controllers (external-dns, Tailscale) act on annotations, some on ClusterIP Services too, and
 * no list of them is ever complete.
 */
const COPIED_ANNOTATIONS = new Set([
  CILIUM_GLOBAL_SERVICE_ANNOTATION,
  'io.cilium/shared-service',
  'io.cilium/service-affinity',
  'service.cilium.io/global',
  'service.cilium.io/shared',
  'service.cilium.io/affinity',
  'service.cilium.io/global-sync-endpoint-slices',
]);

/**
 * Annotations of client tools' bookkeeping (kubectl's last applied configuration, Helm's release,
 * Argo CD's and Flux's tracking), left out of a copy like the rest but not named in the
 * `CopyFieldsDropped` event: they configure nothing, and nearly every Service has one.
 */
const BOOKKEEPING_ANNOTATION_PREFIXES = ['kubectl.kubernetes.io/', 'meta.helm.sh/', 'argocd.argoproj.io/', 'kustomize.toolkit.fluxcd.io/', 'helm.toolkit.fluxcd.io/'];

const isCopiedAnnotation = (key: string) => key.startsWith(KEY_PREFIX) || COPIED_ANNOTATIONS.has(key);

const isEmpty = (v: unknown) => v === undefined || v === null || (Array.isArray(v) && v.length === 0) || (typeof v === 'object' && Object.keys(v as object).length === 0);

/**
 * Why `svc` is never copied into a target, or undefined when it may be: an ExternalName Service
 * is a DNS name the source's writers choose, which a copy would publish in the target under the
 * Service's name. Pure; the service reconciler keeps no copy of such a Service anywhere.
 */
export function serviceCopyRefusal(svc: V1Service): string | undefined {
  if (svc.spec?.type !== 'ExternalName') return undefined;
  return `service ${svc.metadata?.namespace}/${svc.metadata?.name} is of type ExternalName: it is never copied to a target`;
}

/**
 * The copy of a (rerouted) local Service to write in a target: {@link copyMetadata} plus
 * `is-delegate: ""` (so no follow controller re-propagates it), with only our own and Cilium's
 * cluster-mesh annotations ({@link COPIED_ANNOTATIONS}); a spec of type `ClusterIP` (headless,
 * `clusterIP: None`, when the source is) with the rerouted selector (computed again, so an
 * unrerouted input gives the same copy) and the fields of {@link COPIED_SPEC_FIELDS}, ports
 * without `nodePort`. Never external IPs, load-balancer settings, node ports or external traffic
 * policy; cluster IPs and IP families are the target's to allocate. No status. Pure.
 * {@link serviceCopyDrops} names what was left out.
 *
 * On update, keep the target's allocated cluster IPs and IP families: the apiserver refuses to
 * change them in place.
 *
 * @throws ValidationError as {@link buildReroutedService}, when the Service has no uid, or when
 *   it is refused ({@link serviceCopyRefusal}).
 */
export function buildServiceCopy(svc: V1Service, opts: CopyOptions): V1Service {
  const refusal = serviceCopyRefusal(svc);
  if (refusal) throw new ValidationError(refusal);
  const rerouted = buildReroutedService(svc);
  const metadata = copyMetadata(rerouted.metadata, opts);
  metadata.annotations = Object.fromEntries(Object.entries(metadata.annotations ?? {}).filter(([k]) => isCopiedAnnotation(k)));
  metadata.annotations[IS_DELEGATE_ANNOTATION] = '';
  const from = rerouted.spec ?? {};
  const spec: V1ServiceSpec = { type: 'ClusterIP' };
  if (from.clusterIP === 'None') spec.clusterIP = 'None';
  for (const field of COPIED_SPEC_FIELDS) {
    if (from[field] !== undefined) (spec as Record<string, unknown>)[field] = structuredClone(from[field]);
  }
  if (from.ports) {
    spec.ports = from.ports.map((port) => {
      const out: V1ServicePort = { port: port.port };
      for (const field of COPIED_PORT_FIELDS) if (port[field] !== undefined) (out as unknown as Record<string, unknown>)[field] = port[field];
      return out;
    });
  }
  return { apiVersion: 'v1', kind: 'Service', metadata, spec };
}

/**
 * What {@link buildServiceCopy} leaves out of `svc`'s copy that its writer asked for, in a fixed
 * order, for the `CopyFieldsDropped` event: `type <T>` unless the type is ClusterIP, each set spec
 * field outside {@link COPIED_SPEC_FIELDS} but those the target allocates (`externalIPs`,
 * `loadBalancerSourceRanges`, `externalTrafficPolicy`, …), `ports[].nodePort`, and each annotation
 * left out but client tools' bookkeeping ({@link BOOKKEEPING_ANNOTATION_PREFIXES}) as
 * `annotation <key>`. Empty when the copy carries everything that matters. Pure.
 */
export function serviceCopyDrops(svc: V1Service): string[] {
  const spec = svc.spec ?? {};
  const out: string[] = [];
  if (spec.type && spec.type !== 'ClusterIP') out.push(`type ${spec.type}`);
  const copied = new Set<string>(['type', ...COPIED_SPEC_FIELDS]);
  for (const field of Object.keys(spec).sort()) {
    if (copied.has(field) || ALLOCATED_SPEC_FIELDS.has(field)) continue;
    if (isEmpty((spec as Record<string, unknown>)[field])) continue;
    out.push(field);
  }
  if (spec.ports?.some((p) => p.nodePort !== undefined && p.nodePort !== null)) out.push('ports[].nodePort');
  for (const key of Object.keys(svc.metadata?.annotations ?? {}).sort()) {
    if (isCopiedAnnotation(key) || BOOKKEEPING_ANNOTATION_PREFIXES.some((p) => key.startsWith(p))) continue;
    out.push(`annotation ${key}`);
  }
  return out;
}

/**
 * Whether a remote Service copy differs from the desired copy in what we own: labels,
 * annotations, and the spec apart from what the target allocates (cluster IPs, IP families).
 * A copy an earlier version made with node ports, external IPs or a load-balancer type differs.
 * Pure.
 */
export function serviceCopyNeedsUpdate(existing: V1Service, desired: V1Service): boolean {
  const comparable = (s: V1ServiceSpec | undefined) => {
    const spec = structuredClone(s ?? {});
    for (const field of ALLOCATED_SPEC_FIELDS) delete (spec as Record<string, unknown>)[field];
    return spec;
  };
  return (
    !stringMapEquals(existing.metadata?.labels, desired.metadata?.labels) ||
    !stringMapEquals(existing.metadata?.annotations, desired.metadata?.annotations) ||
    !equalNormalized(comparable(existing.spec), comparable(desired.spec))
  );
}
