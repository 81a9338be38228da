import type { CoreV1Api } from '@kubernetes/client-node';
import { classifyApiError, statusMessage } from '../core/errors.js';

/** Where every kube-apiserver publishes the CA it trusts for client certificates. */
export const CLIENT_CA_CONFIGMAP = { namespace: 'kube-system', name: 'extension-apiserver-authentication', key: 'client-ca-file' } as const;

/**
 * The CA bundle the kubelet API trusts for client certificates, when the operator gave no
 * `--kubelet-client-ca-file`: the apiserver's own `--client-ca-file`, which it publishes in
 * kube-system/extension-apiserver-authentication. Real kubelets trust that CA too, so it is the
 * one that signs the apiserver's kubelet client certificate (`kubectl logs`, `exec`); the
 * service account's ca.crt is the serving CA, which is a different one on some distributions.
 *
 * Reading it needs the standard Role `extension-apiserver-authentication-reader` in
 * kube-system, which the manifests bind. Returns the PEM bundle, or a reason it has none.
 */
export async function readClusterClientCa(core: CoreV1Api): Promise<{ pem: string } | { reason: string }> {
  const where = `ConfigMap ${CLIENT_CA_CONFIGMAP.namespace}/${CLIENT_CA_CONFIGMAP.name}`;
  try {
    const cm = await core.readNamespacedConfigMap({ name: CLIENT_CA_CONFIGMAP.name, namespace: CLIENT_CA_CONFIGMAP.namespace });
    const pem = cm.data?.[CLIENT_CA_CONFIGMAP.key];
    if (!pem || !pem.includes('-----BEGIN CERTIFICATE-----')) return { reason: `${where} has no ${CLIENT_CA_CONFIGMAP.key} (the apiserver runs without --client-ca-file)` };
    return { pem };
  } catch (err) {
    const kind = classifyApiError(err);
    if (kind === 'Forbidden') return { reason: `reading ${where} is forbidden: bind the Role extension-apiserver-authentication-reader in kube-system to the provider (${statusMessage(err)})` };
    return { reason: `reading ${where}: ${statusMessage(err)}` };
  }
}
