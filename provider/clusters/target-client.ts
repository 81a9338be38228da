import { createHash } from 'node:crypto';
import { CoreV1Api, CustomObjectsApi, KubeConfig, type V1Secret } from '@kubernetes/client-node';
import type { TargetRef } from '../model/types.js';

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
  /** Hash of the credentials it was built from; a change means rebuild. */
  fingerprint: string;
  self: boolean;
}

/** The reason and message of a kubeconfig that cannot be used, for the Target's status. */
export class KubeconfigError extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = 'KubeconfigError';
  }
}

export function targetKey(ref: TargetRef): string {
  return ref.kind === 'Target' ? `Target/${ref.namespace}/${ref.name}` : `ClusterTarget/${ref.name}`;
}

export function parseTargetKey(key: string): TargetRef {
  const parts = key.split('/');
  if (parts.slice(1).some((p) => p === '')) throw new Error(`not a target key: ${key}`);
  if (parts[0] === 'Target' && parts.length === 3) return { kind: 'Target', namespace: parts[1], name: parts[2] };
  if (parts[0] === 'ClusterTarget' && parts.length === 2) return { kind: 'ClusterTarget', namespace: '', name: parts[1] };
  throw new Error(`not a target key: ${key}`);
}

export function displayName(ref: TargetRef): string {
  return ref.kind === 'Target' ? `${ref.namespace}/${ref.name}` : ref.name;
}

/**
 * Builds a KubeConfig for a target from a kubeconfig Secret. Never reads the default
 * kubeconfig file. Throws KubeconfigError with a status reason for every way it can be wrong.
 */
export function kubeConfigFromSecret(secret: V1Secret | undefined, ref: { secretName: string; secretNamespace: string; key?: string; context?: string }): { kubeConfig: KubeConfig; fingerprint: string } {
  const where = `Secret ${ref.secretNamespace}/${ref.secretName}`;
  if (!secret) throw new KubeconfigError('SecretNotFound', `${where} does not exist`);
  const key = ref.key || 'config';
  const b64 = secret.data?.[key];
  if (b64 === undefined) {
    const keys = Object.keys(secret.data ?? {});
    throw new KubeconfigError('SecretKeyMissing', `${where} has no key "${key}"${keys.length ? ` (it has: ${keys.join(', ')})` : ''}`);
  }
  const text = Buffer.from(b64, 'base64').toString('utf8');
  const kubeConfig = new KubeConfig();
  try {
    kubeConfig.loadFromString(text);
  } catch (err) {
    throw new KubeconfigError('KubeconfigInvalid', `${where} key "${key}" is not a valid kubeconfig: ${(err as Error).message.split('\n')[0]}`);
  }
  refuseLocalCredentials(kubeConfig, where, key);
  if (ref.context) {
    if (!kubeConfig.getContextObject(ref.context)) throw new KubeconfigError('KubeconfigInvalid', `${where}: context "${ref.context}" not found in the kubeconfig`);
    kubeConfig.setCurrentContext(ref.context);
  }
  const cluster = kubeConfig.getCurrentCluster();
  if (!kubeConfig.getCurrentContext() || !cluster) throw new KubeconfigError('KubeconfigInvalid', `${where} key "${key}": the kubeconfig has no current context or cluster`);
  if (!/^https?:\/\//.test(cluster.server ?? '')) throw new KubeconfigError('KubeconfigInvalid', `${where}: cluster server "${cluster.server}" is not an http(s) URL`);
  const fingerprint = createHash('sha256').update(text).update('\0').update(ref.context ?? '').digest('hex').slice(0, 16);
  return { kubeConfig, fingerprint };
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
    fingerprint,
    self,
  };
}

/**
 * A kubeconfig from a Secret is written by whoever may create Targets, not by the provider's
 * operator: it may not make the provider run a command (`exec`, `auth-provider`) or read a
 * file of the provider's machine (`client-certificate`, `client-key`, `certificate-authority`,
 * `tokenFile`) and send it to a server of its choosing. Inline data and tokens only.
 */
function refuseLocalCredentials(kc: KubeConfig, where: string, key: string): void {
  const problems: string[] = [];
  for (const u of kc.getUsers()) {
    if (u.exec) problems.push(`user "${u.name}" runs a command (exec)`);
    if (u.authProvider) problems.push(`user "${u.name}" uses an auth-provider`);
    if (u.certFile || u.keyFile) problems.push(`user "${u.name}" reads certificate files`);
    if ((u as { tokenFile?: string }).tokenFile) problems.push(`user "${u.name}" reads a token file`);
  }
  for (const c of kc.getClusters()) {
    if (c.caFile) problems.push(`cluster "${c.name}" reads a CA file`);
  }
  if (problems.length) {
    throw new KubeconfigError('KubeconfigUnsupported', `${where} key "${key}": ${problems.join('; ')}; a Target's kubeconfig may only carry inline data (certificate-authority-data, client-certificate-data, client-key-data) or a token`);
  }
}
