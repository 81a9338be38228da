import { parse, parseDocument, stringify } from 'yaml';

/** Where the proxy scheduler runs out of cluster: what the sandbox puts in place of in-cluster names and mounts. */
export interface OutOfClusterSchedulerOptions {
  /** The provider's webhook server, e.g. `https://127.0.0.1:11007` (no path). */
  webhookOrigin: string;
  /** A name or IP the provider's webhook certificate carries (in the sandbox, its webhook URL's host). */
  serverName: string;
  /** PEM file of the provider's CA (ca.crt of Secret admiralty-webhook-cert). */
  caFile: string;
  /** PEM files of the scheduler's client certificate and key (Secret admiralty-proxy-scheduler-client). */
  certFile: string;
  keyFile: string;
  /** Kubeconfig of ServiceAccount admiralty-proxy-scheduler. */
  kubeconfig: string;
}

/** Name of the ConfigMap that ships the proxy scheduler's KubeSchedulerConfiguration, and its key. */
export const PROXY_SCHEDULER_CONFIG_MAP = { name: 'admiralty-proxy-scheduler', key: 'config.yaml' } as const;

/**
 * The KubeSchedulerConfiguration (as YAML) that ConfigMap admiralty-proxy-scheduler ships, out of
 * its ConfigMap (`configMapYaml`: the text of manifests/scheduler/config.yaml).
 */
export function shippedSchedulerConfig(configMapYaml: string): string {
  const cm = parse(configMapYaml) as { kind?: string; metadata?: { name?: string }; data?: Record<string, string> };
  const config = cm?.data?.[PROXY_SCHEDULER_CONFIG_MAP.key];
  if (cm?.kind !== 'ConfigMap' || cm.metadata?.name !== PROXY_SCHEDULER_CONFIG_MAP.name || typeof config !== 'string') {
    throw new Error(`not ConfigMap ${PROXY_SCHEDULER_CONFIG_MAP.name} with key ${PROXY_SCHEDULER_CONFIG_MAP.key}`);
  }
  return config;
}

/**
 * The shipped KubeSchedulerConfiguration with only what running out of cluster requires
 * changed: the extender's urlPrefix (same path, the webhook server's origin), tlsConfig.serverName,
 * caFile, certFile and keyFile, and clientConnection.kubeconfig. Everything else (profile, leader election and its
 * Lease, verbs, timeout, ignorable) stays as shipped. Pure; throws if the config has no extender
 * or more than one.
 */
export function outOfClusterSchedulerConfig(shipped: string, opts: OutOfClusterSchedulerOptions): string {
  const doc = parseDocument(shipped);
  const extenders = doc.get('extenders') as { items?: unknown[] } | undefined;
  if (extenders?.items?.length !== 1) throw new Error('the shipped scheduler config must have exactly one extender');
  const path = new URL(String(doc.getIn(['extenders', 0, 'urlPrefix']))).pathname;
  doc.setIn(['extenders', 0, 'urlPrefix'], `${opts.webhookOrigin}${path}`);
  doc.setIn(['extenders', 0, 'tlsConfig', 'serverName'], opts.serverName);
  doc.setIn(['extenders', 0, 'tlsConfig', 'caFile'], opts.caFile);
  doc.setIn(['extenders', 0, 'tlsConfig', 'certFile'], opts.certFile);
  doc.setIn(['extenders', 0, 'tlsConfig', 'keyFile'], opts.keyFile);
  doc.setIn(['clientConnection', 'kubeconfig'], opts.kubeconfig);
  return stringify(doc.toJS());
}
