import { hash } from 'node:crypto';
import type { TargetRef } from './types.js';

/** Length of the hexadecimal hash suffix appended to names that need disambiguation. */
export const HASH_HEX_LENGTH = 10;

/**
 * Longest virtual node name we produce. A node name may be a 253-character DNS subdomain, but
 * the node also carries `kubernetes.io/hostname=<node name>` and a label value is limited to 63
 * characters, so we keep node names within 63 (a DNS-1123 label is also a valid subdomain).
 */
export const VIRTUAL_NODE_NAME_MAX_LENGTH = 63;

/**
 * Longest delegate pod name we produce. Pod names may be 253 characters, but the kubelet derives
 * the pod's hostname from its name and truncates it to 63, so we stay hostname friendly.
 */
export const DELEGATE_POD_NAME_MAX_LENGTH = 63;

/** Longest name of an ordinary named object (DNS-1123 subdomain). */
export const OBJECT_NAME_MAX_LENGTH = 253;

/**
 * First 10 hex characters of the SHA-256 of `input` (UTF-8). `hash` is the one-shot form:
 * about a third of the time of a `createHash` object for these short inputs, and a delegate's
 * name is worked out on most reconciles.
 */
export function shortHash(input: string): string {
  return hash('sha256', input, 'hex').slice(0, HASH_HEX_LENGTH);
}

/** `readable-<hash>`, with `readable` cut so the whole fits in `limit` and never ends in `-`/`.`. */
function withHash(readable: string, hash: string, limit: number): string {
  const prefix = readable.slice(0, limit - HASH_HEX_LENGTH - 1).replace(/[-.]+$/, '');
  return `${prefix}-${hash}`;
}

/** A readable name that ends like one of our hashed names; such names are hashed themselves so the two forms never meet. */
const HASH_LIKE_SUFFIX = new RegExp(`-[0-9a-f]{${HASH_HEX_LENGTH}}$`);

/**
 * Name of the virtual node that represents a Target or ClusterTarget.
 *
 * Readable forms, as in the user's guide: `admiralty-namespace-<ns>-<name>` for a Target and
 * `admiralty-cluster-<name>` for a ClusterTarget (the two prefixes never meet).
 *
 * Rule for the hash suffix `-<10 hex of sha256(parts joined by "/")>`: it is added when
 * 1. the Target's namespace contains `-`: only then is the split between namespace and name
 *    ambiguous (`a-b`+`c` and `a`+`b-c` would both read `a-b-c`); a namespace without `-` ends at
 *    the first `-`, so `default` + `eu-west-1` stays plain `admiralty-namespace-default-eu-west-1`;
 * 2. the readable form is longer than {@link VIRTUAL_NODE_NAME_MAX_LENGTH} (it is then cut);
 * 3. the readable form itself ends in `-` + 10 hex characters, so that no readable name can equal
 *    a hashed one.
 * Hence names are deterministic and distinct for distinct targets (up to a 40-bit hash collision).
 * The result is a valid DNS-1123 label (so also a node name and a label value).
 *
 * Pure; called by the targets reconciler, the kubelet API and the webhook.
 */
export function virtualNodeName(ref: TargetRef): string {
  return targetScopedName(ref, 'admiralty');
}

/**
 * {@link virtualNodeName}'s rule with another first word: `<prefix>-namespace-<ns>-<name>` or
 * `<prefix>-cluster-<name>`, hashed in the same cases, within 63 characters; `admiralty` gives
 * the virtual node's name. For cluster-scoped objects made per target, such as the Kueue
 * ResourceFlavors of `admiralty kueue setup`. `prefix` must be a DNS-1123 label. Pure.
 */
export function targetScopedName(ref: TargetRef, prefix: string): string {
  const isTarget = ref.kind === 'Target';
  const parts = isTarget ? [`${prefix}-namespace`, ref.namespace, ref.name] : [`${prefix}-cluster`, ref.name];
  const readable = parts.join('-');
  const ambiguous = isTarget && ref.namespace.includes('-');
  if (!ambiguous && readable.length <= VIRTUAL_NODE_NAME_MAX_LENGTH && !HASH_LIKE_SUFFIX.test(readable)) {
    return readable;
  }
  return withHash(readable, shortHash(parts.join('/')), VIRTUAL_NODE_NAME_MAX_LENGTH);
}

/**
 * Deterministic name of the delegate pod of a proxy pod: `<proxy name>-<10 hex of
 * sha256("<source cluster>/<proxy uid>")>`, the proxy name cut (and stripped of trailing `-`/`.`)
 * so the whole fits in {@link DELEGATE_POD_NAME_MAX_LENGTH}. The same proxy always gets the same
 * name, so a crash between create and record cannot make two delegates (the second create gets
 * AlreadyExists); two proxies, or two source clusters, get different names.
 *
 * Pure; called by the delegate builder and the delegation reconciler.
 */
export function delegatePodName(proxyName: string, sourceClusterName: string, proxyUid: string): string {
  return withHash(proxyName, shortHash(`${sourceClusterName}/${proxyUid}`), DELEGATE_POD_NAME_MAX_LENGTH);
}

/**
 * Deterministic name of the copy, in a target, of the ConfigMap or Secret `name` of source
 * cluster `sourceClusterName`: `<name>-<10 hex of sha256("<source cluster>/<name>")>`, the name
 * cut (and stripped of trailing `-`/`.`) so the whole fits in {@link OBJECT_NAME_MAX_LENGTH}.
 * Two sources sending a ConfigMap of the same name into one namespace of one target get two
 * copies, and two names of one source never share a copy (up to a 40-bit hash collision, which
 * the follow reconciler detects through the copy's `parent-name`). The hash covers the name too,
 * so names cut to the same prefix still differ. Pure; called by the follow reconciler.
 */
export function copyName(name: string, sourceClusterName: string): string {
  return withHash(name, shortHash(`${sourceClusterName}/${name}`), OBJECT_NAME_MAX_LENGTH);
}

/** One part of an Admiralty-style name (see {@link admiraltyName}). */
export interface NamePart {
  value: string;
  /** `constant` parts are fixed words; `optional` parts may be empty. Default: required. */
  kind?: 'constant' | 'optional' | 'required';
}

/**
 * Admiralty's generic naming rule (its `pkg/name`), kept so objects we create in targets have the
 * names Admiralty gave them: non-empty parts joined by `-`, plus `-<10 hex of sha256(all parts
 * joined by "/")>` when (a) a non-constant part contains `-` and there is more than one
 * non-constant part, (b) an optional part is empty and there is more than one optional part, or
 * (c) the joined name is longer than `limit` (then cut to `limit - 11` characters).
 * E.g. `admiralty-source`, `my-ns`, `cluster1`, `cluster-summary-viewer` ->
 * `admiralty-source-my-ns-cluster1-cluster-summary-viewer-a5116f3f32`.
 */
export function admiraltyName(parts: NamePart[], limit: number = OBJECT_NAME_MAX_LENGTH): string {
  const variable = parts.filter((p) => p.kind !== 'constant');
  const optional = parts.filter((p) => p.kind === 'optional');
  const readable = parts
    .map((p) => p.value)
    .filter((v) => v !== '')
    .join('-');
  const needsHash = (variable.length > 1 && variable.some((p) => p.value.includes('-'))) || (optional.length > 1 && optional.some((p) => p.value === '')) || readable.length > limit;
  if (!needsHash) return readable;
  return withHash(readable, shortHash(parts.map((p) => p.value).join('/')), limit);
}

/** Longest label value. */
export const LABEL_VALUE_MAX_LENGTH = 63;

/**
 * `value` itself when it fits in a label value (object names are valid label values up to 63
 * characters), else cut and suffixed with its hash. Used for labels that carry object names
 * (target identity, source ownership), whose names may be up to 253 characters long.
 */
export function labelValueFor(value: string): string {
  if (value.length <= LABEL_VALUE_MAX_LENGTH) return value;
  return withHash(value, shortHash(value), LABEL_VALUE_MAX_LENGTH);
}
