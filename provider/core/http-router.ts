import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { Socket } from 'node:net';
import { errorFields, type Logger } from './logger.js';

/** A request of either protocol: the router only uses what HTTP/1.1 and HTTP/2 share. */
export type AnyRequest = IncomingMessage | Http2ServerRequest;
/** A response of either protocol. */
export type AnyResponse = ServerResponse | Http2ServerResponse;

/** What a route answers: a status with a JSON value or a text. */
export type Answer = { status: number; json: unknown } | { status: number; text: string };

/** An answer with a JSON body. */
export function json(status: number, value: unknown): Answer {
  return { status, json: value };
}

/** An answer with a plain-text body. */
export function text(status: number, value: string): Answer {
  return { status, text: value };
}

/** What a route and a guard see of a call. */
export interface RouteCall {
  /** The path, without the query. */
  path: string;
  /**
   * The TLS (or TCP) connection the call came on: for HTTP/2, the session's socket, the same
   * object for every stream of the session, so it can key what holds for the connection.
   */
  connection: Socket;
  /** The whole body (empty for GET). */
  body: Buffer;
}

/** One method and exact path. */
export interface Route {
  method: 'GET' | 'POST';
  path: string;
  /** Largest body accepted, in bytes; a larger one gets 413 without being buffered. Default {@link DEFAULT_MAX_BODY_BYTES}. */
  maxBodyBytes?: number;
  /** Answers the call. A throw or a rejection is answered 500 and logged. */
  handle(call: RouteCall): Answer | Promise<Answer>;
}

/** Decides, before the body is read, whether calls under `prefix` may go on. */
export interface Guard {
  /** A path prefix: the guard applies to `prefix` and to paths under `prefix/`. */
  prefix: string;
  /** An answer refuses the call; undefined lets it through. */
  check(call: Omit<RouteCall, 'body'>): Answer | undefined;
}

export interface RouterOptions {
  routes: readonly Route[];
  /** Checked in order before the route is looked up. */
  guards?: readonly Guard[];
  logger: Logger;
}

/** A request listener for `http.createServer` and `http2.createSecureServer` (HTTP/2 and HTTP/1.1 alike). */
export type Router = (req: AnyRequest, res: AnyResponse) => void;

/** Body limit of a route that sets none: an AdmissionReview carries a pod, which etcd bounds at about 1.5 MB. */
export const DEFAULT_MAX_BODY_BYTES = 8 * 2 ** 20;

const EMPTY = Buffer.alloc(0);

/**
 * A small router for the webhook's port, which serves the apiserver's admission calls and
 * kube-scheduler's extender calls over HTTP/2 as well as HTTP/1.1. Express cannot serve
 * `node:http2`'s requests (it gives each request the prototype of an HTTP/1.1 message), and
 * these few routes need none of its features: exact paths, a guard per prefix, a bounded body
 * read whole, a JSON or text answer with its length.
 *
 * Answers of its own: 404 (no such path), 405 (with `Allow`), 413 (declared or streamed body
 * past the route's limit; the rest of the body is not kept), 415 (a `Content-Encoding` other
 * than identity: neither caller compresses), 500 (a route that threw, logged here).
 */
export function createRouter(opts: RouterOptions): Router {
  const { logger } = opts;
  const guards = opts.guards ?? [];
  const byPath = new Map<string, Route[]>();
  for (const route of opts.routes) byPath.set(route.path, [...(byPath.get(route.path) ?? []), route]);

  const finish = (req: AnyRequest, res: AnyResponse, path: string, answer: Answer | Promise<Answer>): void => {
    if (!(answer instanceof Promise)) return send(res, answer);
    answer.then(
      (a) => send(res, a),
      (err) => {
        logger.error('request failed', { path, method: req.method, ...errorFields(err) });
        send(res, text(500, 'internal error'));
      },
    );
  };

  return (req, res) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const connection = connectionOf(req);
    for (const guard of guards) {
      if (path !== guard.prefix && !path.startsWith(`${guard.prefix}/`)) continue;
      const refused = guard.check({ path, connection });
      if (refused) return send(res, refused);
    }
    const routes = byPath.get(path);
    if (!routes) return send(res, text(404, 'not found'));
    const route = routes.find((r) => r.method === req.method);
    if (!route) {
      res.setHeader('allow', routes.map((r) => r.method).join(', '));
      return send(res, text(405, `method ${req.method} not allowed`));
    }
    const call = (body: Buffer) => {
      let answer: Answer | Promise<Answer>;
      try {
        answer = route.handle({ path, connection, body });
      } catch (err) {
        answer = Promise.reject(err);
      }
      finish(req, res, path, answer);
    };
    if (route.method === 'GET') return call(EMPTY);
    const encoding = req.headers['content-encoding'];
    if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
      return refuseBody(req, res, text(415, `content encoding ${JSON.stringify(encoding)} is not supported`));
    }
    readBody(req, route.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES, (refusal, body) => (refusal ? refuseBody(req, res, refusal) : call(body!)));
  };
}

/**
 * The connection a request came on. For HTTP/2, the session's socket: `req.socket` is a new
 * object per stream there, and a guard keys its verdicts by connection.
 */
function connectionOf(req: AnyRequest): Socket {
  return isHttp2(req) ? (req.stream.session?.socket as Socket) : req.socket;
}

/** Whether `req` came over HTTP/2. */
export function isHttp2(req: AnyRequest): req is Http2ServerRequest {
  return req.httpVersionMajor === 2;
}

/**
 * Reads the body whole, up to `limit` bytes. Past it (declared or streamed) `done` gets a 413
 * at once and the chunks read so far are dropped; what still arrives is discarded. A request
 * that is aborted calls nothing: there is nobody to answer.
 */
function readBody(req: AnyRequest, limit: number, done: (refusal: Answer | undefined, body?: Buffer) => void): void {
  const declared = Number(req.headers['content-length']);
  const tooLarge = text(413, `request body is larger than ${limit} bytes`);
  if (declared > limit) return done(tooLarge);
  let chunks: Buffer[] = [];
  let size = 0;
  let over = false;
  req.on('data', (chunk: Buffer) => {
    if (over) return;
    size += chunk.length;
    if (size > limit) {
      over = true;
      chunks = [];
      done(tooLarge);
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (!over) done(undefined, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
  });
  // An aborted request: no answer; the listener only keeps an error from being thrown.
  req.on('error', () => undefined);
}

/**
 * Answers a request whose body is not read (whole). Over HTTP/1.1 the connection then closes:
 * what is left of the body would otherwise be read as the next request's bytes, or read for
 * nothing. Over HTTP/2 only the stream ends.
 */
function refuseBody(req: AnyRequest, res: AnyResponse, answer: Answer): void {
  if (!isHttp2(req)) res.setHeader('connection', 'close');
  send(res, answer);
}

function send(res: AnyResponse, answer: Answer): void {
  // The client may be gone (a reset stream, a closed connection): nothing to write to.
  if (res.headersSent || res.writableEnded || res.destroyed) return;
  const isJson = 'json' in answer;
  const body = isJson ? JSON.stringify(answer.json) : answer.text;
  res.statusCode = answer.status;
  res.setHeader('content-type', isJson ? 'application/json' : 'text/plain; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(body));
  res.end(body);
}
