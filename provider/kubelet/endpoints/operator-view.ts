import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorFields } from '../../core/logger.js';
import { forbiddenMessage, impersonatedUser } from '../auth.js';
import type { OperatorPath, OperatorViews } from '../operator-views.js';
import { HttpError, type KubeletContext } from './context.js';

/**
 * The operator views (`kubectl admiralty`), asked by the user's CLI directly: authenticated as
 * every call here, acting as the impersonated user when asked (see `impersonatedUser`), and
 * authorized on what is shown: `get` on the pod explained, on the Target whose summary is read.
 * Who may read a pod may know why it is placed where it is; nodes/proxy is not needed.
 */
export async function serveOperatorView(ctx: KubeletContext, req: IncomingMessage, res: ServerResponse, path: OperatorPath, views: OperatorViews): Promise<void> {
  const started = process.hrtime.bigint();
  let code: number;
  try {
    const caller = await ctx.auth.authenticate(req);
    if (!caller) throw new HttpError(401, 'Unauthorized');
    const user = await impersonatedUser(req, caller, ctx.auth);
    if (typeof user === 'string') throw new HttpError(user.startsWith('unsupported') ? 400 : 403, user);
    const attrs = path.view === 'explain' ? { verb: 'get', resource: 'pods', namespace: path.namespace, name: path.pod } : views.summaryAttributes(path.node);
    if (!attrs) throw new HttpError(404, `node ${path.view === 'summary' ? path.node : ''} is not a virtual node of this provider`);
    if (!(await ctx.auth.authorize(user, attrs))) throw new HttpError(403, forbiddenMessage(user, attrs));
    const answer = path.view === 'summary' ? await views.summary(path.node) : await views.explain(path.namespace, path.pod);
    code = answer.code;
    if ('body' in answer) res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(answer.body));
    else res.writeHead(code, { 'Content-Type': 'text/plain' }).end(answer.message);
  } catch (err) {
    code = err instanceof HttpError ? err.code : 500;
    if (code >= 500) ctx.logger.warn('kubelet operator view failed', { route: path.view, ...errorFields(err) });
    if (!res.headersSent) res.writeHead(code, { 'Content-Type': 'text/plain' }).end(code >= 500 ? 'internal error' : (err as Error).message);
  }
  ctx.observe(path.view, code, started);
}
