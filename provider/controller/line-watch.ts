import http from 'node:http';
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { ByteAccumulator } from '../core/byte-accumulator.js';
import { parseUntrustedJson } from '../core/untrusted-json.js';
import type { WatchStarter } from './informer.js';

/**
 * The longest watch event taken, in bytes: etcd keeps no object over 1.5 MiB by default, so an
 * event ten times that is not an object of a healthy apiserver. It bounds what a server can make
 * us hold for one unfinished line.
 */
export const DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024;

/**
 * The most structural JSON tokens (`[`, `{`, `,`) in one watch event, as for the webhook's
 * AdmissionReview: an object etcd can store has at most about 1.5 M (protobuf spends at least 2
 * bytes on each item, member or empty object). A 16 MiB event of `[],` is 5.6 M empty arrays,
 * about 230 MiB of heap and a second of `JSON.parse`; 16 MiB of nested arrays, 480 MiB of RSS.
 */
export const DEFAULT_MAX_EVENT_TOKENS = 2 * 2 ** 20;

/**
 * Events up to this length are parsed without the scan: what `JSON.parse` builds from 1 MiB is
 * tens of MiB at worst, and the scan costs a third of the parse of a pod's event, on every
 * event of every watch.
 */
const UNCHECKED_EVENT_BYTES = 2 ** 20;

/** How much of a refused watch's answer (a Status) is read, for its message. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

export interface LineWatchOptions {
  /** See {@link DEFAULT_MAX_EVENT_BYTES}. */
  maxEventBytes?: number;
  /** See {@link DEFAULT_MAX_EVENT_TOKENS}. */
  maxEventTokens?: number;
}

/** A watch that ended in an HTTP status other than 200: its code, and the Status it came with. */
export class WatchStatusError extends Error {
  constructor(
    readonly statusCode: number,
    readonly body: string,
  ) {
    super(`watch answered HTTP ${statusCode}`);
    this.name = 'WatchStatusError';
  }
}

/**
 * Watches a Kubernetes collection and hands each event to `onEvent`, as client-node's `Watch`
 * does (the same query, `watch=true`, the kubeconfig's authentication and agent), reading the
 * stream itself: each chunk is cut at its newlines and each line parsed once, where `Watch`
 * passes the body through two streams and readline (its string decoding and line splitting),
 * which cost the provider about half as much CPU again as the parse. And it bounds the
 * unfinished line it holds
 * ({@link LineWatchOptions.maxEventBytes}): past it the watch ends with an error (the informer
 * starts again, with backoff), where readline would buffer a line of any length.
 *
 * As with `Watch`: a line that is not JSON, or whose handler throws, is skipped, and so is a
 * line of over 1 MiB that nests deeper or holds more tokens than an object of Kubernetes can
 * (see `parseUntrustedJson`, {@link LineWatchOptions.maxEventTokens}), before it is parsed; `done` is
 * called once, with nothing when the server ends the watch, with the error otherwise
 * ({@link WatchStatusError} for an HTTP status other than 200, which carries it as `statusCode`).
 * `abort()` ends the request.
 */
export class LineWatch implements WatchStarter {
  constructor(
    private readonly kc: KubeConfig,
    private readonly o: LineWatchOptions = {},
  ) {}

  async watch(path: string, query: Record<string, string | number | boolean | undefined>, onEvent: (type: string, obj: unknown) => void, done: (err: unknown) => void): Promise<{ abort(): void }> {
    const cluster = this.kc.getCurrentCluster();
    if (!cluster) throw new Error('no current cluster in the kubeconfig');
    const url = new URL(cluster.server.replace(/\/+$/, '') + path);
    url.searchParams.set('watch', 'true');
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, String(v));
    const options: https.RequestOptions = {};
    await this.kc.applyToHTTPSOptions(options);
    const maxEventBytes = this.o.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
    const maxTokens = this.o.maxEventTokens ?? DEFAULT_MAX_EVENT_TOKENS;

    let finished = false;
    /** Ends the watch once; a watch that did not end cleanly has its connection closed. */
    const finish = (err: unknown) => {
      if (finished) return;
      finished = true;
      if (err) req.destroy();
      done(err);
    };
    const request = url.protocol === 'http:' ? http.request : https.request;
    // As Watch (through client-node's fetch options): the agent (which holds the TLS options),
    // the headers and basic credentials; the TLS options themselves stay out of the request's,
    // where Node would name the agent's connection pool by them on every request.
    const req = request(url, { agent: options.agent, auth: options.auth, method: 'GET', headers: { ...options.headers, Accept: 'application/json' } });
    req.on('socket', (socket) => socket.setKeepAlive(true, 30_000));
    req.on('error', finish);
    req.on('response', (res) => {
      res.on('error', finish);
      if (res.statusCode !== 200) {
        const code = res.statusCode ?? 0;
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (text: string) => {
          if (body.length < MAX_ERROR_BODY_BYTES) body += text.slice(0, MAX_ERROR_BODY_BYTES - body.length);
          else res.destroy();
        });
        res.on('end', () => finish(new WatchStatusError(code, body)));
        res.on('close', () => finish(new WatchStatusError(code, body)));
        return;
      }
      const lines = new LineSplitter(maxEventBytes, (line) => {
        let event: { type?: unknown; object?: unknown };
        try {
          const text = line.toString('utf8');
          event = (line.length > UNCHECKED_EVENT_BYTES ? parseUntrustedJson(text, { maxTokens }) : JSON.parse(text)) as typeof event;
        } catch {
          return;
        }
        try {
          onEvent(String(event?.type), event?.object);
        } catch {
          /* as Watch does: the handler's own failure is not the watch's */
        }
      });
      res.on('data', (chunk: Buffer) => {
        if (finished) return;
        if (!lines.push(chunk)) finish(new Error(`watch of ${path}: an event of over ${maxEventBytes} bytes (the server's answer is not a Kubernetes watch)`));
      });
      // Ended or closed: as with Watch, the informer resumes from the last version it saw.
      res.on('end', () => finish(null));
      res.on('close', () => finish(null));
    });
    req.end();
    return { abort: () => finish(Object.assign(new Error('watch aborted'), { name: 'AbortError' })) };
  }
}

/**
 * Cuts a byte stream at its newlines, handing on each non-empty line; holds at most
 * `maxLineBytes` of an unfinished one, in memory close to that however small the chunks it came
 * in (see {@link ByteAccumulator}).
 */
export class LineSplitter {
  private readonly pending = new ByteAccumulator();

  constructor(
    private readonly maxLineBytes: number,
    private readonly onLine: (line: Buffer) => void,
  ) {}

  /** Takes a chunk; false (and nothing more is taken) once an unfinished line is over the bound. */
  push(chunk: Buffer): boolean {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      start = nl + 1;
      if (this.pending.length + piece.length > this.maxLineBytes) return false;
      let line = piece;
      if (this.pending.length > 0) {
        this.pending.push(piece);
        line = this.pending.take();
      }
      if (line.length > 0) this.onLine(line);
    }
    if (start < chunk.length) {
      if (this.pending.length + chunk.length - start > this.maxLineBytes) return false;
      this.pending.push(chunk.subarray(start));
    }
    return true;
  }
}
