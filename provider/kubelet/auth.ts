import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { AuthenticationV1Api, AuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { realClock, type Clock } from '../core/clock.js';

/** An authenticated caller of the kubelet API. */
export interface KubeletUser {
  name: string;
  groups: string[];
  uid?: string;
  extra?: Record<string, string[]>;
}

/**
 * What a request asks to do, in SubjectAccessReview terms: `nodes/<subresource>` for the
 * kubelet's own endpoints; the operator views (`kubectl admiralty`) ask about the object they
 * show instead (a pod, a Target), with its group and namespace.
 */
export interface KubeletRequestAttributes {
  verb: string;
  /** API group; absent for the core group. */
  group?: string;
  resource: string;
  subresource?: string;
  /** Absent for cluster-scoped resources. */
  namespace?: string;
  /** The virtual node the pod is bound to, or the object shown. */
  name: string;
}

/**
 * Authentication and authorization seam of the kubelet server; tests stub it.
 * `authenticate` resolves null when no credentials were presented or they were rejected
 * (the server answers 401); `authorize` resolves false to deny (403).
 */
export interface KubeletAuthorizer {
  authenticate(req: IncomingMessage): Promise<KubeletUser | null>;
  authorize(user: KubeletUser, attrs: KubeletRequestAttributes): Promise<boolean>;
}

const VERBS: Record<string, string> = {
  GET: 'get',
  HEAD: 'get',
  POST: 'create',
  PUT: 'update',
  PATCH: 'patch',
  DELETE: 'delete',
};

/**
 * Maps a request to SAR attributes as the kubelet's `GetRequestAttributes` does for the
 * pod-scoped endpoints we serve, with one hardening. Pure. The verb comes from the HTTP method
 * (SPDY upgrades are POST -> `create`), except that endpoints that run commands or open
 * connections (`interactive`: exec, attach, port-forward) always need `create`: a WebSocket
 * upgrade is a GET, and a kubelet would let a holder of read-only `get nodes/proxy` (a
 * monitoring agent, say) run commands that way. Every path checks subresource `proxy` (not
 * `log`: `nodes/log` guards the kubelet's `/logs/` node files).
 */
export function kubeletRequestAttributes(method: string, nodeName: string, interactive = false): KubeletRequestAttributes {
  const verb = interactive ? 'create' : (VERBS[method.toUpperCase()] ?? method.toLowerCase());
  return { verb, resource: 'nodes', subresource: 'proxy', name: nodeName };
}

/**
 * SAR attributes of a node-scoped read, as the kubelet's `GetRequestAttributes` maps them:
 * `/metrics/...` checks `nodes/metrics`, `/stats/...` checks `nodes/stats` (what metrics-server's
 * ClusterRole grants), with the verb from the HTTP method. Pure.
 */
export function nodeRequestAttributes(method: string, nodeName: string, subresource: 'metrics' | 'stats'): KubeletRequestAttributes {
  return { verb: VERBS[method.toUpperCase()] ?? method.toLowerCase(), resource: 'nodes', subresource, name: nodeName };
}

/** The kubelet's 403 text. Pure. */
export function forbiddenMessage(user: KubeletUser, attrs: KubeletRequestAttributes): string {
  if (attrs.subresource !== undefined) return `Forbidden (user=${user.name}, verb=${attrs.verb}, resource=${attrs.resource}, subresource(s)=[${attrs.subresource}])`;
  const resource = attrs.group ? `${attrs.resource}.${attrs.group}` : attrs.resource;
  return `Forbidden (user=${user.name}, verb=${attrs.verb}, resource=${resource}${attrs.namespace ? `, namespace=${attrs.namespace}` : ''}, name=${attrs.name})`;
}

/** The user carried by a verified client certificate, or null. Pure apart from reading the socket. */
export function userFromClientCertificate(req: IncomingMessage): KubeletUser | null {
  const socket = req.socket as TLSSocket;
  // `authorized` is true only if the peer sent a certificate that chains to the server's `ca`.
  if (!socket || typeof socket.getPeerCertificate !== 'function' || !socket.authorized) return null;
  const cert = socket.getPeerCertificate();
  const cn = cert?.subject?.CN;
  if (!cn) return null;
  const o = cert.subject.O as string | string[] | undefined;
  const name = Array.isArray(cn) ? cn[0] : cn;
  if (name === undefined) return null;
  return { name, groups: o === undefined ? [] : Array.isArray(o) ? o : [o] };
}

/** Extracts a bearer token from the Authorization header. Pure. */
export function bearerToken(req: IncomingMessage): string | undefined {
  const h = req.headers.authorization;
  const m = typeof h === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(h) : null;
  return m?.[1];
}

/**
 * The cache key of an authorization decision: everything the SubjectAccessReview carries, in a
 * canonical form (groups sorted, `extra` keys sorted with their values sorted). Pure. The
 * decision may depend on any of it (a webhook authorizer can read `extra`, e.g. the scopes
 * of an impersonated or token-bound identity), so two users differing only in `extra` must not
 * share a cached answer.
 */
export function decisionCacheKey(user: KubeletUser, attrs: KubeletRequestAttributes): string {
  const extra = Object.keys(user.extra ?? {})
    .sort()
    .map((k) => [k, [...(user.extra?.[k] ?? [])].sort()]);
  return JSON.stringify([user.name, [...user.groups].sort(), user.uid ?? '', extra, [attrs.verb, attrs.group ?? '', attrs.resource, attrs.subresource ?? '', attrs.namespace ?? '', attrs.name]]);
}

/** Options for {@link createKubeletAuthorizer}. */
export interface KubeletAuthorizerOptions {
  /** Client of the source cluster (the one whose apiserver calls us). */
  kubeConfig: KubeConfig;
  clock?: Clock;
  /** How long an allow decision (and an authenticated token) is reused. */
  allowTtlMs?: number;
  /** How long a deny decision (and a rejected token) is reused. */
  denyTtlMs?: number;
  /** Bound on cached entries; the oldest are evicted first. */
  maxEntries?: number;
}

/** A small bounded TTL cache (Map keeps insertion order, so eviction drops the oldest). */
class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; expiresAtMs: number }>();
  constructor(
    private readonly clock: Clock,
    private readonly maxEntries: number,
  ) {}
  get(key: string): V | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.expiresAtMs <= this.clock.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return e.value;
  }
  set(key: string, value: V, ttlMs: number): void {
    this.entries.delete(key);
    this.entries.set(key, { value, expiresAtMs: this.clock.now() + ttlMs });
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }
}

/**
 * The production authorizer, mirroring a kubelet with webhook authn/authz: x509 client
 * certificate (the server must run with `requestCert: true, rejectUnauthorized: false` and the
 * client CA as `ca`), else a bearer token checked by TokenReview; authorization by
 * SubjectAccessReview on `nodes/proxy`. Decisions are cached briefly (defaults 10 s allow /
 * 5 s deny, shorter than the kubelet's, so RBAC changes show quickly). API errors propagate
 * (the server answers 500) and are not cached.
 */
export function createKubeletAuthorizer(opts: KubeletAuthorizerOptions): KubeletAuthorizer {
  const clock = opts.clock ?? realClock;
  const allowTtlMs = opts.allowTtlMs ?? 10_000;
  const denyTtlMs = opts.denyTtlMs ?? 5_000;
  const maxEntries = opts.maxEntries ?? 1000;
  const authn = opts.kubeConfig.makeApiClient(AuthenticationV1Api);
  const authz = opts.kubeConfig.makeApiClient(AuthorizationV1Api);
  const tokens = new TtlCache<KubeletUser | null>(clock, maxEntries);
  const decisions = new TtlCache<boolean>(clock, maxEntries);

  return {
    async authenticate(req) {
      const fromCert = userFromClientCertificate(req);
      if (fromCert) return fromCert;
      const token = bearerToken(req);
      if (!token) return null;
      // Key by a hash so raw tokens do not sit in memory longer than the request.
      const key = createHash('sha256').update(token).digest('hex');
      const cached = tokens.get(key);
      if (cached !== undefined) return cached;
      const review = await authn.createTokenReview({
        body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } },
      });
      const u = review.status?.user;
      const user: KubeletUser | null = review.status?.authenticated && u?.username ? { name: u.username, groups: u.groups ?? [], uid: u.uid, extra: u.extra } : null;
      tokens.set(key, user, user ? allowTtlMs : denyTtlMs);
      return user;
    },

    async authorize(user, attrs) {
      const key = decisionCacheKey(user, attrs);
      const cached = decisions.get(key);
      if (cached !== undefined) return cached;
      const review = await authz.createSubjectAccessReview({
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: {
            user: user.name,
            groups: user.groups,
            uid: user.uid,
            extra: user.extra,
            resourceAttributes: {
              verb: attrs.verb,
              ...(attrs.group ? { group: attrs.group } : {}),
              resource: attrs.resource,
              ...(attrs.subresource !== undefined ? { subresource: attrs.subresource } : {}),
              ...(attrs.namespace ? { namespace: attrs.namespace } : {}),
              name: attrs.name,
            },
          },
        },
      });
      const allowed = review.status?.allowed === true;
      decisions.set(key, allowed, allowed ? allowTtlMs : denyTtlMs);
      return allowed;
    },
  };
}

/** The impersonation headers the operator views honour; any other `Impersonate-*` is refused. */
const IMPERSONATE_USER = 'impersonate-user';
const IMPERSONATE_GROUP = 'impersonate-group';

/**
 * The user a request acts as: `caller` itself, or, when it sends `Impersonate-User` (kubectl
 * `--as`, a kubeconfig's `as:`) and optionally `Impersonate-Group`, that user, once `caller` is
 * authorized to impersonate it and each group (`impersonate` on `users` and `groups`), as the
 * apiserver's impersonation filter does, with `system:authenticated` added as it adds it. Returns
 * a string, the reason for a 403 (or, for headers it does not honour, 400 when it starts with
 * `unsupported`). Uid and extra impersonation are refused rather than dropped: a decision made
 * without them could allow what they would deny.
 */
export async function impersonatedUser(req: IncomingMessage, caller: KubeletUser, auth: Pick<KubeletAuthorizer, 'authorize'>): Promise<KubeletUser | string> {
  const headers = req.headersDistinct;
  const other = Object.keys(headers).filter((h) => h.startsWith('impersonate-') && h !== IMPERSONATE_USER && h !== IMPERSONATE_GROUP);
  if (other.length > 0) return `unsupported impersonation header(s) ${other.join(', ')}: only Impersonate-User and Impersonate-Group are served`;
  const users = headers[IMPERSONATE_USER] ?? [];
  const groups = headers[IMPERSONATE_GROUP] ?? [];
  const [name, ...otherUsers] = users;
  if (name === undefined) return groups.length > 0 ? 'unsupported: Impersonate-Group without Impersonate-User' : caller;
  if (otherUsers.length > 0) return 'unsupported: more than one Impersonate-User';
  for (const [resource, value] of [['users', name] as const, ...groups.map((g) => ['groups', g] as const)]) {
    const attrs: KubeletRequestAttributes = { verb: 'impersonate', resource, name: value };
    if (!(await auth.authorize(caller, attrs))) return forbiddenMessage(caller, attrs);
  }
  return { name, groups: name === 'system:anonymous' ? groups : [...new Set([...groups, 'system:authenticated'])] };
}
