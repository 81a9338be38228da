import { TLSSocket } from 'node:tls';
import type { Socket } from 'node:net';
import { json, type Guard } from '../provider/core/http-router.js';
import { Counter, Registry } from 'prom-client';
import type { Logger } from '../provider/core/logger.js';
import { EXTENDER_PATH_PREFIX } from './extender-server.js';

/** Common name of the client certificate the provider issues to the proxy scheduler. */
export const PROXY_SCHEDULER_CLIENT_CN = 'admiralty-proxy-scheduler';

/** Why a caller of the extender was refused; the `reason` label of the refusal counter. */
export type ExtenderClientRefusal = 'no_certificate' | 'untrusted_certificate' | 'wrong_identity';

/** The verdict of {@link checkExtenderClient}. */
export type ExtenderClientVerdict = { ok: true } | { ok: false; reason: ExtenderClientRefusal; status: 401 | 403; message: string };

/**
 * Whether the connection `socket` carries a client certificate that the TLS server verified
 * against its `ca` (our CAs) and whose subject common name is `commonName`. Pure apart from
 * reading the socket's TLS state. A plain TCP socket (no TLS) counts as no certificate.
 *
 * The server must be created with `requestCert: true, rejectUnauthorized: false`: the
 * apiserver calls the webhook on the same port without a certificate, so the handshake must
 * not require one, and the verdict is made here, per request, from `socket.authorized`.
 */
export function checkExtenderClient(socket: Socket, commonName: string): ExtenderClientVerdict {
  const peer = socket instanceof TLSSocket ? socket.getPeerCertificate() : undefined;
  if (!peer || Object.keys(peer).length === 0) {
    return { ok: false, reason: 'no_certificate', status: 401, message: "the scheduler extender requires a client certificate (the proxy scheduler's, from Secret admiralty-proxy-scheduler-client)" };
  }
  if (!(socket as TLSSocket).authorized) {
    const why = (socket as TLSSocket).authorizationError;
    return { ok: false, reason: 'untrusted_certificate', status: 401, message: `the client certificate is not signed by the provider's CA${why ? ` (${String(why)})` : ''}` };
  }
  // Node gives a string, or an array when the subject has several CNs: only exactly one counts.
  const cn = peer.subject?.CN;
  if (cn !== commonName) {
    return { ok: false, reason: 'wrong_identity', status: 403, message: `client certificate CN ${JSON.stringify(cn ?? '')} may not call the scheduler extender (want ${JSON.stringify(commonName)})` };
  }
  return { ok: true };
}

export interface ExtenderClientGuardOptions {
  logger: Logger;
  /** Expected subject common name; default {@link PROXY_SCHEDULER_CLIENT_CN}. */
  commonName?: string;
  /** Where `admiralty_scheduler_extender_refused_requests_total` is registered; default a fresh registry. */
  metricsRegistry?: Registry;
}

/**
 * The guard of the extender's routes (`createRouter`'s {@link Guard} on `EXTENDER_PATH_PREFIX`):
 * lets a call through only from the proxy scheduler ({@link checkExtenderClient}); anything
 * else gets 401 (no or untrusted certificate) or 403 (another identity) with a JSON body
 * `{ "Error": reason }` (the field kube-scheduler reads from extender answers), before its body
 * is read, is logged at warn, and counted in `admiralty_scheduler_extender_refused_requests_total{reason}`.
 *
 * Without it, anyone who reaches the webhook port could call bind, making the provider create
 * delegates and bind pending proxies to any virtual node, past the filter.
 */
export function createExtenderClientGuard(opts: ExtenderClientGuardOptions): Guard {
  const commonName = opts.commonName ?? PROXY_SCHEDULER_CLIENT_CN;
  const refused = new Counter({
    name: 'admiralty_scheduler_extender_refused_requests_total',
    help: "Scheduler extender calls refused before any work: no client certificate, one not signed by our CA, or not the proxy scheduler's (reason).",
    labelNames: ['reason'] as const,
    registers: [opts.metricsRegistry ?? new Registry()],
  });
  // The verdict of a connection does not change: its certificate was verified at the handshake
  // (a CA swap applies to new connections). kube-scheduler keeps its connection open (one
  // HTTP/2 connection carries all its calls), so the check (getPeerCertificate builds the
  // certificate's object) runs once per connection, not per call. Under TLS 1.2 a client may
  // renegotiate with another certificate: checked per call.
  const verdicts = new WeakMap<Socket, ExtenderClientVerdict>();
  return {
    prefix: EXTENDER_PATH_PREFIX,
    check: ({ path, connection }) => {
      let verdict = verdicts.get(connection);
      if (!verdict) {
        verdict = checkExtenderClient(connection, commonName);
        if (connection instanceof TLSSocket && connection.getProtocol() === 'TLSv1.3') verdicts.set(connection, verdict);
      }
      if (verdict.ok) return undefined;
      refused.inc({ reason: verdict.reason });
      opts.logger.warn('scheduler extender: caller refused', { reason: verdict.reason, path, remoteAddress: connection.remoteAddress, message: verdict.message });
      return json(verdict.status, { Error: verdict.message });
    },
  };
}
