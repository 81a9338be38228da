import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorFields } from '../../core/logger.js';
import { buildStatsSummary, renderResourceMetrics } from '../../model/resource-metrics.js';
import { forbiddenMessage, nodeRequestAttributes } from '../auth.js';
import { HttpError, type KubeletContext } from './context.js';
import type { NodeScopedPath } from './paths.js';

/**
 * `GET /metrics/resource[/<node>]` and `GET /stats/summary` of one virtual node (see
 * `parseNodeScopedPath`), authorized on `nodes/metrics` or `nodes/stats` of that node.
 */
export async function serveNodeScoped(ctx: KubeletContext, req: IncomingMessage, res: ServerResponse, path: NodeScopedPath): Promise<void> {
  const started = process.hrtime.bigint();
  const subresource = path.route === 'metricsResource' ? 'metrics' : 'stats';
  let code = 200;
  try {
    const user = await ctx.auth.authenticate(req);
    if (!user) throw new HttpError(401, 'Unauthorized');
    // Without a node name, say "not found" only to callers allowed on that subresource at all.
    const attrs = nodeRequestAttributes(req.method ?? 'GET', path.nodeName ?? '', subresource);
    if (!(await ctx.auth.authorize(user, attrs))) throw new HttpError(403, forbiddenMessage(user, attrs));
    if (!path.nodeName) throw new HttpError(404, `no node named: ask /metrics/resource/<node>, or through the apiserver (nodes/<node>/proxy)`);
    const usage = await ctx.nodeUsage.nodeUsage(path.nodeName);
    if (!usage) throw new HttpError(404, `node ${path.nodeName} is not a virtual node of this provider`);
    if (path.route === 'metricsResource') res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8' }).end(renderResourceMetrics(usage));
    else res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(buildStatsSummary(usage)));
  } catch (err) {
    code = err instanceof HttpError ? err.code : 500;
    if (code >= 500) ctx.logger.warn('kubelet node-scoped request failed', { route: path.route, node: path.nodeName ?? '', ...errorFields(err) });
    if (!res.headersSent) res.writeHead(code, { 'Content-Type': 'text/plain' }).end(code >= 500 ? 'internal error' : (err as Error).message);
  }
  ctx.observe(path.route, code, started);
}
