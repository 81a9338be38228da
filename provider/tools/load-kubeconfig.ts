import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { ValidationError } from '../core/errors.js';
import { firstLine } from '../core/text.js';

export interface LoadKubeconfigOptions {
  /** `--kubeconfig`: a file; wins over the environment. */
  kubeconfig?: string;
  /** `--context`: a context of that kubeconfig; default its current context. */
  context?: string;
  /**
   * Environment: `KUBECONFIG` (one or more files, as kubectl), `HOME`, and in a pod
   * `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT`.
   */
  env?: Readonly<Record<string, string | undefined>>;
  /** Folder of the pod's ServiceAccount credentials (`token`, `ca.crt`); the kubelet's by default. */
  serviceAccountDir?: string;
}

/** Where the kubelet mounts a pod's ServiceAccount token and the cluster's CA. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** A loaded kubeconfig and a description of where it came from, for messages. */
export interface LoadedKubeconfig {
  kc: KubeConfig;
  /** The file(s) read, as the user would recognise them. */
  source: string;
  /** The context in use. */
  context: string;
}

/**
 * Loads the kubeconfig a CLI command works with, the way kubectl finds it: `--kubeconfig`,
 * else `$KUBECONFIG`, else `~/.kube/config`, else, in a pod, its ServiceAccount (as the chart's
 * post-delete Job runs `admiralty cleanup`); then selects `--context` or the current context.
 * Throws a ValidationError whose message is for the user (file unreadable or invalid, no
 * kubeconfig found, context unknown, context without a cluster).
 */
export function loadKubeconfig(opts: LoadKubeconfigOptions): LoadedKubeconfig {
  const env = opts.env ?? {};
  const kc = new KubeConfig();
  let source: string;
  try {
    if (opts.kubeconfig) {
      source = opts.kubeconfig;
      if (!existsSync(source)) throw new ValidationError(`kubeconfig ${source} does not exist`);
      kc.loadFromFile(source);
    } else if (env.KUBECONFIG) {
      source = `$KUBECONFIG (${env.KUBECONFIG})`;
      // As kubectl: the listed files are merged, the first one to name a setting wins.
      const files = env.KUBECONFIG.split(delimiter).filter(Boolean);
      for (const [i, file] of files.entries()) {
        if (!existsSync(file)) throw new ValidationError(`kubeconfig ${file} (from $KUBECONFIG) does not exist`);
        if (i === 0) kc.loadFromFile(file);
        else {
          const more = new KubeConfig();
          more.loadFromFile(file);
          mergeFirstWins(kc, more);
        }
      }
    } else {
      const home = env.HOME ?? env.USERPROFILE;
      const file = home ? join(home, '.kube', 'config') : undefined;
      const saDir = opts.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
      if (file && existsSync(file)) {
        source = file;
        kc.loadFromFile(file);
      } else if (env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT && existsSync(join(saDir, 'token'))) {
        source = `the pod's ServiceAccount (${saDir})`;
        loadInCluster(kc, env.KUBERNETES_SERVICE_HOST, env.KUBERNETES_SERVICE_PORT, saDir);
      } else {
        throw new ValidationError('no kubeconfig found: pass --kubeconfig FILE, set KUBECONFIG, or create ~/.kube/config');
      }
    }
  } catch (err) {
    if (err instanceof ValidationError) throw err;
    throw new ValidationError(`cannot read kubeconfig ${opts.kubeconfig ?? env.KUBECONFIG ?? '~/.kube/config'}: ${firstLineOf(err)}`, { cause: err });
  }

  const context = opts.context ?? kc.getCurrentContext();
  if (!context) throw new ValidationError(`kubeconfig ${source} has no current context: pass --context`);
  if (!kc.getContextObject(context)) {
    const known = kc.getContexts().map((c) => c.name);
    throw new ValidationError(`context ${context} not found in kubeconfig ${source}${known.length ? ` (contexts: ${known.join(', ')})` : ''}`);
  }
  kc.setCurrentContext(context);
  if (!kc.getCurrentCluster()) throw new ValidationError(`context ${context} in kubeconfig ${source} names no known cluster`);
  return { kc, source, context };
}

/**
 * In-cluster credentials as client-node's `loadFromCluster` builds them (the token file is
 * re-read as the kubelet rotates it), from the given environment rather than `process.env`.
 */
function loadInCluster(kc: KubeConfig, host: string, port: string, saDir: string): void {
  // An IPv6 service address needs brackets in a URL.
  const server = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
  kc.loadFromClusterAndUser(
    { name: 'inCluster', server, caFile: join(saDir, 'ca.crt'), skipTLSVerify: false },
    { name: 'inClusterUser', authProvider: { name: 'tokenFile', config: { tokenFile: join(saDir, 'token') } } },
  );
}

/** Merges `more` into `kc` as kubectl merges $KUBECONFIG files: the first file to set a name wins. */
function mergeFirstWins(kc: KubeConfig, more: KubeConfig): void {
  if (!kc.currentContext && more.currentContext) kc.setCurrentContext(more.currentContext);
  for (const c of more.getClusters()) if (!kc.getCluster(c.name)) kc.addCluster(c);
  for (const u of more.getUsers()) if (!kc.getUser(u.name)) kc.addUser(u);
  for (const c of more.getContexts()) if (!kc.getContextObject(c.name)) kc.addContext(c);
}

function firstLineOf(err: unknown): string {
  return firstLine(err instanceof Error ? err.message : String(err));
}
