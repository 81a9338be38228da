import http from 'node:http';
import https from 'node:https';
import type { KubeConfig, User } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { statusCode, statusMessage, ValidationError } from '../core/errors.js';
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
  help: { type: 'boolean', short: 'h' },
} as const;

/** The kubectl flags in usage texts. */
export const KUBECTL_FLAGS_USAGE = `  --kubeconfig FILE    kubeconfig to read (default: $KUBECONFIG, else ~/.kube/config)
  --context NAME       context of that kubeconfig (default: its current context)
  --as USER            act as this user (impersonation, as kubectl --as)
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
const NODE_PROXY_TIMEOUT_MS = 30_000;

/**
 * `GET /api/v1/nodes/<node>/proxy/<path>` through the apiserver with the user's credentials: the
 * apiserver authenticates the user and authorizes `get nodes/proxy` on the node, then calls the
 * provider's kubelet API for it (as for `kubectl logs`). Resolves with the status and the body
 * (the provider's text on its refusals; the apiserver's Status on its own).
 */
export async function getThroughNodeProxy(kc: KubeConfig, node: string, path: string): Promise<{ status: number; body: string }> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new ValidationError('the kubeconfig context names no cluster');
  const url = new URL(`${cluster.server.replace(/\/+$/, '')}/api/v1/nodes/${encodeURIComponent(node)}/proxy/${path.replace(/^\/+/, '')}`);
  const opts: https.RequestOptions = { method: 'GET', headers: { Accept: 'application/json' } };
  await kc.applyToHTTPSOptions(opts);
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request(url, { ...opts, signal: AbortSignal.timeout(NODE_PROXY_TIMEOUT_MS) }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_ANSWER_BYTES) req.destroy(new Error(`answer of node ${node} larger than ${MAX_ANSWER_BYTES} bytes`));
        else chunks.push(c);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** The message of an answer that is not 200: the `message` of an apiserver Status, else the text. */
export function answerMessage(body: string): string {
  try {
    const parsed = JSON.parse(body);
    if (typeof parsed?.message === 'string') return parsed.message;
  } catch {
    /* the provider's plain text */
  }
  return body.trim().split('\n')[0].slice(0, 500);
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
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i])))
      .join('   ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}
