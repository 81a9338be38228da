import https from 'node:https';
import tls from 'node:tls';
import { CoreV1Api, type KubeConfig, type User } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { statusCode, statusMessage, ValidationError } from '../core/errors.js';
import { firstLine } from '../core/text.js';
import { loadKubeconfig, type LoadedKubeconfig } from './load-kubeconfig.js';

/** What `status` and `explain` share of kubectl's global flags. */
export interface OperatorFlags {
  kubeconfig?: string;
  context?: string;
  /** `--as`: impersonate this user, as kubectl does (the kubeconfig's `as:` works too). */
  as?: string;
}

/** `parseArgs` options of the kubectl flags both commands take. */
export const KUBECTL_FLAG_OPTIONS = {
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  namespace: { type: 'string', short: 'n' },
  output: { type: 'string', short: 'o' },
  as: { type: 'string' },
  'provider-address': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The kubectl flags in usage texts. */
export const KUBECTL_FLAGS_USAGE = `  --kubeconfig FILE    kubeconfig to read (default: $KUBECONFIG, else ~/.kube/config)
  --context NAME       context of that kubeconfig (default: its current context)
  --as USER            act as this user (impersonation, as kubectl --as)
  --provider-address HOST:PORT
                       the provider's kubelet API, when its virtual node's address (what the
                       apiserver dials) is not reachable from here or the node cannot be read
  -o, --output FORMAT  json, yaml or wide (default: a table)`;

/** Output formats: a table (default), a wider table, or the same data as JSON or YAML. */
export type OutputFormat = 'table' | 'wide' | 'json' | 'yaml';

/** Parses `-o`; a ValidationError names the formats. */
export function parseOutputFormat(value: string | undefined): OutputFormat {
  if (value === undefined) return 'table';
  if (value === 'wide' || value === 'json' || value === 'yaml') return value;
  throw new ValidationError(`unknown output format ${JSON.stringify(value)}: use json, yaml or wide`);
}

/** JSON or YAML of a report. */
export function formatData(data: unknown, format: 'json' | 'yaml'): string {
  return format === 'json' ? JSON.stringify(data, null, 2) : stringify(data, { lineWidth: 0 }).trimEnd();
}

/** The user's kubeconfig as kubectl finds it, acting as `--as` when given. */
export function loadOperatorKubeconfig(flags: OperatorFlags, env: Readonly<Record<string, string | undefined>>): LoadedKubeconfig {
  const loaded = loadKubeconfig({ kubeconfig: flags.kubeconfig, context: flags.context, env });
  if (flags.as) {
    const user = loaded.kc.getCurrentUser();
    if (!user) throw new ValidationError(`context ${loaded.context} names no user to act as ${flags.as} with`);
    // client-node sends Impersonate-User for a user with `as:`; users are read-only, so the
    // context's user is replaced by a copy that impersonates.
    loaded.kc.users = loaded.kc.users.map((u): User => (u.name === user.name ? { ...u, impersonateUser: flags.as } : u));
  }
  return loaded;
}

/** The namespace of the context, when it names one. */
export function contextNamespace(kc: KubeConfig): string | undefined {
  return kc.getContextObject(kc.getCurrentContext())?.namespace;
}

/** A refusal or failure of the apiserver, with what to tell the user. */
export class ApiCallError extends Error {
  constructor(
    readonly code: number | undefined,
    message: string,
  ) {
    super(message);
    this.name = 'ApiCallError';
  }
}

/**
 * Runs an API call and turns its failure into an ApiCallError whose message says what was
 * attempted (`what`, e.g. `list Targets`) and the apiserver's answer: a 403 reads
 * `forbidden to <what>: <the apiserver's message>`.
 */
export async function apiCall<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    const code = statusCode(err);
    const why = statusMessage(err);
    if (code === 403) throw new ApiCallError(code, `forbidden to ${what}: ${why}`);
    if (code === 401) throw new ApiCallError(code, `not authenticated to ${what}: ${why}`);
    throw new ApiCallError(code, `cannot ${what}: ${why}`);
  }
}

/** Largest answer of the provider read (an explanation lists one entry per target). */
const MAX_ANSWER_BYTES = 4 * 2 ** 20;
const PROVIDER_TIMEOUT_MS = 30_000;

/** Where the provider's kubelet API listens for a virtual node, and the name its certificate must carry. */
export interface ProviderAddress {
  host: string;
  port: number;
  /** What the serving certificate is checked against: the node's address, even when reached elsewhere. */
  identity: string;
}

/**
 * The provider's kubelet API for a virtual node: where the apiserver dials it (the node's
 * InternalIP and `daemonEndpoints.kubeletEndpoint.Port`), read as the user (`get nodes`), or
 * `override` (`--provider-address HOST:PORT`, e.g. through a tunnel) with the certificate still
 * checked against the node's address when the node can be read.
 */
export async function providerAddress(kc: KubeConfig, node: string, override?: string): Promise<ProviderAddress> {
  let fromNode: ProviderAddress | undefined;
  let nodeError: string | undefined;
  try {
    const n = await apiCall(`read node ${node}`, () => kc.makeApiClient(CoreV1Api).readNode({ name: node }));
    const ip = n.status?.addresses?.find((a) => a.type === 'InternalIP')?.address;
    const port = n.status?.daemonEndpoints?.kubeletEndpoint?.Port;
    if (ip && port) fromNode = { host: ip, port, identity: ip };
    else nodeError = `node ${node} publishes no InternalIP and kubelet port`;
  } catch (err) {
    nodeError = (err as Error).message;
  }
  if (override) {
    const [, hostPart, portPart] = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(override) ?? [];
    if (hostPart === undefined || portPart === undefined) throw new ValidationError(`--provider-address ${override}: use HOST:PORT`);
    const host = hostPart.replace(/^\[|\]$/g, '');
    return { host, port: Number(portPart), identity: fromNode?.identity ?? host };
  }
  if (!fromNode) throw new ApiCallError(undefined, `cannot find the provider: ${nodeError} (pass --provider-address HOST:PORT of its kubelet API)`);
  return fromNode;
}

/**
 * `GET <path>` on the provider's kubelet API with the user's credentials (client certificate or
 * token, and `Impersonate-User` for `--as`), trusting the kubeconfig's cluster CA, which signs
 * the provider's kubelet serving certificate (as it signs kubelets'). Resolves with the status
 * and the body (JSON on 200, the provider's text otherwise).
 */
export async function getFromProvider(kc: KubeConfig, address: ProviderAddress, path: string): Promise<{ status: number; body: string }> {
  const opts: https.RequestOptions = { method: 'GET', headers: { Accept: 'application/json' } };
  await kc.applyToHTTPSOptions(opts);
  // The cluster's tls-server-name names the apiserver, not the provider.
  delete opts.servername;
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        ...opts,
        host: address.host,
        port: address.port,
        path,
        checkServerIdentity: (_host, cert) => tls.checkServerIdentity(address.identity, cert),
        signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS),
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_ANSWER_BYTES) req.destroy(new Error(`the provider's answer is larger than ${MAX_ANSWER_BYTES} bytes`));
          else chunks.push(c);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', (err) => reject(new ApiCallError(undefined, `cannot reach the provider's kubelet API at ${address.host}:${address.port}: ${err.message}`)));
    req.end();
  });
}

/** The first line of the provider's text answer, bounded. */
export function answerMessage(body: string): string {
  return firstLine(body.trim()).slice(0, 500);
}

/** An age as kubectl prints it: `45s`, `3m12s`, `5h`, `2d`. Pure. */
export function formatAge(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return `${m}m${s % 60}s`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}

/** Columns padded as kubectl's tables (three spaces apart; the last column unpadded). Pure. */
export function renderTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      // A cell past the header's columns has no width to pad to.
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('   ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}
