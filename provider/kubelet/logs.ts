import https from 'node:https';
import http from 'node:http';
import type { Readable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';

/** Validated `/containerLogs` options (kubelet query names). Absent means "not set". */
export interface ContainerLogOptions {
  follow: boolean;
  previous: boolean;
  timestamps: boolean;
  sinceSeconds?: number;
  /** RFC 3339, passed through as received. */
  sinceTime?: string;
  tailLines?: number;
  limitBytes?: number;
}

/** Where the delegate lives: the target cluster's KubeConfig and the delegate's name there. */
export interface LogTarget {
  kubeConfig: KubeConfig;
  namespace: string;
  pod: string;
}

/** Upstream refused the log request; `statusCode` is reused for our response. */
export class LogUpstreamError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
  ) {
    super(message);
    this.name = 'LogUpstreamError';
  }
}

/**
 * Streams a container's log from wherever the delegate runs. Resolves once the upstream
 * answered 200 with the body as a Readable; rejects with LogUpstreamError on a non-200.
 * Aborting `signal` must end the upstream request (the client went away).
 */
export interface LogBackend {
  streamLogs(target: LogTarget, container: string, opts: ContainerLogOptions, signal: AbortSignal): Promise<Readable>;
}

const INT = /^\d+$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

function parseBool(name: string, raw: string | null): boolean | string {
  if (raw === null) return false;
  const v = raw.toLowerCase();
  if (v === 'true' || v === '1' || v === '') return true;
  if (v === 'false' || v === '0') return false;
  return `invalid value for ${name}: "${raw}" is not a boolean`;
}

function parseInt(name: string, raw: string | null, min: number): number | undefined | string {
  if (raw === null) return undefined;
  if (!INT.test(raw) || raw.length > 15) return `invalid value for ${name}: "${raw}" is not a non-negative integer`;
  const n = Number(raw);
  if (n < min) return `invalid value for ${name}: must be greater than or equal to ${min}`;
  return n;
}

/**
 * Parses and validates the `/containerLogs` query. Pure. Returns the options, or an error
 * message for a 400. Rules follow the API validation of PodLogOptions: sinceSeconds >= 1,
 * tailLines >= 0, limitBytes >= 1, sinceTime RFC 3339, sinceSeconds and sinceTime exclusive.
 */
export function parseLogQuery(query: URLSearchParams): ContainerLogOptions | string {
  const follow = parseBool('follow', query.get('follow'));
  const previous = parseBool('previous', query.get('previous'));
  const timestamps = parseBool('timestamps', query.get('timestamps'));
  for (const v of [follow, previous, timestamps]) if (typeof v === 'string') return v;
  const sinceSeconds = parseInt('sinceSeconds', query.get('sinceSeconds'), 1);
  const tailLines = parseInt('tailLines', query.get('tailLines'), 0);
  const limitBytes = parseInt('limitBytes', query.get('limitBytes'), 1);
  for (const v of [sinceSeconds, tailLines, limitBytes]) if (typeof v === 'string') return v;
  const sinceTime = query.get('sinceTime') ?? undefined;
  if (sinceTime !== undefined && (!RFC3339.test(sinceTime) || Number.isNaN(Date.parse(sinceTime)))) {
    return `invalid value for sinceTime: "${sinceTime}" is not an RFC 3339 time`;
  }
  if (sinceTime !== undefined && sinceSeconds !== undefined) return 'at most one of sinceTime or sinceSeconds may be specified';
  const out: ContainerLogOptions = { follow: follow as boolean, previous: previous as boolean, timestamps: timestamps as boolean };
  if (sinceSeconds !== undefined) out.sinceSeconds = sinceSeconds as number;
  if (sinceTime !== undefined) out.sinceTime = sinceTime;
  if (tailLines !== undefined) out.tailLines = tailLines as number;
  if (limitBytes !== undefined) out.limitBytes = limitBytes as number;
  return out;
}

/** The `pods/log` query for the target apiserver. Pure. Zero values are kept (unlike client-node's Log). */
export function podLogQuery(container: string, opts: ContainerLogOptions): URLSearchParams {
  const q = new URLSearchParams({ container });
  if (opts.follow) q.set('follow', 'true');
  if (opts.previous) q.set('previous', 'true');
  if (opts.timestamps) q.set('timestamps', 'true');
  if (opts.sinceSeconds !== undefined) q.set('sinceSeconds', String(opts.sinceSeconds));
  if (opts.sinceTime !== undefined) q.set('sinceTime', opts.sinceTime);
  if (opts.tailLines !== undefined) q.set('tailLines', String(opts.tailLines));
  if (opts.limitBytes !== undefined) q.set('limitBytes', String(opts.limitBytes));
  return q;
}

/**
 * LogBackend over the target's `pods/log`, as a raw HTTPS request authenticated through the
 * target KubeConfig's `applyToHTTPSOptions`. Not client-node's `Log`: in 1.4 it drops
 * `tailLines: 0` and `limitBytes: 0`, swallows body errors and loses the upstream status.
 */
export function createTargetLogBackend(): LogBackend {
  return {
    async streamLogs(target, container, opts, signal) {
      const cluster = target.kubeConfig.getCurrentCluster();
      if (!cluster) throw new LogUpstreamError(500, 'target kubeconfig has no current cluster');
      const url = new URL(`${cluster.server.replace(/\/+$/, '')}/api/v1/namespaces/${encodeURIComponent(target.namespace)}/pods/${encodeURIComponent(target.pod)}/log?${podLogQuery(container, opts)}`);
      const reqOpts: https.RequestOptions = { method: 'GET', headers: {} };
      await target.kubeConfig.applyToHTTPSOptions(reqOpts);
      const mod = url.protocol === 'https:' ? https : http;
      return new Promise<Readable>((resolve, reject) => {
        const req = mod.request(url, { ...reqOpts, signal }, (res) => {
          if (res.statusCode === 200) return resolve(res);
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            // Like the apiserver, read at most ~50 kB of an error body.
            if (size < 50_000) chunks.push(c);
            size += c.length;
          });
          res.on('end', () => {
            const body = Buffer.concat(chunks).toString('utf8');
            let message = body;
            try {
              const parsed = JSON.parse(body) as { message?: string };
              if (typeof parsed.message === 'string') message = parsed.message;
            } catch {
              /* plain text body */
            }
            reject(new LogUpstreamError(res.statusCode ?? 502, message || `upstream answered ${res.statusCode}`));
          });
          res.on('error', (err) => reject(new LogUpstreamError(502, err.message)));
        });
        req.on('error', (err) => reject(signal.aborted ? err : new LogUpstreamError(502, `target unreachable: ${err.message}`)));
        req.end();
      });
    },
  };
}
