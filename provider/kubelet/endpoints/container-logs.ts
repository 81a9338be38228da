import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorFields } from '../../core/logger.js';
import { LogUpstreamError, parseLogQuery } from '../logs.js';
import { admit, HttpError, requestUrl, type KubeletContext } from './context.js';
import { parseKubeletPath } from './paths.js';

/**
 * `GET /containerLogs/{ns}/{pod}/{container}`: the delegate's log from its target, streamed
 * until either side goes away. Failures are answered here (a target's status code is passed
 * on, the details of a 5xx only logged).
 */
export async function serveContainerLogs(ctx: KubeletContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const started = process.hrtime.bigint();
  const ac = new AbortController();
  // The client (apiserver) went away: end the upstream request too.
  res.on('close', () => ac.abort());
  try {
    const url = requestUrl(req);
    const path = parseKubeletPath(url.pathname);
    if (!path) throw new HttpError(404, '404 page not found');
    const { resolved } = await admit(ctx, req, path);
    const options = parseLogQuery(url.searchParams);
    if (typeof options === 'string') throw new HttpError(400, options);
    const body = await ctx.backends.logs.streamLogs(resolved.target, path.container, options, ac.signal);
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Cache-Control': 'no-cache' });
    res.flushHeaders();
    body.on('error', () => res.destroy());
    body.pipe(res);
    await new Promise<void>((resolve) => res.on('close', () => resolve()));
    if (!body.destroyed) body.destroy();
    ctx.observe('containerLogs', 200, started);
  } catch (err) {
    const code = err instanceof HttpError || err instanceof LogUpstreamError ? (err instanceof HttpError ? err.code : err.statusCode) : 500;
    if (code >= 500) ctx.logger.warn('kubelet logs request failed', { route: 'containerLogs', ...errorFields(err) });
    if (!res.headersSent && !res.destroyed) {
      res.writeHead(code, { 'Content-Type': 'text/plain' });
      // The details of an internal failure (a TokenReview's answer, a target's) are for the log.
      res.end(code >= 500 ? 'internal error' : (err as Error).message);
    } else {
      res.destroy();
    }
    ctx.observe('containerLogs', code, started);
  }
}
