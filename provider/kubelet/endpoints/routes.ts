import type { Request, Response } from 'express';
import express from 'express';
import { parseOperatorPath } from '../operator-views.js';
import { serveContainerLogs } from './container-logs.js';
import { abandon, HttpError, requestUrl, type KubeletContext } from './context.js';
import { serveNodeScoped } from './node-scoped.js';
import { serveOperatorView } from './operator-view.js';
import { parseNodeScopedPath } from './paths.js';

/**
 * `GET /healthz`. Health probes must work without credentials; a real kubelet serves /healthz on
 * its separate healthz port without auth, so this does not expose more than a kubelet does.
 */
export function serveHealthz(_req: Request, res: Response): void {
  res.type('text/plain').send('ok');
}

/** Any other plain request. */
export function serveNotFound(ctx: KubeletContext, res: Response): void {
  const started = process.hrtime.bigint();
  res.status(404).type('text/plain').send('404 page not found');
  ctx.observe('other', 404, started);
}

/**
 * The path of the request's URL; undefined once it answered 400 to a target the URL parser
 * refuses. Express routes an absolute-form target by the legacy parser's reading of it, which
 * takes what the WHATWG parser refuses (`http://x:99999/metrics/resource`).
 */
function pathnameOr400(ctx: KubeletContext, req: Request, res: Response): string | undefined {
  const started = process.hrtime.bigint();
  try {
    return requestUrl(req).pathname;
  } catch (err) {
    if (!(err instanceof HttpError)) throw err;
    res.status(err.code).type('text/plain').send(err.message);
    ctx.observe('other', err.code, started);
    return undefined;
  }
}

/** The plain (not upgraded) requests, each routed to its endpoint; upgrades go to `serveUpgrade`. */
export function kubeletRoutes(ctx: KubeletContext): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // No caller revalidates an answer: an ETag would only cost a SHA-1 of every body.
  app.disable('etag');
  app.get('/healthz', serveHealthz);
  app.get(/^\/containerLogs\//, (req, res) => {
    serveContainerLogs(ctx, req, res).catch((err: unknown) => abandon(ctx, 'containerLogs', res, err));
  });
  app.get(/^\/(metrics|stats)\//, (req, res, next) => {
    const pathname = pathnameOr400(ctx, req, res);
    if (pathname === undefined) return;
    const path = parseNodeScopedPath(pathname, req.get('x-forwarded-uri'));
    if (!path) return next();
    serveNodeScoped(ctx, req, res, path).catch((err: unknown) => abandon(ctx, path.route, res, err));
  });
  app.get(/^\/admiralty\//, (req, res, next) => {
    const pathname = pathnameOr400(ctx, req, res);
    if (pathname === undefined) return;
    const path = parseOperatorPath(pathname);
    const views = ctx.operatorViews;
    if (!path || !views) return next();
    serveOperatorView(ctx, req, res, path, views).catch((err: unknown) => abandon(ctx, path.view, res, err));
  });
  app.use((_req, res) => serveNotFound(ctx, res));
  return app;
}
