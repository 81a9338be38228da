import { createHash } from 'node:crypto';
import type { Agent } from 'node:http';
import https, { type AgentOptions } from 'node:https';
import type { LookupFunction } from 'node:net';
import tls from 'node:tls';
import type { Cluster, KubeConfig, RequestContext, User } from '@kubernetes/client-node';

export interface ConnectionReuseOptions {
  /**
   * Resolves the server's name for every new connection (a Target's kubeconfig: the
   * ServerAddressPolicy's guarded lookup). With it, every agent is an https one: the caller has
   * checked that the server is https and has no proxy.
   */
  lookup?: LookupFunction;
  /**
   * How long an idle connection stays open for the next request, in ms (default 30 s): below
   * kube-apiserver's own idle timeout (90 s), so the client closes first and a request never
   * races the server's close of the connection it was written on.
   */
  idleSocketTimeoutMs?: number;
}

/** Distinct credential sets (a rotated client certificate, a renewed CA) kept per KubeConfig. */
const MAX_AGENTS = 4;

/**
 * Makes the connections that client-node opens through `kc` last beyond one request.
 *
 * client-node 1.4 builds a new `https.Agent` (keep-alive off) in its private `createAgent` for
 * every API call, watch and stream, so every call paid a TCP connect and a full TLS handshake
 * (with client certificates: RSA signatures on both sides) and left its socket in TIME_WAIT.
 * Here `createAgent` hands out one keep-alive agent per set of TLS options (the same CA,
 * client certificate and key, server name and verification: the same connection), so calls
 * share a pool of open connections. Options are compared by content: client-node re-reads
 * certificate files on each call, and a rotated certificate gets a fresh agent (and fresh
 * connections). A kubeconfig with a proxy or a plain-http server keeps client-node's own agent.
 *
 * Each agent holds its TLS context, built once ({@link agentWith}), and a call whose options are
 * those of the previous call skips the digest: client-node decodes the certificates again for
 * every call, and both the digest and Node's own per-connection context were visible in the
 * provider's profile.
 *
 * Safe for every kind of request client-node makes: an aborted request (deadline, watch
 * restart) destroys its socket rather than returning it to the pool, a WebSocket upgrade takes
 * its socket out of the pool, and the idle timeout applies to pooled sockets only (an open
 * watch or log stream is never cut by it).
 *
 * The API calls' authentication is replayed where nothing of it can change
 * ({@link replayStaticAuthentication}), so it goes first: `withRequestDeadline` wraps it after,
 * and a `kc` already wrapped is refused. Returns `kc`, changed in place.
 */
export function reuseConnections(kc: KubeConfig, opts: ConnectionReuseOptions = {}): KubeConfig {
  if (Object.prototype.hasOwnProperty.call(kc, 'applySecurityAuthentication')) {
    throw new Error('reuseConnections must come before anything that wraps applySecurityAuthentication (withRequestDeadline)');
  }
  type CreateAgent = (cluster: Cluster | null, options: AgentOptions) => Agent;
  const target = kc as unknown as { createAgent: CreateAgent };
  const own = target.createAgent.bind(kc);
  const agents = new Map<string, https.Agent>();
  /** The options of the previous call and their key: most calls repeat them. */
  let last: { options: AgentOptions; key: string } | undefined;
  target.createAgent = (cluster, options) => {
    if (!opts.lookup && (!cluster || cluster.proxyUrl || !cluster.server.startsWith('https:'))) return own(cluster, options);
    const withLookup = opts.lookup ? { lookup: opts.lookup } : {};
    const key = last && sameOptions(last.options, options) ? last.key : agentKey(options);
    // Options that cannot be compared by content (a function, a KeyObject): an agent of its
    // own, as client-node would make.
    if (key === undefined) return new https.Agent({ ...options, ...withLookup });
    last = { options, key };
    let agent = agents.get(key);
    if (agent) {
      // Most recently used last: the oldest set of credentials is the first to go.
      agents.delete(key);
    } else {
      agent = agentWith({ ...options, keepAlive: true, timeout: options.timeout ?? opts.idleSocketTimeoutMs ?? 30_000, ...withLookup });
      // A dropped agent is not destroyed: its requests in flight finish, and its idle sockets
      // close after the idle timeout.
      if (agents.size >= MAX_AGENTS) agents.delete(agents.keys().next().value!);
    }
    agents.set(key, agent);
    return agent;
  };
  replayStaticAuthentication(kc);
  return kc;
}

/**
 * Whether every credential of `user` and `cluster` is in the kubeconfig itself: no file (which
 * client-node reads again on each call, so that a rotated one is used), no exec plugin and no
 * auth provider (whose tokens expire).
 */
function staticCredentials(user: User, cluster: Cluster | null): boolean {
  return !user.exec && !user.authProvider && !user.certFile && !user.keyFile && !cluster?.caFile;
}

/**
 * client-node works out each API call's authentication anew: it decodes the CA, the client
 * certificate and the key from base64, finds the user's authenticator, builds the TLS options
 * and asks `createAgent` for the agent (which compares those options with the last ones). For a
 * current user and cluster with {@link staticCredentials}, none of it can come out otherwise
 * than the first time, so the first call's headers and agent are kept and set on the next
 * calls. Kept per user and cluster object: loading another kubeconfig, or switching context,
 * makes new ones and so a new first call. Any other user goes through client-node every time,
 * as does every call when client-node's method asks more of the context than the headers and
 * the agent (a later version): it then runs on the call's own context.
 */
function replayStaticAuthentication(kc: KubeConfig): void {
  const own = kc.applySecurityAuthentication.bind(kc);
  let kept: { user: User; cluster: Cluster | null; headers: [string, string][]; agent: unknown } | undefined;
  let replayable = true;
  kc.applySecurityAuthentication = async (context: RequestContext) => {
    const user = kc.getCurrentUser();
    const cluster = kc.getCurrentCluster();
    if (!replayable || !user || !staticCredentials(user, cluster)) return own(context);
    if (kept?.user !== user || kept.cluster !== cluster) {
      const headers: [string, string][] = [];
      let agent: unknown;
      const recorder = {
        setHeaderParam: (name: string, value: string) => void headers.push([name, value]),
        setAgent: (a: unknown) => void (agent = a),
      };
      try {
        await own(recorder as unknown as RequestContext);
      } catch (err) {
        if (!(err instanceof TypeError)) throw err;
        replayable = false;
        return own(context);
      }
      kept = { user, cluster, headers, agent };
    }
    for (const [name, value] of kept.headers) context.setHeaderParam(name, value);
    if (kept.agent !== undefined) context.setAgent(kept.agent as Agent);
  };
}

/** What goes into a TLS context and nowhere else. */
const CONTEXT_OPTIONS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'crl'] as const;

/**
 * An agent whose connections share one TLS context, built here from `options`: without it,
 * Node builds a context (parsing the CA, the certificate and the key) for every connection,
 * and stringifies them into the pool's name on every request. Options that make no context
 * (PEMs that do not parse) go to the agent as they are, so the connection fails as it would.
 */
function agentWith(options: AgentOptions): https.Agent {
  let secureContext: tls.SecureContext;
  try {
    secureContext = tls.createSecureContext(options);
  } catch {
    return new https.Agent(options);
  }
  const rest: Record<string, unknown> = { ...options };
  for (const name of CONTEXT_OPTIONS) delete rest[name];
  const agent = new https.Agent({ ...rest, secureContext });
  const connect: tls.ConnectionOptions = { secureContext };
  for (const name of CONNECT_OPTIONS) if (rest[name] !== undefined) (connect as Record<string, unknown>)[name] = rest[name];
  connectOptions.set(agent, connect);
  return agent;
}

/** Of an agent's options, those a connection takes beside its TLS context (which holds the rest: keys, CA, versions, ciphers). */
const CONNECT_OPTIONS = ['servername', 'rejectUnauthorized', 'checkServerIdentity', 'lookup'] as const;

/** The TLS options of the agents {@link reuseConnections} made with a context of their own. */
const connectOptions = new WeakMap<Agent, tls.ConnectionOptions>();

/**
 * How `agent`'s connections are opened (its TLS context, server name, verification and lookup),
 * for another transport to open the same connection (see `api-http2.ts`); undefined for an
 * agent that {@link reuseConnections} did not make, or made without a context of its own.
 */
export function connectOptionsOf(agent: unknown): tls.ConnectionOptions | undefined {
  return typeof agent === 'object' && agent !== null ? connectOptions.get(agent as Agent) : undefined;
}

/** Whether two sets of options are equal by content (Buffers by bytes), without a digest. */
function sameOptions(a: AgentOptions, b: AgentOptions): boolean {
  const names = Object.keys(a);
  if (names.length !== Object.keys(b).length) return false;
  const equal = (x: unknown, y: unknown): boolean => (Buffer.isBuffer(x) && Buffer.isBuffer(y) ? x.equals(y) : x === y);
  return names.every((name) => {
    const x = (a as Record<string, unknown>)[name];
    const y = (b as Record<string, unknown>)[name];
    if (Array.isArray(x) && Array.isArray(y)) return x.length === y.length && x.every((v, i) => equal(v, y[i]));
    return equal(x, y);
  });
}

/** A digest of the options that decide what a connection is (never kept in clear: they hold keys). */
function agentKey(options: AgentOptions): string | undefined {
  const h = createHash('sha256');
  for (const name of Object.keys(options).sort()) {
    const value = (options as Record<string, unknown>)[name];
    if (value === undefined) continue;
    h.update(name).update('\0');
    for (const v of Array.isArray(value) ? value : [value]) {
      if (Buffer.isBuffer(v)) h.update(v);
      else if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') h.update(String(v));
      else return undefined;
      h.update('\0');
    }
    h.update('\n');
  }
  return h.digest('hex');
}
