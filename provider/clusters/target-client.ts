import { createHash } from 'node:crypto';
import { AuthenticationV1Api, AuthorizationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, type V1Secret } from '@kubernetes/client-node';
import type { TargetRef } from '../model/types.js';
import type { ServerAddressPolicy } from './server-address-policy.js';
import { buildTargetKubeConfig, KubeconfigError, parseTargetKubeconfig } from './target-kubeconfig.js';

/** One target cluster's connection: its own KubeConfig and clients, never shared with another. */
export interface TargetClient {
  /** `Target/<ns>/<name>` or `ClusterTarget/<name>`. */
  key: string;
  ref: TargetRef;
  /** Name used in logs and metric labels: `<ns>/<name>` or `<name>`. */
  displayName: string;
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  /** Who we are there and what we may do (SelfSubjectReview, SelfSubjectAccessReview: every user may ask): explains its refusals. */
  authentication: Pick<AuthenticationV1Api, 'createSelfSubjectReview'>;
  authorization: Pick<AuthorizationV1Api, 'createSelfSubjectAccessReview'>;
  /** Hash of the credentials it was built from; a change means rebuild. */
  fingerprint: string;
  self: boolean;
}

export function targetKey(ref: TargetRef): string {
  return ref.kind === 'Target' ? `Target/${ref.namespace}/${ref.name}` : `ClusterTarget/${ref.name}`;
}

export function parseTargetKey(key: string): TargetRef {
  const parts = key.split('/');
  if (parts.slice(1).some((p) => p === '')) throw new Error(`not a target key: ${key}`);
  const [kind, first, second, third] = parts;
  if (kind === 'Target' && first !== undefined && second !== undefined && third === undefined) {
    return { kind: 'Target', namespace: first, name: second };
  }
  if (kind === 'ClusterTarget' && first !== undefined && second === undefined) {
    return { kind: 'ClusterTarget', namespace: '', name: first };
  }
  throw new Error(`not a target key: ${key}`);
}

export function displayName(ref: TargetRef): string {
  return ref.kind === 'Target' ? `${ref.namespace}/${ref.name}` : ref.name;
}

/**
 * Builds a KubeConfig for a target from a kubeconfig Secret. Never reads the default
 * kubeconfig file, never lets client-node parse the Secret's text (see target-kubeconfig.ts),
 * and dials only addresses the policy allows. Throws KubeconfigError with a status reason for
 * every way it can be wrong; its messages never quote the Secret's values. Returns `current`
 * itself when the Secret still holds what it was built from, and throws `refused` itself when it
 * still holds the text that was refused (a refusal of the text carries its `fingerprint`): a
 * Secret is read on every probe, and parsed only when it changed, whether it was good or not.
 */
export function kubeConfigFromSecret(
  secret: V1Secret | undefined,
  ref: { secretName: string; secretNamespace: string; key?: string; context?: string },
  policy: ServerAddressPolicy,
  current?: { kubeConfig: KubeConfig; fingerprint: string },
  refused?: KubeconfigError,
): { kubeConfig: KubeConfig; fingerprint: string } {
  const where = `Secret ${ref.secretNamespace}/${ref.secretName}`;
  if (!secret) throw new KubeconfigError('SecretNotFound', `${where} does not exist`);
  const key = ref.key || 'config';
  const b64 = secret.data?.[key];
  if (b64 === undefined) {
    const keys = Object.keys(secret.data ?? {});
    throw new KubeconfigError('SecretKeyMissing', `${where} has no key "${key}"${keys.length ? ` (it has: ${keys.join(', ')})` : ''}`);
  }
  const text = Buffer.from(b64, 'base64').toString('utf8');
  // The Secret is read again on every probe, but parsed only when its text changed.
  const fingerprint = createHash('sha256')
    .update(text)
    .update('\0')
    .update(ref.context ?? '')
    .digest('hex')
    .slice(0, 16);
  if (current && current.fingerprint === fingerprint) return current;
  if (refused && refused.fingerprint === fingerprint) throw refused;
  let parsed;
  try {
    parsed = parseTargetKubeconfig(text, { context: ref.context, policy });
  } catch (err) {
    if (err instanceof KubeconfigError) throw new KubeconfigError(err.reason, `${where} key "${key}": ${err.message}`, fingerprint);
    throw err;
  }
  return { kubeConfig: buildTargetKubeConfig(parsed, policy), fingerprint };
}

/** Builds the clients of one target. */
export function createTargetClient(ref: TargetRef, kubeConfig: KubeConfig, fingerprint: string, self: boolean): TargetClient {
  return {
    key: targetKey(ref),
    ref,
    displayName: displayName(ref),
    kubeConfig,
    core: kubeConfig.makeApiClient(CoreV1Api),
    custom: kubeConfig.makeApiClient(CustomObjectsApi),
    authentication: kubeConfig.makeApiClient(AuthenticationV1Api),
    authorization: kubeConfig.makeApiClient(AuthorizationV1Api),
    fingerprint,
    self,
  };
}
