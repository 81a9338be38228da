import type { Agent } from 'node:http';
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type OutgoingHttpHeaders } from 'node:http2';
import https from 'node:https';
import { isIP } from 'node:net';
import tls from 'node:tls';
import zlib from 'node:zlib';
import {
  AbortError,
  createConfiguration,
  FetchError,
  IsomorphicFetchHttpLibrary,
  Observable,
  ResponseContext,
  ServerConfiguration,
  type HttpLibrary,
  type KubeConfig,
  type RequestContext,
} from '@kubernetes/client-node';
import { ByteAccumulator } from '../core/byte-accumulator.js';
import { checkUntrustedJson, UntrustedJsonError } from '../core/untrusted-json.js';
import { USER_AGENT } from '../core/version.js';
import { connectOptionsOf } from './connection-reuse.js';

export interface ApiHttp2Options {
  /** Sent with every call that has none of its own, on HTTP/2 and HTTP/1.1 alike (default {@link USER_AGENT}). */
  userAgent?: string;
  /** How long a session with no stream open stays open for the next call, in ms (default 30 s, as the HTTP/1.1 pool). */
  idleSessionTimeoutMs?: number;
  /** How long an opening connection (TCP and TLS) may take, in ms (default 10 s). */
  connectTimeoutMs?: number;
  /** How long a ping may go unanswered before the session is taken for dead, in ms (default 15 s). */
  pingTimeoutMs?: number;
  /** The largest answer taken, in bytes once decompressed (default 256 MiB): a bigger one fails the call. */
  maxAnswerBytes?: number;
  /**
   * The most structural JSON tokens (`[`, `{`, `,`) in a JSON answer over 1 MiB once
   * decompressed, with at most 100 levels of nesting (see `checkUntrustedJson`): an answer past
   * either fails the call before client-node parses it, with a `FetchError` of type `max-size`
   * as for too many bytes. For a server that is not trusted, whose few MiB of `[],` would cost
   * hundreds of MiB of heap to parse. Default none: no scan.
   */
  maxAnswerTokens?: number;
}

type Settings = Required<Omit<ApiHttp2Options, 'maxAnswerTokens'>> & Pick<ApiHttp2Options, 'maxAnswerTokens'>;

const DEFAULTS: Settings = {
  userAgent: USER_AGENT,
  idleSessionTimeoutMs: 30_000,
  connectTimeoutMs: 10_000,
  pingTimeoutMs: 15_000,
  maxAnswerBytes: 256 * 1024 * 1024,
};

/** Request headers that HTTP/2 forbids (RFC 9113 §8.2.2); client-node sets none of them today. */
const CONNECTION_HEADERS = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'host']);

/** One server (an origin) reached with one agent's credentials: its session, or why there is none. */
interface Origin {
  session?: ClientHttp2Session;
  /** The session being opened, shared by the calls that wait for it. */
  opening?: Promise<ClientHttp2Session | undefined>;
  /** The server did not choose `h2`: every call goes over HTTP/1.1, as before. */
  http1?: boolean;
}

/** What is known of one session beyond what Node keeps. */
interface SessionState {
  /** Streams open on it: with none, it may close when idle, and it does not hold the process open. */
  streams: number;
  /** A ping is out, to learn whether the connection still answers. */
  pinging: boolean;
}

/**
 * client-node's generated API clients, over one HTTP/2 connection per server and set of
 * credentials instead of a pool of HTTP/1.1 connections. A call then costs the client about
 * two thirds of the CPU (`npm run bench -- api-transport`): no socket, parser and node-fetch
 * stream per call, headers compressed by HPACK. kube-apiserver offers HTTP/2 by ALPN, as every
 * Go server with TLS does.
 *
 * It takes the calls whose agent `reuseConnections` made with a TLS context of its own
 * (see `connectOptionsOf`): the connection is opened with exactly that agent's options (CA,
 * client certificate, server name, verification and, for a Target, the address policy's
 * guarded lookup). Every other call (a proxy, plain http, a body that is not text) goes through
 * client-node's own library. A server that does not choose `h2` gets its calls over HTTP/1.1,
 * with the same agent and the same bounds as on HTTP/2 (not through client-node's library, which
 * reads an answer of any length and follows redirects to any host): the first connection to it
 * asks for `h2` or `http/1.1`, and an answer other than `h2` sends the server's calls to
 * HTTP/1.1 for good.
 *
 * Kept from the HTTP/1.1 path: the call's deadline signal (`withRequestDeadline`) aborts its
 * stream, and the errors are node-fetch's (`FetchError` with the system error's code, or
 * `AbortError`), which `classifyApiError` counts as network failures. Added: an answer is
 * bounded ({@link ApiHttp2Options.maxAnswerBytes}, and in structure by
 * {@link ApiHttp2Options.maxAnswerTokens}), gzip is asked for and undone within the byte
 * bound, a redirect is an answer like any other (never followed), a stream the server refused
 * (REFUSED_STREAM, as after a GOAWAY: the server did not act on it) is sent once more, on a
 * fresh session when the old one is closing, and a session is taken for dead when a ping goes
 * unanswered: a ping goes out when a call's deadline passes and when the session has been
 * silent for the idle timeout with streams open. The server's
 * limit of concurrent streams holds: streams beyond it wait in the session until one ends.
 */
export class ApiHttp2Transport implements HttpLibrary {
  private readonly o: Settings;
  private readonly http1 = new IsomorphicFetchHttpLibrary();
  /** Per agent (one set of credentials), per origin. */
  private readonly origins = new WeakMap<object, Map<string, Origin>>();
  private readonly sessions = new WeakMap<ClientHttp2Session, SessionState>();

  constructor(opts: ApiHttp2Options = {}) {
    this.o = { ...DEFAULTS, ...opts };
  }

  send(request: RequestContext): Observable<ResponseContext> {
    const agent = request.getAgent();
    const connect = connectOptionsOf(agent);
    const body = request.getBody();
    const url = new URL(request.getUrl());
    // Ours, on both paths: without one, the apiserver names our writes' field manager `unknown`.
    if (!Object.keys(request.getHeaders()).some((h) => h.toLowerCase() === 'user-agent')) request.setHeaderParam('User-Agent', this.o.userAgent);
    if (!agent || !connect || url.protocol !== 'https:' || !(body === undefined || typeof body === 'string' || Buffer.isBuffer(body))) {
      return this.http1.send(request);
    }
    return new Observable(this.call(request, this.originOf(agent, url), url, connect, body));
  }

  private originOf(agent: object, url: URL): Origin {
    let byOrigin = this.origins.get(agent);
    if (!byOrigin) this.origins.set(agent, (byOrigin = new Map()));
    let origin = byOrigin.get(url.origin);
    if (!origin) byOrigin.set(url.origin, (origin = {}));
    return origin;
  }

  private async call(request: RequestContext, origin: Origin, url: URL, connect: tls.ConnectionOptions, body: string | Buffer | undefined): Promise<ResponseContext> {
    const signal = request.getSignal();
    for (let attempt = 0; ; attempt++) {
      // An open session is taken at once: waiting on the shared deadline signal costs a listener.
      const session = origin.http1 ? undefined : (usable(origin.session) ?? (await untilAborted(this.sessionFor(origin, url, connect), signal)));
      if (!session) return this.exchangeHttp1(request, url, body);
      try {
        return await this.exchange(session, request, url, body);
      } catch (err) {
        if (attempt === 0 && err instanceof Refused) continue;
        throw err instanceof Refused ? err.cause : err;
      }
    }
  }

  /** The origin's session, opened when there is none (or the last one is closing). */
  private sessionFor(origin: Origin, url: URL, connect: tls.ConnectionOptions): Promise<ClientHttp2Session | undefined> {
    const current = usable(origin.session);
    if (current) return Promise.resolve(current);
    origin.session = undefined;
    if (!origin.opening) {
      origin.opening = this.open(origin, url, connect).finally(() => (origin.opening = undefined));
    }
    return origin.opening;
  }

  /** Opens a TLS connection offering `h2` and `http/1.1`; resolves with its session, or undefined when the server chose HTTP/1.1. */
  private open(origin: Origin, url: URL, connect: tls.ConnectionOptions): Promise<ClientHttp2Session | undefined> {
    return new Promise((resolve, reject) => {
      const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
      const socket = tls.connect({
        ...connect,
        host,
        port: Number(url.port || 443),
        servername: connect.servername ?? (isIP(host) ? undefined : host),
        ALPNProtocols: ['h2', 'http/1.1'],
      });
      const failed = (err: Error) => {
        socket.destroy();
        reject(transportError(url, err, undefined));
      };
      socket.setTimeout(this.o.connectTimeoutMs, () => failed(Object.assign(new Error(`no TLS connection within ${this.o.connectTimeoutMs} ms`), { code: 'ETIMEDOUT' })));
      socket.once('error', failed);
      socket.once('secureConnect', () => {
        socket.setTimeout(0);
        socket.off('error', failed);
        if (socket.alpnProtocol !== 'h2') {
          origin.http1 = true;
          socket.destroy();
          resolve(undefined);
          return;
        }
        const session = http2.connect(url.origin, {
          createConnection: () => socket,
          settings: { enablePush: false, initialWindowSize: 1024 * 1024 },
        });
        this.sessions.set(session, { streams: 0, pinging: false });
        const forget = () => {
          if (origin.session === session) origin.session = undefined;
        };
        session.on('goaway', forget);
        session.on('close', forget);
        // A connection that fails fails its streams, which report it; the session's own error
        // needs a listener, or it would end the process.
        session.on('error', forget);
        session.setTimeout(this.o.idleSessionTimeoutMs, () => {
          if (this.sessions.get(session)!.streams === 0) session.close();
          else this.probe(session);
        });
        session.setLocalWindowSize(8 * 1024 * 1024);
        session.unref();
        origin.session = session;
        resolve(session);
      });
    });
  }

  /** Pings `session` (once at a time) and destroys it when no answer comes within the ping timeout. */
  private probe(session: ClientHttp2Session): void {
    const state = this.sessions.get(session);
    if (!state || state.pinging || session.destroyed) return;
    state.pinging = true;
    const timer = setTimeout(() => session.destroy(new Error(`HTTP/2 ping unanswered for ${this.o.pingTimeoutMs} ms`)), this.o.pingTimeoutMs);
    timer.unref();
    const sent = session.ping((err) => {
      clearTimeout(timer);
      state.pinging = false;
      if (err && !session.destroyed) session.destroy(err);
    });
    if (!sent) {
      clearTimeout(timer);
      state.pinging = false;
    }
  }

  /** One call on one stream: the answer read whole (within the bound) and decompressed. */
  private exchange(session: ClientHttp2Session, request: RequestContext, url: URL, body: string | Buffer | undefined): Promise<ResponseContext> {
    return new Promise((resolve, reject) => {
      const signal = request.getSignal();
      const headers: OutgoingHttpHeaders = {
        ':method': request.getHttpMethod().toString(),
        ':path': url.pathname + url.search,
        'accept-encoding': 'gzip',
      };
      for (const [name, value] of Object.entries(request.getHeaders())) {
        const lower = name.toLowerCase();
        if (!CONNECTION_HEADERS.has(lower)) headers[lower] = value;
      }
      if (body !== undefined) headers['content-length'] = Buffer.byteLength(body);
      const state = this.sessions.get(session)!;
      let stream: ClientHttp2Stream;
      try {
        stream = session.request(headers, { endStream: body === undefined, signal });
      } catch (err) {
        // A session that closed between its lookup and this call: nothing was sent, and a fresh
        // session will take it. Anything else (a header Node refuses) is the call's own fault.
        reject(session.closed || session.destroyed ? new Refused(transportError(url, err, signal)) : err);
        return;
      }
      if (state.streams++ === 0) session.ref();
      // The first of resolve and reject wins; what comes after (the close after an error) is ignored.
      let status = 0;
      const answerHeaders: Record<string, string> = {};
      // Held close to its length however small the frames it comes in.
      const chunks = new ByteAccumulator();
      stream.on('response', (h) => {
        status = Number(h[':status']);
        for (const [name, value] of Object.entries(h)) {
          if (!name.startsWith(':') && value !== undefined) answerHeaders[name] = Array.isArray(value) ? value.join(', ') : String(value);
        }
      });
      stream.on('data', (chunk: Buffer) => {
        if (chunks.length + chunk.length > this.o.maxAnswerBytes) {
          reject(new FetchError(`answer of ${url.pathname} larger than ${this.o.maxAnswerBytes} bytes`, 'max-size'));
          stream.close(http2.constants.NGHTTP2_CANCEL);
          return;
        }
        chunks.push(chunk);
      });
      let ended = false;
      stream.on('end', () => {
        ended = true;
        decoded(url, status, answerHeaders, chunks.take(), this.o).then(resolve, reject);
      });
      const refused = () => stream.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM;
      stream.on('error', (err) => {
        if (signal?.aborted) this.probe(session);
        const why = transportError(url, err, signal);
        reject(refused() ? new Refused(why) : why);
      });
      stream.on('close', () => {
        if (--state.streams === 0) session.unref();
        if (ended) return;
        const why = transportError(url, new Error(`stream closed with code ${stream.rstCode}`), undefined);
        reject(refused() ? new Refused(why) : why);
      });
      if (body !== undefined) stream.end(body);
    });
  }

  /**
   * One call over HTTP/1.1 on the request's own agent (pooled, with the address policy's
   * lookup), bounded as {@link exchange} is: the answer read whole within the bound and
   * decompressed, a redirect given back as it came.
   */
  private exchangeHttp1(request: RequestContext, url: URL, body: string | Buffer | undefined): Promise<ResponseContext> {
    return new Promise((resolve, reject) => {
      const signal = request.getSignal();
      const headers: OutgoingHttpHeaders = { 'accept-encoding': 'gzip' };
      for (const [name, value] of Object.entries(request.getHeaders())) headers[name.toLowerCase()] = value;
      if (body !== undefined) headers['content-length'] = Buffer.byteLength(body);
      const req = https.request(url, { method: request.getHttpMethod().toString(), headers, agent: request.getAgent() as Agent, signal });
      req.on('error', (err) => reject(transportError(url, err, signal)));
      req.on('response', (res) => {
        const answerHeaders: Record<string, string> = {};
        for (const [name, value] of Object.entries(res.headers)) if (value !== undefined) answerHeaders[name] = Array.isArray(value) ? value.join(', ') : value;
        const chunks = new ByteAccumulator();
        res.on('data', (chunk: Buffer) => {
          if (chunks.length + chunk.length > this.o.maxAnswerBytes) {
            reject(new FetchError(`answer of ${url.pathname} larger than ${this.o.maxAnswerBytes} bytes`, 'max-size'));
            req.destroy();
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () => {
          decoded(url, res.statusCode ?? 0, answerHeaders, chunks.take(), this.o).then(resolve, reject);
        });
        res.on('error', (err) => reject(transportError(url, err, signal)));
        res.on('close', () => {
          if (!res.complete) reject(transportError(url, new Error('the connection closed before the answer ended'), signal));
        });
      });
      req.end(body);
    });
  }
}

/**
 * JSON answers up to this length are not scanned: what `JSON.parse` builds from 1 MiB is tens of
 * MiB at worst, and most answers (a read, a write, a page of a few objects) are far shorter.
 */
const UNCHECKED_ANSWER_BYTES = 2 ** 20;

/**
 * An answer read whole: decompressed (gzip only, asked for) within `maxAnswerBytes`, and a JSON
 * one over {@link UNCHECKED_ANSWER_BYTES} scanned against `maxAnswerTokens` when it is set.
 */
async function decoded(url: URL, status: number, headers: Record<string, string>, raw: Buffer, o: Settings): Promise<ResponseContext> {
  const encoding = headers['content-encoding'];
  let plain = raw;
  if (encoding === 'gzip') plain = await gunzipped(url, raw, o.maxAnswerBytes);
  else if (encoding !== undefined && encoding !== 'identity') throw new FetchError(`answer of ${url.pathname} has an encoding not asked for: ${encoding}`, 'invalid-encoding');
  if (o.maxAnswerTokens === undefined || plain.length <= UNCHECKED_ANSWER_BYTES || !parsedAsJson(headers['content-type'])) return answer(status, headers, plain);
  // Decoded once: client-node is handed this same text.
  const text = plain.toString('utf8');
  try {
    checkUntrustedJson(text, { maxTokens: o.maxAnswerTokens });
  } catch (err) {
    // 'max-size', as for too many bytes: a caller that reads a list in pages asks for a smaller one.
    if (err instanceof UntrustedJsonError) throw new FetchError(`answer of ${url.pathname} ${err.message}`, 'max-size');
    throw err;
  }
  return answer(status, headers, plain, text);
}

function gunzipped(url: URL, raw: Buffer, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    zlib.gunzip(raw, { maxOutputLength: maxBytes }, (err, plain) => {
      if (err) reject(new FetchError(`answer of ${url.pathname} does not decompress: ${err.message}`, 'invalid-encoding'));
      else resolve(plain);
    });
  });
}

/**
 * Whether client-node may run `JSON.parse` on an answer of this Content-Type: its generated
 * clients do for a media type `application/<subtype>` with `json` among the `+`-separated parts
 * of the subtype, after dropping parameters, spaces and case (`ObjectSerializer.parse`). Read
 * the same way here, so a server cannot spell its way past the scan. An answer with no
 * Content-Type is scanned too: a kube-apiserver always sends one, and a reader that takes the
 * absence for JSON (OpenAPI's default) would parse it.
 */
function parsedAsJson(contentType: string | undefined): boolean {
  if (contentType === undefined) return true;
  const [mediaType = ''] = contentType.split(';');
  const [type, subtype = ''] = mediaType.trim().toLowerCase().split('/');
  return type === 'application' && subtype.split('+').includes('json');
}

/** `session` when it can take a new stream. */
function usable(session: ClientHttp2Session | undefined): ClientHttp2Session | undefined {
  return session && !session.closed && !session.destroyed ? session : undefined;
}

/** A stream the server did not act on (or that was never sent): safe to send again. */
class Refused extends Error {
  constructor(override readonly cause: Error) {
    super(cause.message);
  }
}

/** `text`: the bytes already decoded, when they were. */
function answer(status: number, headers: Record<string, string>, bytes: Buffer, text?: string): ResponseContext {
  return new ResponseContext(status, headers, { text: async () => text ?? bytes.toString('utf8'), binary: async () => bytes });
}

/** The error node-fetch would have given for the same failure. */
function transportError(url: URL, err: unknown, signal: AbortSignal | undefined): Error {
  if (signal?.aborted) return new AbortError('The operation was aborted.');
  const e = err instanceof Error ? err : new Error(String(err));
  return new FetchError(`request to ${url.origin}${url.pathname} failed, reason: ${e.message}`, 'system', e as NodeJS.ErrnoException);
}

/** `promise`, or an AbortError as soon as `signal` aborts (the promise goes on for others). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(new AbortError('The operation was aborted.'));
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(new AbortError('The operation was aborted.'));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/**
 * Makes the API clients that `kc.makeApiClient` builds from now on send their calls through
 * `transport` (one {@link ApiHttp2Transport} per KubeConfig: its sessions are that
 * KubeConfig's connections). Watches, logs, exec and port-forward do not go through API clients
 * and keep their own connections. Returns `kc`, changed in place.
 */
export function apiCallsOverHttp2(kc: KubeConfig, transport: HttpLibrary = new ApiHttp2Transport()): KubeConfig {
  kc.makeApiClient = function makeApiClient<T>(apiClientType: new (config: ReturnType<typeof createConfiguration>) => T): T {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('No active cluster!');
    return new apiClientType(createConfiguration({ baseServer: new ServerConfiguration(cluster.server, {}), authMethods: { default: kc }, httpApi: transport }));
  } as KubeConfig['makeApiClient'];
  return kc;
}
