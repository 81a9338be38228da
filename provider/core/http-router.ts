import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
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
  /**
   * Answers the call. A throw or a rejection is answered 500 and logged. The body counts against
   * the {@link BodyBudgetLimits} until this returns: a route reads it at once (parses it) and
   * keeps nothing of it while its answer is pending.
   */
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
  /** Bounds the bodies held at once; default {@link defaultBodyBudget} of the routes. */
  bodyBudget?: BodyBudgetLimits;
  /** Told about every body the router refused for its size, and which limit refused it. */
  onBodyRefused?: (reason: BodyRefusal) => void;
  logger: Logger;
}

/** A request listener for `http.createServer` and `http2.createSecureServer` (HTTP/2 and HTTP/1.1 alike). */
export type Router = (req: AnyRequest, res: AnyResponse) => void;

/** Which limit refused a body: the route's own, or a budget of bodies held at once. */
export type BodyRefusal = 'too_large' | 'connection_budget' | 'server_budget';

/**
 * Bytes of request bodies the router holds at once, from their first byte until the route has
 * taken them (its `handle` returned), not until their answer is sent: a client that never reads
 * its answers (an HTTP/2 client that advertises a zero window) would otherwise keep the budget.
 */
export interface BodyBudgetLimits {
  /**
   * All calls together, less what each connection holds within its reserve. A connection whose
   * client certificate the TLS server verified (the proxy scheduler's: its CA issues no other
   * client certificate) takes none of it, only its own `perConnectionBytes`, so the clients
   * that hold the total cannot starve the extender.
   */
  totalBytes: number;
  /** The calls of one connection: over HTTP/2, all of its streams. */
  perConnectionBytes: number;
  /**
   * What each connection may hold before it takes from `totalBytes`; default 0. Anyone may send
   * to /mutate and stall its body, and the apiserver presents no certificate to be told apart
   * by: with a reserve, a small review on a connection with nothing else in flight is never
   * refused because other connections hold the total. Costs at most this much per connection
   * the server accepts, on top of `totalBytes`.
   */
  reservedPerConnectionBytes?: number;
}

/**
 * The budget a router takes when given none. A route's limit bounds one body, but an HTTP/2
 * connection carries up to 250 calls at once and the server accepts up to 1024 connections, so
 * the bodies held at once need bounds of their own. Per connection, two bodies of the default
 * limit (the apiserver's admission calls are tens of kB each, so 250 of them at once fit), or
 * one of the routes' largest if that is more; in all, 64 MiB (an eighth of the Deployment's
 * memory limit), or two of the largest. With the extender's routes (64 MiB each, for a
 * scheduler that sends whole Nodes) that is 64 MiB per connection and 128 MiB in all. Each
 * connection has {@link RESERVED_BODY_BYTES_PER_CONNECTION} of its own besides.
 */
export function defaultBodyBudget(routes: readonly Route[]): BodyBudgetLimits {
  const largest = Math.max(0, ...routes.filter((r) => r.method !== 'GET').map((r) => r.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES));
  return {
    perConnectionBytes: Math.max(2 * DEFAULT_MAX_BODY_BYTES, largest),
    totalBytes: Math.max(64 * 2 ** 20, 2 * largest),
    reservedPerConnectionBytes: RESERVED_BODY_BYTES_PER_CONNECTION,
  };
}

/**
 * The default {@link BodyBudgetLimits.reservedPerConnectionBytes}: one or two of the apiserver's
 * AdmissionReviews (tens of kB). Over the webhook server's 1024 connections, 64 MiB at most.
 */
export const RESERVED_BODY_BYTES_PER_CONNECTION = 64 * 2 ** 10;

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
 * than identity: neither caller compresses), 500 (a route that threw, logged here), 503 with
 * `Retry-After` (the bodies held at once, on the call's connection or in all, are at their
 * budget: see {@link BodyBudgetLimits}; default {@link defaultBodyBudget}).
 */
export function createRouter(opts: RouterOptions): Router {
  const { logger } = opts;
  const guards = opts.guards ?? [];
  const budget = new BodyBudget(opts.bodyBudget ?? defaultBodyBudget(opts.routes));
  const refuse = (req: AnyRequest, res: AnyResponse, refusal: { reason: BodyRefusal; answer: Answer }) => {
    opts.onBodyRefused?.(refusal.reason);
    if (refusal.reason !== 'too_large') res.setHeader('retry-after', '1');
    refuseBody(req, res, refusal.answer);
  };
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
    readBody(req, res, route.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES, budget.forConnection(connection), (refusal, body) => (refusal ? refuse(req, res, refusal) : call(body!)));
  };
}

/** Counts the body bytes held, in all and per connection (see {@link BodyBudgetLimits}). */
class BodyBudget {
  /** Bytes counted against `totalBytes`. */
  private held = 0;
  /** Bytes each connection holds, and whether it was verified when it started holding them. */
  private readonly byConnection = new Map<Socket, { bytes: number; verified: boolean }>();

  constructor(private readonly limits: BodyBudgetLimits) {}

  /** What one call's body takes from and gives back to the budget of its connection. */
  forConnection(connection: Socket): BodyAccount {
    return { take: (bytes) => this.take(connection, bytes), give: (bytes) => this.give(connection, bytes) };
  }

  private take(connection: Socket, bytes: number): BodyRefusal | undefined {
    const mine = this.byConnection.get(connection) ?? { bytes: 0, verified: hasVerifiedClientCertificate(connection) };
    if (mine.bytes + bytes > this.limits.perConnectionBytes) return 'connection_budget';
    const held = this.held + this.shared(mine.verified, mine.bytes + bytes) - this.shared(mine.verified, mine.bytes);
    if (held > this.limits.totalBytes) return 'server_budget';
    this.byConnection.set(connection, { bytes: mine.bytes + bytes, verified: mine.verified });
    this.held = held;
    return undefined;
  }

  private give(connection: Socket, bytes: number): void {
    const mine = this.byConnection.get(connection);
    if (!mine || bytes === 0) return;
    const left = mine.bytes - bytes;
    this.held -= this.shared(mine.verified, mine.bytes) - this.shared(mine.verified, left);
    if (left > 0) this.byConnection.set(connection, { bytes: left, verified: mine.verified });
    else this.byConnection.delete(connection);
  }

  /** What of a connection's `bytes` counts against `totalBytes`. */
  private shared(verified: boolean, bytes: number): number {
    return verified ? 0 : Math.max(0, bytes - (this.limits.reservedPerConnectionBytes ?? 0));
  }
}

/** Whether the TLS server verified the connection's client certificate against its CAs. */
function hasVerifiedClientCertificate(connection: Socket): boolean {
  return connection instanceof TLSSocket && connection.authorized;
}

interface BodyAccount {
  /** Takes `bytes`, or says which budget has no room for them (and takes nothing). */
  take(bytes: number): BodyRefusal | undefined;
  give(bytes: number): void;
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
 * Reads the body whole, up to `limit` bytes, taking each chunk from `account` as it arrives and
 * giving them all back once `done` has handed the body to the route (or the call is gone). Past the limit (declared
 * or streamed), or past what the budget has room for, `done` gets the refusal at once and the
 * chunks read so far are dropped and given back; what still arrives is discarded. A request
 * that is aborted calls nothing: there is nobody to answer.
 */
function readBody(req: AnyRequest, res: AnyResponse, limit: number, account: BodyAccount, done: (refusal: { reason: BodyRefusal; answer: Answer } | undefined, body?: Buffer) => void): void {
  const declared = Number(req.headers['content-length']);
  const tooLarge = { reason: 'too_large' as const, answer: text(413, `request body is larger than ${limit} bytes`) };
  if (declared > limit) return done(tooLarge);
  let chunks: Buffer[] = [];
  let size = 0;
  let over = false;
  res.once('close', () => account.give(size));
  const stop = (refusal: { reason: BodyRefusal; answer: Answer }) => {
    over = true;
    chunks = [];
    account.give(size);
    size = 0;
    done(refusal);
  };
  req.on('data', (chunk: Buffer) => {
    if (over) return;
    if (size + chunk.length > limit) return stop(tooLarge);
    const full = account.take(chunk.length);
    if (full) return stop({ reason: full, answer: busy(full) });
    size += chunk.length;
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (over) return;
    const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
    chunks = [];
    try {
      done(undefined, body);
    } finally {
      account.give(size);
      size = 0;
    }
  });
  // An aborted request: no answer; the listener only keeps an error from being thrown.
  req.on('error', () => undefined);
}

/** 503 for a body the budget has no room for: the client may try again once others are answered. */
function busy(reason: BodyRefusal): Answer {
  const whose = reason === 'connection_budget' ? 'this connection' : 'the server';
  return text(503, `request bodies in progress on ${whose} are at their limit; try again`);
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
