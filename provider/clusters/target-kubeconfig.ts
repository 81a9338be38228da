import { KubeConfig } from '@kubernetes/client-node';
import { apiCallsOverHttp2, ApiHttp2Transport } from './api-http2.js';
import { reuseConnections } from './connection-reuse.js';
import { parseUntrustedYaml, UntrustedYamlError } from '../core/untrusted-yaml.js';
import type { ServerAddressPolicy } from './server-address-policy.js';

/**
 * A Target's kubeconfig, read by us and not by client-node.
 *
 * The text comes from a Secret, so it is written by whoever may write Secrets and Targets, not
 * by the provider's operator. client-node's own parser acts on it while parsing (it reads a
 * `token-file` from the provider's disk at once) and understands fields that make the provider
 * read files, run commands or dial a proxy. So the text is parsed here against an allowlist,
 * and client-node only ever sees the validated result: inline data and tokens, nothing else.
 */
export interface TargetKubeconfig {
  contextName: string;
  namespace?: string;
  cluster: { name: string; server: string; caData?: string; tlsServerName?: string; skipTLSVerify: boolean };
  user: { name: string; token?: string; certData?: string; keyData?: string };
}

/** A kubeconfig that cannot be used: `reason` for the Target's condition, `message` for people. */
export class KubeconfigError extends Error {
  constructor(
    readonly reason: 'SecretNotFound' | 'SecretKeyMissing' | 'KubeconfigInvalid' | 'KubeconfigUnsupported' | 'ServerNotAllowed',
    message: string,
    /** For a refused text: the fingerprint of that text, so the same text is not parsed again. */
    readonly fingerprint?: string,
  ) {
    super(message);
    this.name = 'KubeconfigError';
  }
}

/**
 * Largest kubeconfig text we parse. Real ones, certificates inline, are a few KB; parsing YAML
 * costs about 1 ms per KB on the event loop, so this bounds what one hostile Secret can take.
 */
const MAX_KUBECONFIG_BYTES = 64 * 1024;
/** Largest token; service-account JWTs are about 1 KiB, OIDC ID tokens a few. */
const MAX_TOKEN_BYTES = 16 * 1024;

/**
 * The largest answer taken from a Target's apiserver, in bytes once decompressed, where the
 * transport's default (kept for the source) is 256 MiB, half the provider's 512Mi memory limit.
 * etcd keeps no object over 1.5 MiB by default, so a read is far below it; a list is read in
 * pages (`limit`, `continue`), and a page that fails as too large (a `FetchError` of type
 * `max-size`) is asked for again smaller.
 */
export const TARGET_MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/**
 * The most structural JSON tokens (`[`, `{`, `,`) in one answer from a Target's apiserver, as for
 * a watch event (`DEFAULT_MAX_EVENT_TOKENS`): 16 MiB of `[],` are 5.6 M empty arrays, about
 * 230 MiB of heap once client-node parses them, where an object etcd can store has at most about
 * 1.5 M. Past it the call fails as too large (`max-size`), so a pager shrinks its page on it too.
 */
export const TARGET_MAX_ANSWER_TOKENS = 2 * 2 ** 20;

// Fields we know and accept, per kind of entry. Anything else is refused by name, with a
// specific hint for the fields that read the provider's files, run commands or add hops.
const TOP_FIELDS = new Set(['apiVersion', 'kind', 'clusters', 'users', 'contexts', 'current-context', 'preferences', 'extensions']);
const CLUSTER_FIELDS = new Set(['server', 'certificate-authority-data', 'tls-server-name', 'insecure-skip-tls-verify', 'disable-compression', 'extensions']);
const USER_FIELDS = new Set(['token', 'client-certificate-data', 'client-key-data', 'extensions']);
// client-node's own exportConfig repeats the context's name inside it.
const CONTEXT_FIELDS = new Set(['cluster', 'user', 'namespace', 'extensions', 'name']);
const WHY_REFUSED: Record<string, string> = {
  'certificate-authority': "reads a file of the provider's machine (use certificate-authority-data)",
  'client-certificate': "reads a file of the provider's machine (use client-certificate-data)",
  'client-key': "reads a file of the provider's machine (use client-key-data)",
  'token-file': "reads a file of the provider's machine (use token)",
  exec: 'runs a command on the provider',
  'auth-provider': 'runs an auth-provider plugin in the provider',
  'proxy-url': "sends the traffic through a proxy of the writer's choosing",
  username: 'is basic authentication, which Kubernetes no longer serves (use token)',
  password: 'is basic authentication, which Kubernetes no longer serves (use token)',
  as: 'impersonates another identity',
  'as-uid': 'impersonates another identity',
  'as-groups': 'impersonates another identity',
  'as-user-extra': 'impersonates another identity',
};

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Parses and validates a Target's kubeconfig text, and selects `context` (default: the
 * current context). Pure apart from the policy's own lookups (none: literal IPs only). Throws
 * KubeconfigError listing every problem found; messages name fields, never their values,
 * so a token or a file path never reaches a status or a log.
 */
export function parseTargetKubeconfig(text: string, opts: { context?: string; policy: ServerAddressPolicy }): TargetKubeconfig {
  let doc: unknown;
  try {
    doc = parseUntrustedYaml(text, { maxBytes: MAX_KUBECONFIG_BYTES });
  } catch (err) {
    if (err instanceof UntrustedYamlError) throw new KubeconfigError('KubeconfigInvalid', `the kubeconfig is ${err.message}`);
    throw err;
  }
  if (!isObj(doc)) throw new KubeconfigError('KubeconfigInvalid', 'not a kubeconfig (expected a mapping)');

  const unsupported: string[] = [];
  const invalid: string[] = [];
  const refuseUnknown = (where: string, o: Obj, allowed: Set<string>) => {
    for (const k of Object.keys(o)) {
      if (allowed.has(k)) continue;
      unsupported.push(`${where}: field "${k}" ${WHY_REFUSED[k] ?? 'is not supported'}`);
    }
  };
  refuseUnknown('kubeconfig', doc, TOP_FIELDS);

  const clusters = namedEntries(doc, 'clusters', 'cluster', invalid);
  const users = namedEntries(doc, 'users', 'user', invalid);
  const contexts = namedEntries(doc, 'contexts', 'context', invalid);
  for (const [name, c] of clusters) refuseUnknown(`cluster "${name}"`, c, CLUSTER_FIELDS);
  for (const [name, u] of users) refuseUnknown(`user "${name}"`, u, USER_FIELDS);
  for (const [name, c] of contexts) refuseUnknown(`context "${name}"`, c, CONTEXT_FIELDS);
  if (unsupported.length) {
    throw new KubeconfigError(
      'KubeconfigUnsupported',
      `${unsupported.join('; ')}; a Target's kubeconfig may only carry a server, inline data (certificate-authority-data, client-certificate-data, client-key-data) and a token`,
    );
  }

  const current = doc['current-context'];
  const contextName = opts.context || (typeof current === 'string' ? current : '');
  if (!contextName) invalid.push("no context selected (set current-context, or the Target's context)");
  const context = contextName ? contexts.get(contextName) : undefined;
  if (contextName && !context) invalid.push(`context "${contextName}" not found`);
  if (invalid.length || !context) throw new KubeconfigError('KubeconfigInvalid', invalid.join('; '));

  const clusterName = stringField(context, 'cluster', `context "${contextName}"`, invalid, true);
  const userName = stringField(context, 'user', `context "${contextName}"`, invalid, false);
  const namespace = stringField(context, 'namespace', `context "${contextName}"`, invalid, false);
  const cluster = clusterName ? clusters.get(clusterName) : undefined;
  if (clusterName && !cluster) invalid.push(`cluster "${clusterName}" not found`);
  const user = userName ? users.get(userName) : undefined;
  if (userName && !user) invalid.push(`user "${userName}" not found`);
  if (invalid.length || !cluster) throw new KubeconfigError('KubeconfigInvalid', invalid.join('; '));

  const cw = `cluster "${clusterName}"`;
  const server = stringField(cluster, 'server', cw, invalid, true);
  const caData = pemData(cluster, 'certificate-authority-data', cw, invalid);
  const tlsServerName = stringField(cluster, 'tls-server-name', cw, invalid, false);
  const skip = cluster['insecure-skip-tls-verify'];
  if (skip !== undefined && typeof skip !== 'boolean') invalid.push(`${cw}: insecure-skip-tls-verify must be true or false`);
  const uw = `user "${userName}"`;
  const token = user ? stringField(user, 'token', uw, invalid, false) : undefined;
  // A token becomes an HTTP header value: anything but visible ASCII would make the request
  // fail with an error whose text is the header itself, token included.
  if (token !== undefined && (token.length > MAX_TOKEN_BYTES || !/^[\x21-\x7e]+$/.test(token))) {
    invalid.push(`${uw}: token must be at most ${MAX_TOKEN_BYTES / 1024} KiB of visible ASCII characters (no spaces, newlines or control characters)`);
  }
  const certData = user ? pemData(user, 'client-certificate-data', uw, invalid) : undefined;
  const keyData = user ? pemData(user, 'client-key-data', uw, invalid) : undefined;
  if (!!certData !== !!keyData) invalid.push(`${uw}: client-certificate-data and client-key-data go together`);
  if (invalid.length) throw new KubeconfigError('KubeconfigInvalid', invalid.join('; '));

  checkServerUrl(server!, cw, opts.policy);
  return {
    contextName,
    namespace,
    cluster: { name: clusterName!, server: server!.replace(/\/$/, ''), caData, tlsServerName, skipTLSVerify: skip === true },
    user: { name: userName ?? '', token, certData, keyData },
  };
}

/**
 * Builds the KubeConfig that client-node uses for a validated Target kubeconfig. Every
 * connection it makes (API calls, watches, exec, logs, port-forward all get their Agent from
 * the KubeConfig) resolves the server's name through the policy's guarded lookup.
 */
export function buildTargetKubeConfig(t: TargetKubeconfig, policy: ServerAddressPolicy): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: t.cluster.name, server: t.cluster.server, caData: t.cluster.caData, skipTLSVerify: t.cluster.skipTLSVerify, tlsServerName: t.cluster.tlsServerName }],
    users: [{ name: t.user.name, token: t.user.token, certData: t.user.certData, keyData: t.user.keyData }],
    contexts: [{ name: t.contextName, cluster: t.cluster.name, user: t.user.name, namespace: t.namespace }],
    currentContext: t.contextName,
  });
  // client-node makes a new Agent per request in a private `createAgent`; replace it on this
  // instance so the lookup is ours, on keep-alive agents shared by the calls (see
  // reuseConnections). The server is https and has no proxy (validated above), so an
  // https.Agent is what client-node would have built. A unit test fails if client-node stops
  // calling this method, rather than the guard silently going away.
  reuseConnections(kc, { lookup: policy.lookup });
  // API calls over one HTTP/2 connection, opened with those agents' options (lookup included),
  // each answer bounded in bytes and in structure: the server is the Secret writer's choice.
  apiCallsOverHttp2(kc, new ApiHttp2Transport({ maxAnswerBytes: TARGET_MAX_ANSWER_BYTES, maxAnswerTokens: TARGET_MAX_ANSWER_TOKENS }));
  return kc;
}

/** `list` of `{ name, <inner>: {...} }` entries as a map by name; problems go to `invalid`. */
function namedEntries(doc: Obj, list: string, inner: string, invalid: string[]): Map<string, Obj> {
  const out = new Map<string, Obj>();
  const value = doc[list];
  if (value === undefined || value === null) return out;
  if (!Array.isArray(value)) {
    invalid.push(`${list} must be a list`);
    return out;
  }
  value.forEach((e, i) => {
    if (!isObj(e) || typeof e.name !== 'string' || !e.name) return invalid.push(`${list}[${i}] needs a name`);
    if (!isObj(e[inner])) return invalid.push(`${list}[${i}] ("${e.name}") needs a ${inner} mapping`);
    if (out.has(e.name)) return invalid.push(`${list}: "${e.name}" appears twice`);
    for (const k of Object.keys(e)) if (k !== 'name' && k !== inner) invalid.push(`${list}[${i}] ("${e.name}"): field "${k}" is not supported`);
    out.set(e.name, e[inner] as Obj);
  });
  return out;
}

function stringField(o: Obj, key: string, where: string, invalid: string[], required: boolean): string | undefined {
  const v = o[key];
  if (v === undefined || v === null || v === '') {
    if (required) invalid.push(`${where}: ${key} is missing`);
    return undefined;
  }
  if (typeof v !== 'string') {
    invalid.push(`${where}: ${key} must be a string`);
    return undefined;
  }
  return v;
}

/** A base64 field that must hold PEM (certificates, keys). */
function pemData(o: Obj, key: string, where: string, invalid: string[]): string | undefined {
  const v = stringField(o, key, where, invalid, false);
  if (v === undefined) return undefined;
  const compact = v.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(compact) || !Buffer.from(compact, 'base64').toString('latin1').includes('-----BEGIN ')) {
    invalid.push(`${where}: ${key} must be base64-encoded PEM`);
    return undefined;
  }
  return compact;
}

/**
 * The server must be a plain https URL: no credentials in it, no query or fragment (a trailing
 * `?` would turn every API path into a query string of another endpoint), and no literal
 * address the policy refuses. Names are checked again, address by address, at connect time.
 */
function checkServerUrl(server: string, where: string, policy: ServerAddressPolicy): void {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new KubeconfigError('KubeconfigInvalid', `${where}: server is not a URL`);
  }
  if (url.protocol !== 'https:') {
    throw new KubeconfigError('KubeconfigInvalid', `${where}: server must be an https URL, not ${url.protocol.replace(/:$/, '')} (credentials would cross the network in clear)`);
  }
  const problems: string[] = [];
  if (url.username || url.password) problems.push('it may not carry a user name or password');
  if (server.includes('?') || server.includes('#')) problems.push('it may not have a query or a fragment');
  if (problems.length) throw new KubeconfigError('KubeconfigInvalid', `${where}: server https://${url.host}: ${problems.join('; ')}`);
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const why = policy.refusal(host);
  if (why) throw new KubeconfigError('ServerNotAllowed', `${where}: server address ${host} is not allowed: ${why}`);
}
