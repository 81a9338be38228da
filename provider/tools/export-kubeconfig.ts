import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { CoreV1Api, type V1Secret } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { classifyApiError, statusMessage, ValidationError } from '../core/errors.js';
import { type CliIo, writeLine } from './cli-io.js';
import { loadKubeconfig } from './load-kubeconfig.js';

const USAGE = `usage: admiralty export-kubeconfig [--kubeconfig FILE] [--context NAME] -n NAMESPACE SERVICE_ACCOUNT --as SECRET_NAME
                                  [--secret-namespace NS] [--server URL] [--ca-file FILE] [--duration 8760h]

Prints (on stdout) a Secret whose key "config" holds a kubeconfig that authenticates as the
service account NAMESPACE/SERVICE_ACCOUNT of the cluster of the chosen context, like
"kubemcsa export" in Admiralty's user guide. Run it against a target cluster and apply the
output in the source cluster, then reference the Secret from a Target:

  admiralty export-kubeconfig --context target -n default c1 --as c2 | kubectl --context source apply -f -

The service account is usually made by a Source object in the target (spec.serviceAccountName).

  --kubeconfig FILE       kubeconfig to read (default: $KUBECONFIG, else ~/.kube/config)
  --context NAME          context of that kubeconfig (default: its current context)
  -n, --namespace NS      namespace of the service account; also the namespace of the exported context
  --as NAME               name of the Secret (required)
  --secret-namespace NS   namespace of the Secret (default: default)
  --server URL            API server address written in the kubeconfig, when the source reaches
                          the target at another address (default: the context's cluster's server)
  --ca-file FILE          PEM CA bundle that signs the server's certificate (default: the
                          certificate authority of the context's cluster)
  --duration D            requested token lifetime, Go style (8760h, 30m, 1h30m; default 8760h,
                          one year; at least 10m). The API server may cap it
                          (--service-account-max-token-expiration); the real expiry is printed on stderr.`;

/** Default requested token lifetime: one year. */
export const DEFAULT_TOKEN_DURATION_SECONDS = 365 * 24 * 3600;
/** The TokenRequest API refuses anything shorter. */
const MIN_TOKEN_DURATION_SECONDS = 600;

export interface KubeconfigSecretOptions {
  secretName: string;
  secretNamespace: string;
  /** API server URL of the cluster the token belongs to. */
  server: string;
  /** Base64 PEM of the CA that signs the server certificate; omitted when undefined. */
  caData?: string;
  /** Bearer token of the service account. */
  token: string;
  /** Namespace of the kubeconfig's context (the service account's namespace). */
  namespace: string;
  /** Name of the cluster, user and context inside the kubeconfig. */
  clusterName: string;
  /** Only when there is no CA: write `insecure-skip-tls-verify: true` (copied from the source context). */
  insecureSkipTlsVerify?: boolean;
}

/**
 * The Secret that a Target's `spec.kubeconfigSecret` points to: `stringData.config` is a
 * kubeconfig with one cluster, one token user and one context (namespace `namespace`), which is
 * also the current context. Pure and deterministic.
 */
export function buildKubeconfigSecret(opts: KubeconfigSecretOptions): V1Secret {
  const cluster: Record<string, unknown> = { server: opts.server };
  if (opts.caData) cluster['certificate-authority-data'] = opts.caData;
  else if (opts.insecureSkipTlsVerify) cluster['insecure-skip-tls-verify'] = true;
  const kubeconfig = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: opts.clusterName, cluster }],
    users: [{ name: opts.clusterName, user: { token: opts.token } }],
    contexts: [{ name: opts.clusterName, context: { cluster: opts.clusterName, user: opts.clusterName, namespace: opts.namespace } }],
    'current-context': opts.clusterName,
  };
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: opts.secretName, namespace: opts.secretNamespace },
    type: 'Opaque',
    stringData: { config: stringify(kubeconfig, { lineWidth: 0 }) },
  };
}

/**
 * Parses a Go-style duration (`8760h`, `90m`, `1h30m`, `3600s`) into whole seconds.
 * Throws a ValidationError on anything else.
 */
export function parseDurationSeconds(text: string): number {
  const units: Record<string, number> = { h: 3600, m: 60, s: 1 };
  const re = /(\d+(?:\.\d+)?)(h|m|s)/g;
  if (!/^(\d+(?:\.\d+)?(h|m|s))+$/.test(text)) {
    throw new ValidationError(`invalid duration ${JSON.stringify(text)}: use a number with a unit h, m or s, as 8760h or 1h30m`);
  }
  let seconds = 0;
  for (const m of text.matchAll(re)) {
    const unit = units[m[2] ?? ''];
    if (unit === undefined) throw new ValidationError(`invalid duration ${JSON.stringify(text)}: unknown unit`);
    seconds += Number(m[1]) * unit;
  }
  return Math.round(seconds);
}

/**
 * The `export-kubeconfig` command: requests a token for a service account with the TokenRequest
 * API and prints a Secret manifest holding a kubeconfig for it. Returns the exit code: 0 done,
 * 1 failure (message on stderr), 2 bad usage. Writes only the manifest on stdout, so that it
 * can be piped to `kubectl apply -f -`.
 */
// eslint-disable-next-line max-lines-per-function -- usage, the TokenRequest and the manifest are the steps of one command, each with its exit code
export async function exportKubeconfigCli(args: string[], io: CliIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      options: {
        kubeconfig: { type: 'string' },
        context: { type: 'string' },
        namespace: { type: 'string', short: 'n' },
        as: { type: 'string' },
        'secret-namespace': { type: 'string' },
        server: { type: 'string' },
        'ca-file': { type: 'string' },
        duration: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    writeLine(io.stderr, `export-kubeconfig: ${(err as Error).message}`);
    writeLine(io.stderr, USAGE);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    writeLine(io.stdout, USAGE);
    return 0;
  }
  const problems: string[] = [];
  if (!values.namespace) problems.push('-n NAMESPACE is required');
  const [serviceAccount, ...otherAccounts] = positionals;
  if (serviceAccount === undefined || otherAccounts.length > 0) problems.push(positionals.length ? `one SERVICE_ACCOUNT expected, got ${positionals.join(' ')}` : 'SERVICE_ACCOUNT is required');
  if (!values.as) problems.push('--as SECRET_NAME is required');
  let durationSeconds = DEFAULT_TOKEN_DURATION_SECONDS;
  if (values.duration !== undefined) {
    try {
      durationSeconds = parseDurationSeconds(values.duration);
      if (durationSeconds < MIN_TOKEN_DURATION_SECONDS) problems.push(`--duration must be at least 10m (the TokenRequest API minimum), got ${values.duration}`);
    } catch (err) {
      problems.push(`--duration: ${(err as Error).message}`);
    }
  }
  if (problems.length || serviceAccount === undefined) {
    for (const p of problems) writeLine(io.stderr, `export-kubeconfig: ${p}`);
    writeLine(io.stderr, USAGE);
    return 2;
  }
  const namespace = values.namespace!;

  try {
    const { kc, context } = loadKubeconfig({ kubeconfig: values.kubeconfig, context: values.context, env: io.env });
    const cluster = kc.getCurrentCluster()!;
    const server = values.server ?? cluster.server;
    let caData: string | undefined;
    if (values['ca-file']) caData = readPemBase64(values['ca-file'], '--ca-file');
    else if (cluster.caData) caData = cluster.caData;
    else if (cluster.caFile) caData = readPemBase64(cluster.caFile, `certificate-authority of cluster ${cluster.name}`);
    const insecureSkipTlsVerify = !caData && cluster.skipTLSVerify;
    if (!caData && server.startsWith('https:')) {
      writeLine(io.stderr, `export-kubeconfig: warning: no certificate authority known for ${server}${insecureSkipTlsVerify ? '; the kubeconfig skips TLS verification' : '; pass --ca-file'}`);
    }

    const core = kc.makeApiClient(CoreV1Api);
    let tokenRequest;
    try {
      tokenRequest = await core.createNamespacedServiceAccountToken({
        name: serviceAccount,
        namespace,
        body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { audiences: [], expirationSeconds: durationSeconds } },
      });
    } catch (err) {
      writeLine(io.stderr, `export-kubeconfig: ${tokenErrorMessage(err, { namespace, serviceAccount, context, server })}`);
      return 1;
    }
    const token = tokenRequest.status?.token;
    if (!token) {
      writeLine(io.stderr, `export-kubeconfig: the API server returned no token for service account ${namespace}/${serviceAccount}`);
      return 1;
    }

    const secret = buildKubeconfigSecret({
      secretName: values.as!,
      secretNamespace: values['secret-namespace'] ?? 'default',
      server,
      caData,
      token,
      namespace,
      clusterName: context,
      insecureSkipTlsVerify,
    });
    io.stdout.write(stringify(secret, { lineWidth: 0 }));

    const expires = tokenRequest.status?.expirationTimestamp;
    if (expires) {
      const expiresAt = new Date(expires);
      const grantedSeconds = tokenRequest.spec?.expirationSeconds ?? durationSeconds;
      const capped = grantedSeconds < durationSeconds - 60;
      writeLine(
        io.stderr,
        `export-kubeconfig: token for ${namespace}/${serviceAccount} expires at ${expiresAt.toISOString()}` +
          (capped ? ` (the API server capped the requested ${values.duration ?? '8760h'}; export again before then)` : ''),
      );
    }
    return 0;
  } catch (err) {
    writeLine(io.stderr, `export-kubeconfig: ${err instanceof ValidationError ? err.message : statusMessage(err)}`);
    return 1;
  }
}

function readPemBase64(file: string, what: string): string {
  let pem: Buffer;
  try {
    pem = readFileSync(file);
  } catch (err) {
    throw new ValidationError(`cannot read ${what} ${file}: ${(err as Error).message}`, { cause: err });
  }
  if (!pem.toString('utf8').includes('-----BEGIN CERTIFICATE-----')) throw new ValidationError(`${what} ${file} holds no PEM certificate`);
  return pem.toString('base64');
}

function tokenErrorMessage(err: unknown, where: { namespace: string; serviceAccount: string; context: string; server: string }): string {
  const sa = `service account ${where.namespace}/${where.serviceAccount}`;
  switch (classifyApiError(err)) {
    case 'NotFound':
      return (
        `${sa} not found in context ${where.context}: create the Source first ` +
        `(in that cluster: kind Source, namespace ${where.namespace}, spec.serviceAccountName ${where.serviceAccount}), ` +
        `or create the service account yourself, then run this again`
      );
    case 'Forbidden':
      return `forbidden to create a token for ${sa} in context ${where.context}: ${statusMessage(err)} (needs "create" on serviceaccounts/token)`;
    case 'Unauthorized':
      return `the credentials of context ${where.context} were refused by ${where.server}`;
    case 'Network':
      return `cannot reach ${where.server} (context ${where.context}): ${statusMessage(err)}`;
    default:
      return `cannot create a token for ${sa} in context ${where.context}: ${statusMessage(err)}`;
  }
}
